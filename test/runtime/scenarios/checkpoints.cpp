// The multi-process runtime scenarios of one component (fabric::State round trips and load errors, resume, a save interrupted, load or start fresh);
// test/runtime/multiprocess_program.cpp dispatches to them by name.
#include <fabric/fabric.h>

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scenarios/scenarios.h"
#include "scenarios/support.h"

namespace fabric_test {

void check_state_checkpoints(fabric::Fabric& fabric, const std::string& dir) {
  torch::manual_seed(21 + fabric.global_rank());
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  train_steps(fabric, model, optimizer, 0, 2, false);
  int64_t step = 2;
  double best = 0.25;
  std::string note = "text with spaces";
  bool flag = true;
  int32_t epoch = 7;
  torch::Tensor extra = torch::arange(6, torch::kFloat).reshape({2, 3});
  const std::string path = dir + "/state.ckpt";
  fabric::State state{{"model", model}, {"optimizer", optimizer}, {"step", step}, {"best", best},
                      {"note", note},   {"flag", flag},           {"epoch", epoch}, {"extra", extra}};
  fabric.save(path, state);

  torch::manual_seed(99 + fabric.global_rank());
  Net other_model;
  torch::optim::Adam other_optimizer(other_model->parameters(), 0.01);
  fabric.setup(other_model, other_optimizer);
  int64_t other_step = 0;
  double other_best = 0;
  std::string other_note;
  bool other_flag = false;
  int32_t other_epoch = 0;
  torch::Tensor other_extra;
  fabric::State other{{"model", other_model}, {"optimizer", other_optimizer},
                      {"step", other_step},   {"best", other_best},
                      {"note", other_note},   {"flag", other_flag},
                      {"epoch", other_epoch}, {"extra", other_extra}};
  fabric.load(path, other);
  check_same_state(*model, *other_model, "a loaded model tensor differs from the saved one");
  for (const auto& tensor : module_state(*other_model)) {
    check(tensor.device() == fabric.device(), "a loaded tensor is not on the device");
  }
  check(other_step == 2 && other_best == 0.25 && other_note == note && other_flag &&
            other_epoch == 7 && torch::equal(other_extra, extra),
        "plain values did not round-trip");
  // The optimizer state came along: one more identical step keeps both equal.
  train_steps(fabric, model, optimizer, 2, 1, false);
  train_steps(fabric, other_model, other_optimizer, 2, 1, false);
  check_same_state(*model, *other_model, "optimizer state did not round-trip (Adam moments)");

  // Errors are clear and leave the objects alone.
  int64_t untouched = 42;
  check_error(error_of([&] { fabric.load(path, {{"model", other_model}, {"missing", untouched}}); }),
              "has no 'missing'", "missing key");
  check(untouched == 42, "a failed load modified a value");
  check_error(error_of([&] { fabric.load(path, {{"model", other_model}}); }),
              "also holds 'optimizer'", "unknown keys (strict)");
  int64_t just_step = 0;
  fabric.load(path, {{"step", just_step}}, /*strict=*/false);
  check(just_step == 2, "non-strict load of one value");
  std::string wrong_kind;
  check_error(error_of([&] { fabric.load(path, {{"step", wrong_kind}}, false); }),
              "'step' holds a int64 in the checkpoint, but a string", "kind mismatch");
  check_error(error_of([&] { fabric::State twice{{"a", step}, {"a", step}}; }), "appears twice",
              "duplicate names");
  check_error(error_of([&] { fabric.load(dir + "/does-not-exist.ckpt", state); }),
              "No such file", "missing file");
  const std::string truncated = dir + "/truncated.ckpt";
  const std::string garbage = dir + "/garbage.ckpt";
  if (fabric.is_global_zero()) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3);
    std::ofstream(garbage, std::ios::binary) << std::string(4096, 'x');
  }
  fabric.barrier("corrupted files written");
  check_error(error_of([&] { fabric.load(truncated, state); }), "truncated or corrupted",
              "truncated file");
  check_error(error_of([&] { fabric.load(garbage, state); }), "truncated or corrupted",
              "garbage file");
  const std::string single = dir + "/single.pt";
  fabric.save(single, model);
  check_error(error_of([&] { fabric.load(single, state); }), "not a fabric::State checkpoint",
              "single-object checkpoint loaded as a State");
  // A set-up model loaded from a single-object checkpoint still trains in
  // sync (its parameters keep the storage its Reducer watches).
  fabric.load(single, other_model);
  check_same_state(*model, *other_model, "single-object load into a set-up model");
  train_steps(fabric, other_model, other_optimizer, 3, 2, false);
  check(identical_across_ranks(fabric, *other_model),
        "ranks drift apart after loading a single-object checkpoint into a set-up model");

  // A symlink planted at the temporary path is replaced, not written through.
  const std::string victim = dir + "/victim.txt";
  if (fabric.is_global_zero()) {
    std::ofstream(victim) << "precious";
    check(::symlink(victim.c_str(), (path + ".tmp").c_str()) == 0, "cannot plant the symlink");
  }
  fabric.barrier("symlink planted");
  fabric.save(path, state);
  std::ifstream victim_file(victim);
  const std::string victim_text((std::istreambuf_iterator<char>(victim_file)),
                                std::istreambuf_iterator<char>());
  check(victim_text == "precious", "save wrote through a symlink at the temporary path");
  fabric.load(path, other);
  fabric.barrier("state checks done");
}

void check_no_backward_sync(fabric::Fabric& fabric) {
  const int rank = fabric.global_rank();
  const int world = fabric.world_size();
  torch::manual_seed(5);
  Net model;
  model->to(torch::kDouble);
  fabric.setup(model);
  Net reference;
  reference->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    const auto from = module_state(*model);
    const auto to = module_state(*reference);
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  const int micro_batches = 3;
  const auto batch = [&](int r, int i) {
    torch::manual_seed(700 + 10 * r + i);
    return std::make_pair(torch::randn({4, 8}, torch::kDouble), torch::randn({4, 4}, torch::kDouble));
  };
  for (int i = 0; i < micro_batches; ++i) {
    const auto [input, target] = batch(rank, i);
    const auto loss = torch::mse_loss(model->forward(input), target);
    const bool last = i == micro_batches - 1;
    auto no_sync = fabric.no_backward_sync(model, /*enabled=*/!last);
    fabric.backward(loss);
    if (i == micro_batches - 2) {
      // Still local: ranks saw different data, so their sums differ.
      const auto gradient = model->first->weight.grad();
      check(!torch::equal(fabric.all_reduce(gradient, fabric::ReduceOp::Max),
                          fabric.all_reduce(gradient, fabric::ReduceOp::Min)),
            "no_backward_sync: gradients were synchronized inside the guard");
    }
  }
  // Reference: the mean over ranks of each rank's sum over micro-batches.
  for (int r = 0; r < world; ++r) {
    for (int i = 0; i < micro_batches; ++i) {
      const auto [input, target] = batch(r, i);
      (torch::mse_loss(reference->forward(input), target) / world).backward();
    }
  }
  const auto expected = reference->named_parameters();
  for (const auto& item : model->named_parameters()) {
    const auto error = (item.value().grad() - expected[item.key()].grad()).abs().max().item<double>();
    check(error < 1e-12, "accumulated gradient of " + item.key() + " differs from the large-batch "
                         "gradient by " + std::to_string(error));
  }
  check_error(error_of([&] {
                Net never_set_up;
                auto guard = fabric.no_backward_sync(never_set_up);
              }),
              "was not set up", "no_backward_sync on a model that was not set up");
}

void check_clip_gradients(fabric::Fabric& fabric) {
  torch::manual_seed(8);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  fabric.setup(model, optimizer);
  torch::manual_seed(80 + fabric.global_rank());
  fabric.backward(model->forward(torch::randn({16, 8})).pow(2).sum());
  double squares = 0;
  for (const auto& parameter : model->parameters()) squares += parameter.grad().pow(2).sum().item<double>();
  const double hand_norm = std::sqrt(squares);
  const double max_norm = hand_norm / 4;
  const auto norm = fabric.clip_gradients(model, optimizer, c10::nullopt, max_norm);
  check(std::abs(norm.item<double>() - hand_norm) < 1e-4 * hand_norm,
        "clip_gradients returned " + std::to_string(norm.item<double>()) + ", by hand " +
            std::to_string(hand_norm));
  check(torch::equal(fabric.all_reduce(norm, fabric::ReduceOp::Max),
                     fabric.all_reduce(norm, fabric::ReduceOp::Min)),
        "clip_gradients: the norm differs across ranks");
  double clipped = 0;
  for (const auto& parameter : model->parameters()) clipped += parameter.grad().pow(2).sum().item<double>();
  check(std::abs(std::sqrt(clipped) - max_norm) < 1e-3 * max_norm, "the clipped norm is not max_norm");
  fabric.clip_gradients(model, optimizer, 1e-3);
  for (const auto& parameter : model->parameters()) {
    check(parameter.grad().abs().max().item<double>() <= 1e-3 + 1e-9, "clip_val did not clamp");
  }
  check_error(error_of([&] { fabric.clip_gradients(model, optimizer); }), "exactly one",
              "clip_gradients without a limit");
}

void check_rank_zero_first(fabric::Fabric& fabric, const std::string& dir) {
  const std::string marker = dir + "/rank_zero_was_here";
  {
    auto first = fabric.rank_zero_first();
    if (fabric.is_global_zero()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::ofstream(marker) << "done";
    } else {
      check(std::ifstream(marker).good(), "rank_zero_first: a rank entered before rank 0 left");
    }
  }
  check(std::ifstream(marker).good(), "rank_zero_first: no marker after the scope");
}

void check_seed_everything() {
  check(fabric::seed_everything(1234) == 1234, "seed_everything's result");
  const auto first = torch::randn({4});
  const int first_rand = std::rand();
  fabric::seed_everything(1234);
  check(torch::equal(first, torch::randn({4})) && std::rand() == first_rand,
        "seed_everything does not reproduce the random numbers");
  check(std::string(std::getenv("PL_GLOBAL_SEED")) == "1234", "PL_GLOBAL_SEED");
}

int run_state_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  check(!arguments.dir.empty(), "--dir is needed");
  check_state_checkpoints(fabric, arguments.dir);
  check_no_backward_sync(fabric);
  check_clip_gradients(fabric);
  check_rank_zero_first(fabric, arguments.dir);
  check_seed_everything();
  fabric.print("state checks passed on", fabric.world_size(), "ranks");
  return 0;
}


int run_resume(const Arguments& arguments) {
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).strategy(arguments.strategy));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(31);
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  int64_t step = 0;
  fabric::State state{{"model", model}, {"optimizer", optimizer}, {"step", step}};
  const std::string path = arguments.dir + "/resume.ckpt";
  if (arguments.phase == "full") {
    train_steps(fabric, model, optimizer, 0, 8, true);
  } else if (arguments.phase == "first") {
    train_steps(fabric, model, optimizer, 0, 4, true);
    step = 4;
    fabric.save(path, state);
  } else if (arguments.phase == "second") {
    fabric.load(path, state);
    train_steps(fabric, model, optimizer, static_cast<int>(step), 4, true);
  } else if (arguments.phase == "reload") {
    // A checkpoint of another rank count (fsdp: other owners): the set-up
    // model holds exactly what a plain model loads from the file, the ranks'
    // optimizer shards add up to the file's state, and training goes on.
    fabric.load(path, state);
    Net plain;
    torch::optim::Adam plain_optimizer(plain->parameters(), 0.01);
    int64_t plain_step = 0;
    fabric.load(path, {{"model", plain}, {"optimizer", plain_optimizer}, {"step", plain_step}});
    check_same_state(*model, *plain, "the loaded model differs from the checkpoint");
    const auto held = fabric.all_reduce(torch::tensor(adam_state(optimizer).first), fabric::ReduceOp::Sum);
    check(held.item<int64_t>() == adam_state(plain_optimizer).first,
          "the ranks' optimizer state after load does not add up to the checkpoint's");
    train_steps(fabric, model, optimizer, static_cast<int>(step), 2, true);
    // The consolidated export: one file plain torch::load reads.
    const std::string exported = arguments.dir + "/export_" + std::to_string(fabric.world_size()) + ".pt";
    fabric.save(exported, model);
    Net inference;
    torch::load(inference, exported);
    check_same_state(*model, *inference, "the exported model differs from the trained one");
    fabric.print("reloaded on", fabric.world_size(), "ranks: model, optimizer shards and export agree");
  } else {
    fail("unknown --phase");
  }
  check(identical_across_ranks(fabric, *model), "ranks differ after training");
  return 0;
}

int run_save_twice(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(41);
  Net model;
  fabric.setup(model);
  int64_t step = 1;
  fabric::State state{{"model", model}, {"step", step}};
  const std::string path = arguments.dir + "/twice.ckpt";
  fabric.save(path, state);
  step = 2;
  ::setenv("FABRIC_TEST_PAUSE_BEFORE_RENAME_S", "60", 1);
  fabric.save(path, state);  // the test kills rank 0 while it pauses
  fabric.print("the second save was not interrupted");
  return 0;
}

// Loads twice.ckpt in one process and prints its step.
int run_load_step(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(1));
  fabric.launch();
  Net model;
  int64_t step = 0;
  fabric.load(arguments.dir + "/twice.ckpt", {{"model", model}, {"step", step}});
  fabric.printf("loaded step %lld\n", static_cast<long long>(step));
  return 0;
}

// The shape users write around torch::load, kept after migration. Returns
// whether the load worked; fails the check when the error is not a
// c10::Error, or its message lacks `expected`.
template <class Load>
bool load_or_fresh(Load&& load, const std::string& expected, const std::string& what) {
  try {
    load();
    return true;
  } catch (const c10::Error& error) {
    const std::string message = error.what();
    check(message.find(expected) != std::string::npos,
          what + ": the message '" + message + "' lacks '" + expected + "'");
    check(message.find("Exception raised from") == std::string::npos && message.find('\n') == std::string::npos,
          what + ": what() carries a backtrace: " + message);
    check(std::string(error.what_without_backtrace()) == message, what + ": what_without_backtrace differs");
    return false;
  } catch (const std::exception& error) {
    fail(what + ": fabric.load threw something that is not a c10::Error: " + error.what());
  }
}

int run_load_fresh(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  check(!arguments.dir.empty(), "--dir is needed");
  const std::string& dir = arguments.dir;
  torch::manual_seed(3 + this_rank);
  Net model;
  PlainNet plain;
  auto pointer = std::make_shared<PlainNet>();
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  fabric.setup(plain);
  fabric.setup(pointer);
  torch::Tensor tensor;
  int64_t step = 0;
  fabric::State state{{"model", model}, {"optimizer", optimizer}, {"step", step}};

  // Nothing there yet: every overload throws a c10::Error on every rank.
  const std::string missing = dir + "/missing.pt";
  check(!load_or_fresh([&] { fabric.load(missing, model); }, "No such file", "holder, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, plain); }, "No such file", "by value, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, pointer); }, "No such file", "shared_ptr, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, optimizer); }, "No such file", "optimizer, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, tensor); }, "No such file", "tensor, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, state); }, "No such file", "State, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(dir, state); }, "is a directory", "State, directory"), "loaded");

  // Garbage and wrong contents.
  const std::string garbage = dir + "/garbage.pt";
  const std::string tensor_file = dir + "/tensor.pt";
  fabric.save(tensor_file, torch::ones({3}));
  if (fabric.is_global_zero()) std::ofstream(garbage, std::ios::binary) << std::string(1000, 'x');
  fabric.barrier("garbage written");
  check(!load_or_fresh([&] { fabric.load(garbage, model); }, "truncated or corrupted", "holder, garbage"), "loaded");
  check(!load_or_fresh([&] { fabric.load(garbage, optimizer); }, "truncated or corrupted", "optimizer, garbage"), "loaded");
  check(!load_or_fresh([&] { fabric.load(tensor_file, plain); }, "the checkpoint has no", "by value, a tensor file"), "loaded");
  check(!load_or_fresh([&] { fabric.load(tensor_file, state); }, "not a fabric::State", "State, a tensor file"), "loaded");
  check(load_or_fresh([&] { fabric.load(tensor_file, tensor); }, "", "tensor file") && torch::equal(tensor, torch::ones({3})),
        "a tensor checkpoint did not load");

  // A checkpoint that only some ranks can read (a path on a disk of one
  // node): every rank throws, none deadlocks, nothing is modified.
  const std::string per_rank = dir + "/rank" + std::to_string(this_rank) + ".pt";
  fabric.save(dir + "/rank1.pt", model);  // rank 0 writes it; rank 0's own file never exists
  const auto before = model->first->weight.detach().clone();
  if (fabric.world_size() == 2) {
    check(!load_or_fresh([&] { fabric.load(per_rank, model); }, "on rank 0 only",
                         "missing on rank 0 only"),
          "loaded");
    step = 7;
    fabric.save(dir + "/state.pt", state);
    const std::string corrupted_on_one = dir + "/state_rank" + std::to_string(this_rank) + ".pt";
    if (fabric.is_global_zero()) {
      std::ifstream in(dir + "/state.pt", std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (int r = 0; r < fabric.world_size(); ++r) {
        std::ofstream out(dir + "/state_rank" + std::to_string(r) + ".pt", std::ios::binary);
        out << (r == 1 ? bytes.substr(0, bytes.size() / 2) : bytes);
      }
    }
    fabric.barrier("per-rank states written");
    step = 0;
    check(!load_or_fresh([&] { fabric.load(corrupted_on_one, state); }, "on rank 1 only",
                         "State corrupted on rank 1 only"),
          "loaded");
    check(step == 0, "a load that failed on another rank modified this rank's state");
  }
  check(torch::equal(before, model->first->weight.detach()), "a failed load modified the model");

  // Rank 0 writes a file on its own, late (fabricize's form of a save under
  // a condition only some ranks meet), and every rank then loads it: the
  // load waits for every rank, so none reads the older version.
  const std::string alone = dir + "/alone.pt";
  fabric.save(alone, torch::zeros({4}));
  if (fabric.is_global_zero()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    torch::save(torch::full({4}, 7.0), alone);
  }
  torch::Tensor read_back;
  check(load_or_fresh([&] { fabric.load(alone, read_back); }, "", "rank 0's own write"), "rank 0's file did not load");
  check(torch::equal(read_back, torch::full({4}, 7.0)),
        "a rank read the file before rank 0 had written it: fabric.load did not wait for every rank");

  // Start fresh, train, and the ranks are still one job.
  train_steps(fabric, model, optimizer, 0, 3, false);
  check(identical_across_ranks(fabric, *model), "ranks drifted apart after failed loads");
  fabric.save(dir + "/good.pt", state);
  check(load_or_fresh([&] { fabric.load(dir + "/good.pt", state); }, "", "good State"), "the good State did not load");
  fabric.print("load-or-start-fresh checks passed on", fabric.world_size(), "ranks");
  return 0;
}

}  // namespace fabric_test
