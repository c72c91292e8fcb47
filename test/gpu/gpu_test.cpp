// The runtime's CUDA subset: device selection, an NCCL process group with
// world size 1 (and the Reducer on it), autocast bf16/fp16 on CUDA, the
// "16-mixed" loss scaler checked against PyTorch's CUDA AMP kernels, and a
// checkpoint saved on the GPU and loaded on the CPU, and fsdp's trigger
// (StorageMaterializer) on device memory: released units brought back by
// the operators of a forward and of a backward (which runs on autograd's
// device thread), bit for bit, with the peak device memory it saves.
//
//   fabric_gpu_test          needs CUDA; fails if there is none
//   fabric_gpu_test --cpu    dry run: the same checks on CPU where they mean
//                            something there, the CUDA-only ones reported as
//                            skipped by name
//
// Ends with "N passed, N failed, N skipped"; exit code 1 on any failure.
#include <fabric/fabric.h>

#include "utilities/c10d_compat.h"
#include "strategies/storage_materializer.h"

#ifdef FABRIC_GPU_TEST_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace {

int passed = 0, failed = 0, skipped = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "  ok    " : "  FAIL  ") << what << std::endl;
  (ok ? passed : failed)++;
}
void skip(const std::string& what, const std::string& why) {
  std::cout << "  skip  " << what << " (" << why << ")" << std::endl;
  ++skipped;
}
template <class Exception = std::exception>
bool throws(const std::function<void()>& body) {
  try {
    body();
  } catch (const Exception&) {
    return true;
  }
  return false;
}
void section(const std::string& name, const std::function<void()>& body) {
  std::cout << name << std::endl;
  try {
    body();
  } catch (const std::exception& error) {
    check(false, name + ": unexpected exception: " + error.what());
  }
}
bool close(const torch::Tensor& a, const torch::Tensor& b, double tol = 1e-5) {
  return a.sizes() == b.sizes() &&
         torch::allclose(a.detach().cpu().to(torch::kDouble), b.detach().cpu().to(torch::kDouble),
                         tol, tol);
}

struct NetImpl : torch::nn::Module {
  NetImpl() : fc1(register_module("fc1", torch::nn::Linear(8, 16))),
              fc2(register_module("fc2", torch::nn::Linear(16, 4))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

std::string accelerator_name(bool cuda) { return cuda ? "cuda" : "cpu"; }

}  // namespace

int main(int argc, char** argv) {
  const bool cpu_mode = argc > 1 && std::string(argv[1]) == "--cpu";
  const bool cuda = torch::cuda::is_available();
  if (!cpu_mode && !cuda) {
    std::cerr << "fabric_gpu_test: CUDA is not available (no GPU, or a CPU LibTorch); "
                 "run with --cpu for the dry run" << std::endl;
    return 1;
  }
  const bool use_cuda = cuda && !cpu_mode;
  const torch::Device device = use_cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const c10::DeviceType device_type = device.type();
  std::cout << "fabric_gpu_test: LibTorch " << TORCH_VERSION << ", device " << device
            << ", CUDA devices visible: " << (cuda ? torch::cuda::device_count() : 0)
#ifdef USE_C10D_NCCL
            << ", USE_C10D_NCCL"
#endif
            << std::endl;

  // ---------------------------------------------------------------- devices
  section("device selection", [&] {
    if (!use_cuda) {
      fabric::Fabric f(fabric::Options().accelerator("auto"));
      check(f.device() == torch::Device(torch::kCPU) && f.world_size() == 1,
            "accelerator auto -> cpu without CUDA");
      check(throws<std::invalid_argument>([] { fabric::Fabric g(fabric::Options().accelerator("cuda")); }),
            "accelerator cuda without CUDA is an error");
      skip("cuda device indices", "no CUDA");
      return;
    }
    {
      fabric::Fabric f(fabric::Options().accelerator("auto"));
      f.launch();
      check(f.device() == torch::Device(torch::kCUDA, 0), "accelerator auto -> cuda:0");
      check(f.world_size() == 1 && f.is_global_zero(), "one process, rank 0");
    }
    {
      fabric::Fabric f(fabric::Options().accelerator("gpu").devices({0}));
      check(f.device() == torch::Device(torch::kCUDA, 0), "devices [0] -> cuda:0");
    }
    {
      fabric::Fabric f(fabric::Options().accelerator("cuda").devices(1));
      f.launch();
      Net model;
      torch::optim::SGD optimizer(model->parameters(), 0.1);
      f.setup(model, optimizer);
      check(model->fc1->weight.device() == f.device(), "setup moves the model to cuda:0");
      auto data = torch::randn({32, 8});
      auto target = torch::randn({32, 4});
      auto loader = f.setup_dataloader<torch::data::samplers::SequentialSampler>(
          torch::data::datasets::TensorDataset(torch::cat({data, target}, 1))
              .map(torch::data::transforms::Stack<torch::data::TensorExample>()),
          8);
      bool on_device = true;
      for (auto& batch : *loader) on_device = on_device && batch.data.device() == f.device();
      check(on_device, "loader batches arrive on cuda:0");
    }
    const int visible = static_cast<int>(torch::cuda::device_count());
    check(throws<std::invalid_argument>([&] {
            fabric::Fabric f(fabric::Options().accelerator("cuda").devices(visible + 1));
          }),
          "devices=" + std::to_string(visible + 1) + " with " + std::to_string(visible) +
              " visible is an error");
    check(throws<std::invalid_argument>([&] {
            fabric::Fabric f(fabric::Options().accelerator("cuda").devices({visible}));
          }),
          "a device index past the visible ones is an error");
  });

  // ------------------------------------------------------- process groups
  // The runtime builds no group for one process; the group and Reducer
  // constructors of the compatibility header are exercised directly here.
  auto reducer_check = [&](const fabric::detail::c10d_compat::ProcessGroupPtr& group,
                           const std::string& name) {
    torch::manual_seed(1);
    Net model;
    model->to(device);
    Net reference;
    reference->to(device);
    {
      torch::NoGradGuard no_grad;
      auto src = model->parameters();
      auto dst = reference->parameters();
      for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
    }
    std::vector<at::Tensor> params = model->parameters();
    auto assignment = c10d::compute_bucket_assignment_by_size(
        params, {1024 * 1024, 25 * 1024 * 1024}, std::vector<bool>(params.size(), false));
    auto buckets = std::get<0>(assignment);
    auto limits = std::get<1>(assignment);
    std::reverse(buckets.begin(), buckets.end());
    std::reverse(limits.begin(), limits.end());
    auto reducer = fabric::detail::c10d_compat::make_reducer(
        params, buckets, limits, group, 25 * 1024 * 1024, 1024 * 1024, /*find_unused_parameters=*/false,
        /*param_names=*/{});
    auto x = torch::randn({16, 8}, device);
    for (int step = 0; step < 2; ++step) {
      model->zero_grad();
      reference->zero_grad();
      reducer->prepare_for_forward();
      reducer->rebuild_buckets();
      reducer->prepare_for_backward({});
      model->forward(x).pow(2).mean().backward();
      reference->forward(x).pow(2).mean().backward();
    }
    bool same = true;
    auto a = model->parameters();
    auto b = reference->parameters();
    for (size_t i = 0; i < a.size(); ++i) same = same && close(a[i].grad(), b[i].grad());
    check(same, name + ": Reducer gradients (world size 1) equal plain backward");
  };

#ifdef USE_C10D_NCCL
  // fsdp's collectives on CUDA tensors, called as strategies/fsdp.cpp calls
  // them: the flat all-gather and reduce-scatter (world size 1: identities).
  auto fsdp_collectives_check = [&](const fabric::detail::c10d_compat::ProcessGroupPtr& group,
                                    const std::string& name) {
    auto shard = torch::arange(8, torch::TensorOptions().dtype(torch::kFloat).device(device));
    auto gathered = torch::full({8}, -1.0, shard.options());
    group->_allgather_base(gathered, shard)->wait();
    check(close(gathered, shard), name + ": flat all-gather of the shards");
    auto buffer = torch::arange(10, shard.options());
    auto output = torch::empty({10}, shard.options());
    c10d::ReduceScatterOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    group->_reduce_scatter_base(output, buffer, options)->wait();
    check(close(output, buffer), name + ": flat reduce-scatter (sum over 1 rank) is the identity");
  };
#endif

  section("process group, world size 1", [&] {
    c10d::TCPStoreOptions store_options;
    store_options.port = 0;
    store_options.isServer = true;
    store_options.numWorkers = 1;
    store_options.waitWorkers = false;
    store_options.timeout = std::chrono::seconds(60);
    auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
    const auto timeout = std::chrono::milliseconds(60000);
    if (use_cuda) {
#ifdef USE_C10D_NCCL
      auto group = fabric::detail::c10d_compat::make_nccl_group(store, 0, 1, timeout);
      check(group->getSize() == 1 && group->getRank() == 0, "NCCL group: rank 0 of 1");
      auto t = torch::arange(6, torch::TensorOptions().dtype(torch::kFloat).device(device));
      std::vector<at::Tensor> tensors{t.clone()};
      group->allreduce(tensors)->wait();
      check(close(tensors[0], t), "NCCL allreduce (sum over 1 rank) is the identity");
      std::vector<at::Tensor> broadcast{t.clone()};
      c10d::BroadcastOptions options;
      options.rootRank = 0;
      group->broadcast(broadcast, options)->wait();
      check(close(broadcast[0], t), "NCCL broadcast from rank 0");
      std::vector<at::Tensor> module_state{t.clone()};
      c10d::broadcast_coalesced(group, module_state, 250 * 1024 * 1024, 0);
      check(close(module_state[0], t), "broadcast_coalesced over NCCL");
      reducer_check(group, "NCCL");
      fsdp_collectives_check(group, "NCCL");
#else
      check(false, "this LibTorch has CUDA but the runtime was built without USE_C10D_NCCL");
#endif
    } else {
      skip("NCCL group", "no CUDA");
      auto group = fabric::detail::c10d_compat::make_gloo_group(
          store, 0, 1, timeout, c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      auto t = torch::arange(6, torch::kFloat);
      std::vector<at::Tensor> tensors{t.clone()};
      group->allreduce(tensors)->wait();
      check(close(tensors[0], t), "Gloo allreduce (sum over 1 rank) is the identity");
      reducer_check(group, "Gloo");
    }
  });

  // --------------------------------------------------------------- autocast
  section("autocast", [&] {
    auto a = torch::randn({8, 8}, device);
    auto b = torch::randn({8, 8}, device);
    {
      fabric::Fabric f(fabric::Options().accelerator(accelerator_name(use_cuda)).precision("bf16-mixed"));
      {
        auto autocast = f.autocast();
        check(torch::mm(a, b).scalar_type() == torch::kBFloat16,
              "bf16-mixed: mm runs in bfloat16 on " + device.str());
      }
      check(torch::mm(a, b).scalar_type() == torch::kFloat, "bf16-mixed: float32 after the scope");
      check(!fabric::detail::autocast_compat::is_enabled(device_type),
            "bf16-mixed: autocast switched off again");
    }
    if (use_cuda) {
      fabric::Fabric f(fabric::Options().accelerator("cuda").precision("16-mixed"));
      {
        auto autocast = f.autocast();
        check(torch::mm(a, b).scalar_type() == torch::kHalf, "16-mixed: mm runs in float16 on cuda");
        {
          auto inner = f.autocast();  // nesting
          check(torch::mm(a, b).scalar_type() == torch::kHalf, "16-mixed: nested scope");
        }
        check(fabric::detail::autocast_compat::is_enabled(device_type),
              "16-mixed: still on after the nested scope");
      }
      check(torch::mm(a, b).scalar_type() == torch::kFloat, "16-mixed: float32 after the scope");
    } else {
      skip("16-mixed autocast to float16", "CUDA only; a no-op on CPU");
    }
  });

  // ------------------------------------------------------------ loss scaler
  section("16-mixed loss scaler", [&] {
    fabric::Options::GradScalerOptions scaler_options;
    scaler_options.growth_interval = 2;
    fabric::Fabric f(fabric::Options()
                         .accelerator(accelerator_name(use_cuda))
                         .precision("16-mixed")
                         .grad_scaler(scaler_options));
    f.launch();
    torch::manual_seed(2);
    Net model;
    Net reference;
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    f.setup(model, optimizer);
    reference->to(device);
    {
      torch::NoGradGuard no_grad;
      auto src = model->parameters();
      auto dst = reference->parameters();
      for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
    }
    auto x = torch::randn({16, 8}, device);
    // PyTorch's GradScaler state, advanced by its CUDA kernels.
    auto scale = torch::full({1}, scaler_options.init_scale,
                             torch::TensorOptions().dtype(torch::kFloat).device(device));
    auto growth_tracker = torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt).device(device));
    bool kernels = true;
    for (int step = 0; step < 4; ++step) {
      const bool overflow = step == 1;  // one step with an inf loss
      model->zero_grad();
      reference->zero_grad();
      torch::Tensor loss;
      {
        auto autocast = f.autocast();
        loss = model->forward(x).pow(2).mean();
      }
      if (overflow) loss = loss * std::numeric_limits<float>::infinity();
      f.backward(loss);

      torch::Tensor ref_loss;
      {
        auto autocast = f.autocast();
        ref_loss = reference->forward(x).pow(2).mean();
      }
      if (overflow) ref_loss = ref_loss * std::numeric_limits<float>::infinity();
      (ref_loss * scale.item<double>()).backward();
      std::vector<at::Tensor> grads;
      for (auto& p : reference->parameters()) grads.push_back(p.mutable_grad());
      auto found_inf = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat).device(device));
      try {
        at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, scale.reciprocal());
        at::_amp_update_scale_(scale, growth_tracker, found_inf, scaler_options.growth_factor,
                               scaler_options.backoff_factor, scaler_options.growth_interval);
      } catch (const std::exception&) {
        if (use_cuda) throw;  // on CUDA the kernels are the reference
        // No AMP kernel for this device (1.13 on CPU): the same two steps in
        // plain ops, as PyTorch's GradScaler documents them.
        if (kernels) skip("reference by the AMP kernels", "none for " + device.str() +
                                                              " in this LibTorch; plain-op reference");
        kernels = false;
        torch::NoGradGuard no_grad;
        const double inverse = 1.0 / scale.item<double>();
        bool finite = true;
        for (auto& g : grads) {
          g.mul_(inverse);
          finite = finite && torch::isfinite(g).all().item<bool>();
        }
        found_inf.fill_(finite ? 0.0 : 1.0);
        if (!finite) {
          scale.mul_(scaler_options.backoff_factor);
          growth_tracker.zero_();
        } else if (growth_tracker.item<int>() + 1 >= scaler_options.growth_interval) {
          scale.mul_(scaler_options.growth_factor);
          growth_tracker.zero_();
        } else {
          growth_tracker.add_(1);
        }
      }
      const bool ref_inf = found_inf.item<float>() > 0;
      const std::string tag = "step " + std::to_string(step) + (overflow ? " (inf)" : "") +
                              (kernels ? " [AMP kernels]" : " [plain ops]");
      check(std::abs(f.loss_scale() - scale.item<double>()) < 1e-6,
            tag + ": Fabric's scale " + std::to_string(f.loss_scale()) +
                " == _amp_update_scale_ " + std::to_string(scale.item<double>()));
      if (ref_inf) {
        bool cleared = true;
        for (auto& p : model->parameters()) cleared = cleared && !p.grad().defined();
        check(cleared, tag + ": inf found by both; Fabric cleared the gradients (step skipped)");
      } else {
        bool same = true;
        auto a = model->parameters();
        auto b = reference->parameters();
        for (size_t i = 0; i < a.size(); ++i) same = same && close(a[i].grad(), b[i].grad(), 1e-3);
        check(same, tag + ": unscaled gradients == _amp_foreach_non_finite_check_and_unscale_");
      }
      optimizer.step();
      {
        torch::NoGradGuard no_grad;
        auto src = model->parameters();
        auto dst = reference->parameters();
        for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
      }
    }
    check(f.loss_scale() == scaler_options.init_scale,
          "after clean, inf, clean, clean (growth_interval 2): scale back at " +
              std::to_string(f.loss_scale()));
  });

  // ------------------------------------------------------------ checkpoints
  section("checkpoint saved on " + device.str() + ", loaded on cpu", [&] {
    char dir_template[] = "/tmp/fabric_gpu_test_XXXXXX";
    const std::string dir = ::mkdtemp(dir_template);
    const std::string path = dir + "/state.pt";
    torch::manual_seed(3);
    Net model;
    torch::optim::Adam optimizer(model->parameters(), 1e-3);
    int64_t step = 7;
    {
      fabric::Fabric f(fabric::Options().accelerator(accelerator_name(use_cuda)));
      f.launch();
      f.setup(model, optimizer);
      auto x = torch::randn({4, 8}, f.device());
      f.backward(model->forward(x).sum());
      optimizer.step();
      f.save(path, fabric::State{{"model", model}, {"optimizer", optimizer}, {"step", step}});
      f.save(dir + "/model.pt", model);
    }
    fabric::Fabric cpu(fabric::Options().accelerator("cpu"));
    cpu.launch();
    Net restored;
    torch::optim::Adam restored_optimizer(restored->parameters(), 1e-3);
    cpu.setup(restored, restored_optimizer);
    int64_t restored_step = 0;
    cpu.load(path, fabric::State{{"model", restored},
                                 {"optimizer", restored_optimizer},
                                 {"step", restored_step}});
    bool same = true, on_cpu = true;
    auto a = model->parameters();
    auto b = restored->parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      same = same && close(a[i], b[i], 0);
      on_cpu = on_cpu && b[i].device().is_cpu();
    }
    check(same && on_cpu, "model parameters equal and on cpu");
    check(restored_step == 7, "plain value restored");
    bool state_on_cpu = true;
    size_t states = 0;
    for (const auto& item : restored_optimizer.state()) {
      auto& adam = static_cast<torch::optim::AdamParamState&>(*item.second);
      state_on_cpu = state_on_cpu && adam.exp_avg().device().is_cpu();
      ++states;
    }
    check(states == a.size() && state_on_cpu, "Adam state restored on cpu (" +
                                                  std::to_string(states) + " entries)");
    Net single;
    cpu.load(dir + "/model.pt", single);
    check(close(single->fc2->bias, model->fc2->bias, 0) && single->fc2->bias.device().is_cpu(),
          "single-module checkpoint loaded on cpu");
    std::remove(path.c_str());
    std::remove((dir + "/model.pt").c_str());
    ::rmdir(dir.c_str());
  });

  // ------------------------------------------------- sharded parameters
  section("fsdp's trigger on " + device.str() + ": released units brought back", [&] {
    // Four units of 4M parameters (16 MiB each); the fill copies each back
    // from a host copy, as the all-gather would from the other ranks.
    torch::manual_seed(5);
    torch::nn::Sequential model;
    for (int i = 0; i < 4; ++i) model->push_back(torch::nn::Linear(2048, 2048));
    model->to(device);
    const auto input = torch::randn({64, 2048}, device);
    const auto run = [&] {
      auto output = model->forward(input);
      output.pow(2).mean().backward();
      std::vector<torch::Tensor> results{output.detach().clone()};
      for (const auto& parameter : model->parameters()) {
        results.push_back(parameter.grad().clone());
        parameter.mutable_grad() = torch::Tensor();
      }
      return results;
    };
    const auto peak_bytes = [&](const std::function<void()>& body) -> int64_t {
#ifdef FABRIC_GPU_TEST_CUDA
      if (use_cuda) {
        torch::cuda::synchronize();
        c10::cuda::CUDACachingAllocator::emptyCache();
        c10::cuda::CUDACachingAllocator::resetPeakStats(0);
        body();
        torch::cuda::synchronize();
        return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].peak;
      }
#endif
      body();
      return -1;
    };
    std::vector<torch::Tensor> reference;
    const int64_t whole_peak = peak_bytes([&] { reference = run(); });

    std::vector<std::vector<torch::Tensor>> units, masters;
    for (const auto& child : model->children()) {
      units.push_back(child->parameters());
      masters.emplace_back();
      for (const auto& parameter : units.back()) masters.back().push_back(parameter.detach().cpu().clone());  // a copy on cpu too
    }
    fabric::detail::StorageMaterializer materializer([&](size_t group) {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < units[group].size(); ++i) units[group][i].copy_(masters[group][i]);
    });
    materializer.set_release_others_on_demand(true);
    for (const auto& unit : units) materializer.add_group(unit);
    std::vector<torch::Tensor> sharded;
    const int64_t sharded_peak = peak_bytes([&] {
      materializer.release_all();
      sharded = run();
      materializer.release_all();
    });
    bool equal = sharded.size() == reference.size();
    for (size_t i = 0; equal && i < sharded.size(); ++i) equal = torch::equal(sharded[i], reference[i]);
    check(equal, "output and gradients equal the resident model's bit for bit");
    // The forward's last unit is still resident when the backward starts,
    // and the first one's weight is not read (its input needs no gradient).
    check(materializer.materialized_on_demand() == 2 * units.size() - 2,
          "every unit brought back for the forward and again for the backward (" +
              std::to_string(materializer.materialized_on_demand()) + " times)");
    if (whole_peak < 0) {
      skip("peak device memory with units released", "no CUDA");
      return;
    }
    std::cout << "  peak allocated: resident model " << whole_peak / (1 << 20) << " MiB, units released "
              << sharded_peak / (1 << 20) << " MiB" << std::endl;
    check(sharded_peak < whole_peak, "releasing units lowers the peak device memory");
    materializer.materialize_all();
  });

  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped"
            << std::endl;
  return failed == 0 ? 0 : 1;
}
