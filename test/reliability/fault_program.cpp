// The program behind the reliability suite's runtime cases
// (test/reliability/fault_driver.py). Every rank runs the same scenario.
//
//   fault_program train --dir=D [--devices=N] [--steps=S] [--resume]
//                 [--kill-rank=R --kill-step=K --kill-at=forward|backward|save]
//       trains S steps (deterministic data per step and rank), saving
//       {model, optimizer, step} to D/train.ckpt after every step, and prints
//       rank 0's loss of each step exactly ("step I LOSS", hex float).
//       --resume first loads D/train.ckpt ("resumed at step I").
//       --kill-*: rank R sends itself SIGKILL at step K inside the model's
//       forward, inside backward (a gradient hook of the first layer, which
//       fires after the second layer's bucket has gone to all-reduce), or
//       during the save (once the temporary file exists: rank 0 is then
//       between writing and renaming, held there by the runtime's test hook).
//   fault_program save_to --path=P [--devices=N]
//       fabric.save(P) on every rank; prints the error each rank gets.
//   fault_program symlink_final --dir=D [--devices=N]
//       a symlink planted at the checkpoint's final path is replaced by the
//       checkpoint; its target is not written.
//   fault_program argv OUT_DIR ARGS... [--devices=N is read from ARGS]
//       launch() re-executes the program: each rank writes the ARGS it got
//       (NUL-separated) to OUT_DIR/rank<R>.argv.
//   fault_program wait --devices=N [--seconds=S]
//       launch, barrier, print "ready", sleep S seconds, barrier (the driver
//       reads the socket table meanwhile).
//   fault_program join --devices=N [--timeout-ms=T]
//       launch() and a barrier: for processes started torchrun-style with a
//       broken environment (another world size, a taken port).
#include <fabric/fabric.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

namespace {

struct Arguments {
  std::string scenario;
  int devices = 2;
  int steps = 6;
  std::string dir;
  std::string path;
  bool resume = false;
  int kill_rank = -1;
  int kill_step = -1;
  std::string kill_at;
  int seconds = 5;
  int timeout_ms = 0;
};

Arguments parse(int argc, char** argv) {
  Arguments a;
  if (argc > 1) a.scenario = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string argument = argv[i];
    const auto equals = argument.find('=');
    const std::string name = argument.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : argument.substr(equals + 1);
    if (name == "--devices") a.devices = std::stoi(value);
    if (name == "--steps") a.steps = std::stoi(value);
    if (name == "--dir") a.dir = value;
    if (name == "--path") a.path = value;
    if (name == "--resume") a.resume = true;
    if (name == "--kill-rank") a.kill_rank = std::stoi(value);
    if (name == "--kill-step") a.kill_step = std::stoi(value);
    if (name == "--kill-at") a.kill_at = value;
    if (name == "--seconds") a.seconds = std::stoi(value);
    if (name == "--timeout-ms") a.timeout_ms = std::stoi(value);
  }
  return a;
}

[[noreturn]] void die_now(int rank, const char* where) {
  // One write, so that the line is not interleaved with other ranks'.
  const std::string line =
      "test: rank " + std::to_string(rank) + " sends itself SIGKILL " + where + "\n";
  std::fputs(line.c_str(), stderr);
  std::raise(SIGKILL);
  std::abort();
}

fabric::Options cpu(int devices) { return fabric::Options().accelerator("cpu").devices(devices); }

struct NetImpl : torch::nn::Module {
  NetImpl()
      : first(register_module("first", torch::nn::Linear(8, 64))),
        second(register_module("second", torch::nn::Linear(64, 64))),
        third(register_module("third", torch::nn::Linear(64, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    if (on_forward) on_forward();
    return third(torch::tanh(second(torch::tanh(first(x)))));
  }
  torch::nn::Linear first, second, third;
  std::function<void()> on_forward;
};
TORCH_MODULE(Net);

int run_train(const Arguments& a) {
  // Small buckets: the later layers' gradients are all-reduced while the
  // first layer's are still being computed.
  fabric::Fabric fabric(cpu(a.devices).bucket_cap_mb(0.01));
  fabric.launch();
  const int rank = fabric.global_rank();
  torch::manual_seed(17);
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  int64_t step = 0;
  fabric::State state{{"model", model}, {"optimizer", optimizer}, {"step", step}};
  const std::string path = a.dir + "/train.ckpt";
  if (a.resume) {
    fabric.load(path, state);
    fabric.printf("resumed at step %lld\n", static_cast<long long>(step));
  }
  const bool killer = rank == a.kill_rank;
  int current = 0;
  if (killer && a.kill_at == "forward") {
    model->on_forward = [&] {
      if (current == a.kill_step) die_now(rank, "in forward");
    };
  }
  if (killer && a.kill_at == "backward") {
    model->first->weight.register_hook([&](const torch::Tensor& gradient) {
      if (current == a.kill_step) die_now(rank, "in backward");
      return gradient;
    });
  }
  for (; step < a.steps;) {
    current = static_cast<int>(step);
    torch::manual_seed(1000 + 10 * step + rank);
    const auto x = torch::randn({16, 8});
    const auto y = x.sum(1, true).sin();
    optimizer.zero_grad();
    const auto loss = torch::mse_loss(model->forward(x), y);
    fabric.backward(loss);
    optimizer.step();
    const auto mean = fabric.all_reduce(loss.detach(), fabric::ReduceOp::Mean);
    fabric.printf("step %lld %a\n", static_cast<long long>(step), mean.item<double>());
    ++step;
    std::thread killer_thread;
    if (a.kill_at == "save" && current == a.kill_step) {
      // Rank 0 pauses between writing the temporary file and renaming it;
      // the killing rank dies inside that window.
      if (rank == 0) ::setenv("FABRIC_TEST_PAUSE_BEFORE_RENAME_S", "8", 1);
      if (killer) {
        const std::string temporary = path + ".tmp";
        killer_thread = std::thread([temporary, rank] {
          struct stat info;
          while (::stat(temporary.c_str(), &info) != 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          die_now(rank, "during the save");
        });
      }
    }
    fabric.save(path, state);
    ::unsetenv("FABRIC_TEST_PAUSE_BEFORE_RENAME_S");
    if (killer_thread.joinable()) killer_thread.join();
  }
  fabric.print("trained", a.steps, "steps");
  return 0;
}

int run_save_to(const Arguments& a) {
  fabric::Fabric fabric(cpu(a.devices));
  fabric.launch();
  torch::manual_seed(3);
  Net model;
  fabric.setup(model);
  int64_t step = 7;
  try {
    fabric.save(a.path, fabric::State{{"model", model}, {"step", step}});
  } catch (const std::exception& error) {
    std::fprintf(stderr, "test: rank %d: save failed: %s\n", fabric.global_rank(), error.what());
    return 6;
  }
  std::fprintf(stderr, "test: rank %d: save succeeded\n", fabric.global_rank());
  return 0;
}

int run_symlink_final(const Arguments& a) {
  fabric::Fabric fabric(cpu(a.devices));
  fabric.launch();
  torch::manual_seed(3);
  Net model;
  fabric.setup(model);
  const std::string path = a.dir + "/final.ckpt";
  const std::string victim = a.dir + "/victim.txt";
  if (fabric.is_global_zero()) {
    std::ofstream(victim) << "precious";
    if (::symlink(victim.c_str(), path.c_str()) != 0) {
      std::perror("test: symlink");
      return 1;
    }
  }
  fabric.barrier("symlink planted");
  int64_t step = 1;
  fabric.save(path, fabric::State{{"model", model}, {"step", step}});
  std::ifstream in(victim);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  struct stat info;
  const bool is_link = ::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode);
  if (text != "precious" || is_link) {
    std::fprintf(stderr, "test: rank %d: victim '%s', final path still a symlink: %d\n",
                 fabric.global_rank(), text.c_str(), is_link);
    return 1;
  }
  step = 0;
  fabric.load(path, fabric::State{{"model", model}, {"step", step}});
  if (step != 1) return 1;
  fabric.print("symlink at the final path replaced; target untouched");
  return 0;
}

int run_argv(int argc, char** argv) {
  int devices = 2;
  for (int i = 3; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument.rfind("--devices=", 0) == 0) devices = std::stoi(argument.substr(10));
  }
  fabric::Fabric fabric(cpu(devices));
  fabric.launch();
  const std::string out = std::string(argv[2]) + "/rank" + std::to_string(fabric.global_rank());
  {
    std::ofstream file(out + ".argv", std::ios::binary);
    for (int i = 3; i < argc; ++i) file << argv[i] << '\0';
  }
  fabric.barrier("argv written");
  return 0;
}

int run_wait(const Arguments& a) {
  fabric::Fabric fabric(cpu(a.devices));
  fabric.launch();
  fabric.barrier("started");
  fabric.print("ready");
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(a.seconds));
  fabric.barrier("done");
  return 0;
}

int run_join(const Arguments& a) {
  fabric::Options options = cpu(a.devices);
  if (a.timeout_ms > 0) options.timeout(std::chrono::milliseconds(a.timeout_ms));
  fabric::Fabric fabric(options);
  fabric.launch();
  fabric.barrier("joined");
  std::fprintf(stderr, "test: rank %d of %d joined\n", fabric.global_rank(), fabric.world_size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc > 1 && std::string(argv[1]) == "argv") return run_argv(argc, argv);
  const Arguments a = parse(argc, argv);
  if (a.scenario == "train") return run_train(a);
  if (a.scenario == "save_to") return run_save_to(a);
  if (a.scenario == "symlink_final") return run_symlink_final(a);
  if (a.scenario == "wait") return run_wait(a);
  if (a.scenario == "join") return run_join(a);
  std::fprintf(stderr, "fault_program: unknown scenario '%s'\n", a.scenario.c_str());
  return 2;
} catch (const std::exception& error) {
  std::fprintf(stderr, "test: uncaught exception: %s\n", error.what());
  return 7;
}
