// fabric-run: Lightning's `fabric run` for LibTorch programs.
//
//   fabric-run --devices 2 [--accelerator cpu] [--strategy ddp] [--precision bf16-mixed]
//              [--num-nodes N --node-rank K --main-address HOST --main-port PORT]
//              ./program args...
//
// Starts one process per local rank with a torchrun-compatible environment
// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK,
// MASTER_ADDR, MASTER_PORT) plus the LT_* variables that override the
// program's own Fabric options, then supervises them with the launcher that
// Fabric::launch() uses: the first rank to fail is named, the others are
// stopped, and fabric-run exits with its code. Every rank but global rank 0
// starts with its standard output on /dev/null until it reaches
// fabric.launch() (what main prints before it shows once); standard error
// is left alone. No LibTorch in here.
#include <fabric/options.h>

#include "launchers/launcher.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr const char* kUsage =
    "usage: fabric-run [options] PROGRAM [ARGS...]\n"
    "\n"
    "Starts PROGRAM once per local rank with RANK, LOCAL_RANK, WORLD_SIZE,\n"
    "LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT set, and\n"
    "LT_* variables that override the program's Fabric options. Ranks other\n"
    "than 0 print to standard output from fabric.launch() on (what main prints\n"
    "before it shows once); standard error is never redirected.\n"
    "\n"
    "  --accelerator A    cpu | cuda | gpu | auto (default: the program's choice)\n"
    "  --devices D        processes on this node: a count, -1/auto (CPU: 1,\n"
    "                     CUDA: visible GPUs) or a list of device ids (0,2)\n"
    "  --strategy S       ddp (ddp_find_unused_parameters_true: for models with\n"
    "                     parameters unused on some steps) | auto |\n"
    "                     single_device | zero2 (optimizer state and\n"
    "                     gradients sharded; aliases zero, deepspeed,\n"
    "                     deepspeed_stage_2) | zero1 (optimizer state sharded;\n"
    "                     alias deepspeed_stage_1). fsdp/deepspeed_stage_3\n"
    "                     (parameter sharding) are not available in C++\n"
    "  --precision P      32-true, ...\n"
    "  --num-nodes N      nodes in the job (default 1)\n"
    "  --node-rank K      this node's rank (default 0)\n"
    "  --main-address H   address of node 0 (default 127.0.0.1)\n"
    "  --main-port P      port of node 0's store (default: a free port; needed\n"
    "                     with several nodes)\n"
    "Options take their value as the next argument or after '='. '--' ends them.\n";

struct Arguments {
  std::string accelerator;
  std::string devices = "1";
  std::string strategy;
  std::string precision;
  int num_nodes = 1;
  int node_rank = 0;
  std::string main_address = "127.0.0.1";
  int main_port = 0;
  std::vector<std::string> command;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "fabric-run: %s\n\n%s", message.c_str(), kUsage);
  std::exit(2);
}

int parse_integer(const std::string& option, const std::string& text, int minimum) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || end != text.c_str() + text.size() || value < minimum || value > 1 << 20) {
    usage_error(option + " needs an integer >= " + std::to_string(minimum) + ", got '" + text + "'");
  }
  return static_cast<int>(value);
}

Arguments parse_arguments(int argc, char** argv) {
  Arguments arguments;
  int index = 1;
  for (; index < argc; ++index) {
    std::string option = argv[index];
    if (option == "--") {
      ++index;
      break;
    }
    if (option == "-h" || option == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (option.rfind("--", 0) != 0) break;  // the program: everything after is its argv
    std::string value;
    const auto equals = option.find('=');
    if (equals != std::string::npos) {
      value = option.substr(equals + 1);
      option.resize(equals);
    } else {
      if (index + 1 >= argc) usage_error(option + " needs a value");
      value = argv[++index];
    }
    if (option == "--accelerator") {
      arguments.accelerator = value;
    } else if (option == "--devices") {
      arguments.devices = value;
    } else if (option == "--strategy") {
      arguments.strategy = value;
    } else if (option == "--precision") {
      arguments.precision = value;
    } else if (option == "--num-nodes" || option == "--num_nodes") {
      arguments.num_nodes = parse_integer(option, value, 1);
    } else if (option == "--node-rank" || option == "--node_rank") {
      arguments.node_rank = parse_integer(option, value, 0);
    } else if (option == "--main-address" || option == "--main_address") {
      arguments.main_address = value;
    } else if (option == "--main-port" || option == "--main_port") {
      arguments.main_port = parse_integer(option, value, 1);
    } else {
      usage_error("unknown option " + option);
    }
  }
  for (; index < argc; ++index) arguments.command.emplace_back(argv[index]);
  if (arguments.command.empty()) usage_error("no program given");
  return arguments;
}

// GPUs this process may use, without LibTorch: CUDA_VISIBLE_DEVICES when set,
// otherwise the /dev/nvidiaN device nodes.
int visible_gpu_count() {
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    const std::string list = visible;
    if (list.empty()) return 0;
    int count = 1;
    for (char c : list) count += c == ',' ? 1 : 0;
    return count;
  }
  int count = 0;
  if (DIR* directory = ::opendir("/dev")) {
    while (const dirent* entry = ::readdir(directory)) {
      const std::string name = entry->d_name;
      if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
          name.find_first_not_of("0123456789", 6) == std::string::npos) {
        ++count;
      }
    }
    ::closedir(directory);
  }
  return count;
}

// A port nobody listens on now. Rank 0's store binds it moments later; with
// one node a collision only makes the job fail, never join a wrong one.
int free_port() {
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  if (probe < 0) throw std::runtime_error("fabric-run: socket: " + std::string(std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    ::close(probe);
    throw std::runtime_error("fabric-run: cannot find a free port: " + std::string(std::strerror(error)));
  }
  ::close(probe);
  return ntohs(address.sin_port);
}

int run(const Arguments& arguments) {
  // Validated with the rules the program's Fabric applies, so a typo fails
  // here, once, with the valid values, instead of in every rank.
  fabric::Options options;
  if (!arguments.accelerator.empty()) options.accelerator(arguments.accelerator);
  if (!arguments.strategy.empty()) options.strategy(arguments.strategy);
  if (!arguments.precision.empty()) options.precision(arguments.precision);
  options.devices(arguments.devices);
  options.num_nodes(arguments.num_nodes);

  const bool cpu = options.accelerator() == "cpu" || (options.accelerator() == "auto" && visible_gpu_count() == 0);
  const int processes = options.devices().process_count(cpu ? 1 : visible_gpu_count());
  if (processes < 1) throw std::invalid_argument("fabric-run: no devices visible for --devices " + arguments.devices);
  if (arguments.node_rank >= arguments.num_nodes) {
    usage_error("--node-rank " + std::to_string(arguments.node_rank) + " is outside 0.." +
                std::to_string(arguments.num_nodes - 1));
  }
  if (arguments.num_nodes > 1 && arguments.main_port == 0) {
    usage_error("--main-port is needed with several nodes (every node must use the same)");
  }

  fabric::detail::ProcessPlacement node;
  node.local_world_size = processes;
  node.num_nodes = arguments.num_nodes;
  node.world_size = processes * arguments.num_nodes;
  node.node_rank = arguments.node_rank;
  node.global_rank = arguments.node_rank * processes;
  node.master_addr = arguments.main_address;
  node.master_port = arguments.main_port != 0 ? arguments.main_port : free_port();

  std::vector<std::string> environment;
  const auto set = [&environment](const char* name, const std::string& value) {
    if (!value.empty()) environment.push_back(std::string(name) + "=" + value);
  };
  set("LT_ACCELERATOR", arguments.accelerator);
  set("LT_DEVICES", options.devices().to_string());
  set("LT_STRATEGY", arguments.strategy);
  set("LT_PRECISION", arguments.precision);
  set("LT_NUM_NODES", std::to_string(arguments.num_nodes));
  return fabric::detail::run_local_ranks(node, arguments.command, environment);
}

}  // namespace

int main(int argc, char** argv) {
  const Arguments arguments = parse_arguments(argc, argv);
  try {
    return run(arguments);
  } catch (const std::exception& error) {
    const std::string message = error.what();
    // Options' messages start with "fabric: "; keep one prefix.
    std::fprintf(stderr, "%s%s\n", message.rfind("fabric", 0) == 0 ? "" : "fabric-run: ", message.c_str());
    return 2;
  }
}
