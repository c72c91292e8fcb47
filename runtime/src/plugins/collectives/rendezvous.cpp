#include "plugins/collectives/rendezvous.h"

#include "utilities/messages.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dirent.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

// ---- the store listens on one address ------------------------------------------
// c10d's TCPStore server binds the wildcard address (every interface) and
// takes no bind address (LibTorch 1.13; 2.x only adds a pre-bound fd). A
// store that every interface serves is reachable from networks that have no
// business with the job (a second NIC, a public address). So while rank 0
// constructs it, this thread's wildcard binds are narrowed to the one
// address the ranks connect to (BindScope). Every other bind of the process
// passes through unchanged.
namespace fabric::detail {
namespace {
thread_local bool narrow_wildcard_binds = false;
thread_local unsigned char narrow_to[4] = {127, 0, 0, 1};
}  // namespace
}  // namespace fabric::detail

extern "C" int bind(int fd, const struct sockaddr* address, socklen_t length) noexcept {
  using Bind = int (*)(int, const struct sockaddr*, socklen_t);
  static const Bind next = reinterpret_cast<Bind>(::dlsym(RTLD_NEXT, "bind"));
  if (next == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  if (fabric::detail::narrow_wildcard_binds && address != nullptr) {
    if (address->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
      sockaddr_in narrowed;
      std::memcpy(&narrowed, address, sizeof narrowed);
      if (narrowed.sin_addr.s_addr == htonl(INADDR_ANY)) {
        std::memcpy(&narrowed.sin_addr.s_addr, fabric::detail::narrow_to, 4);
        return next(fd, reinterpret_cast<const sockaddr*>(&narrowed), sizeof narrowed);
      }
    } else if (address->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
      sockaddr_in6 narrowed;
      std::memcpy(&narrowed, address, sizeof narrowed);
      if (IN6_IS_ADDR_UNSPECIFIED(&narrowed.sin6_addr)) {
        unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0};
        std::memcpy(mapped + 12, fabric::detail::narrow_to, 4);
        std::memcpy(&narrowed.sin6_addr, mapped, sizeof mapped);
        return next(fd, reinterpret_cast<const sockaddr*>(&narrowed), sizeof narrowed);
      }
    }
  }
  return next(fd, address, length);
}

namespace fabric {
namespace detail {

namespace {

std::string dotted(const in_addr& address) {
  char text[INET_ADDRSTRLEN] = {0};
  return ::inet_ntop(AF_INET, &address, text, sizeof text) != nullptr ? text : "";
}

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Each interface's IPv4 address.
std::vector<std::pair<std::string, std::string>> interfaces() {
  std::vector<std::pair<std::string, std::string>> found;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return found;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    found.emplace_back(entry->ifa_name, dotted(reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr));
  }
  ::freeifaddrs(list);
  return found;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  return text;
}

// A rank's record: "world_size num_nodes node_rank address".
struct RankRecord {
  int world_size = 0;
  int num_nodes = 0;
  int node = 0;
  std::string address;
};

std::string format(const RankRecord& record) {
  return std::to_string(record.world_size) + " " + std::to_string(record.num_nodes) + " " +
         std::to_string(record.node) + " " + (record.address.empty() ? "-" : record.address);
}

RankRecord parse(const std::vector<uint8_t>& bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  RankRecord record;
  in >> record.world_size >> record.num_nodes >> record.node >> record.address;
  if (record.address == "-") record.address.clear();
  return record;
}

std::string record_key(int rank) { return "fabric/job/" + std::to_string(rank); }
const char* const kLayoutKey = "fabric/job/layout";

// A rank that did not come (not "Socket Timeout": a port that answers nothing).
bool timed_out(const std::string& message) {
  return message.find("timed out") != std::string::npos || message.find("Timed out") != std::string::npos;
}

}  // namespace

std::string ipv4_of(const std::string& host) {
  in_addr parsed{};
  if (::inet_pton(AF_INET, host.c_str(), &parsed) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* results = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &results) != 0 || results == nullptr) return "";
  const std::string address = dotted(reinterpret_cast<const sockaddr_in*>(results->ai_addr)->sin_addr);
  ::freeaddrinfo(results);
  return address;
}

std::string source_address_towards(const std::string& host) {
  const std::string target = ipv4_of(host);
  if (target.empty()) return "";
  // connect() on a UDP socket only asks the kernel for the route.
  const int probe = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(9);
  ::inet_pton(AF_INET, target.c_str(), &address.sin_addr);
  std::string source;
  if (::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
    sockaddr_in local{};
    socklen_t length = sizeof local;
    if (::getsockname(probe, reinterpret_cast<sockaddr*>(&local), &length) == 0) source = dotted(local.sin_addr);
  }
  ::close(probe);
  return source;
}

std::string interface_with_address(const std::string& address) {
  for (const auto& [name, ipv4] : interfaces())
    if (ipv4 == address) return name;
  return "";
}

std::string address_of_interface(const std::string& name) {
  for (const auto& [interface, ipv4] : interfaces())
    if (interface == name) return ipv4;
  return "";
}

std::string store_bind_address(const ProcessPlacement& placement) {
  const std::string chosen = environment("FABRIC_STORE_BIND");
  if (chosen == "all" || chosen == "*" || chosen == "0.0.0.0") return "";
  if (!chosen.empty()) {
    const std::string address = ipv4_of(chosen);
    if (address.empty() || interface_with_address(address).empty()) {
      throw std::invalid_argument("fabric: FABRIC_STORE_BIND=" + chosen +
                                  " is not an IPv4 address of this host (give one of its "
                                  "addresses, or 'all' for every interface)");
    }
    return address;
  }
  const std::string main = ipv4_of(placement.master_addr);
  // A loopback main address: nobody outside this host has to reach the store.
  if (main.rfind("127.", 0) == 0) return "127.0.0.1";
  // The main address is this host's: the other ranks connect to it there.
  if (!main.empty() && !interface_with_address(main).empty()) return main;
  return "";  // a name this host does not hold: listen everywhere, as c10d does
}

BindScope::BindScope(const std::string& ipv4) {
  previous_active_ = narrow_wildcard_binds;
  std::memcpy(previous_, narrow_to, 4);
  in_addr parsed{};
  if (ipv4.empty() || ::inet_pton(AF_INET, ipv4.c_str(), &parsed) != 1) return;
  active_ = true;
  narrow_wildcard_binds = true;
  std::memcpy(narrow_to, &parsed.s_addr, 4);
}

BindScope::~BindScope() {
  narrow_wildcard_binds = previous_active_;
  std::memcpy(narrow_to, previous_, 4);
}

GlooAddress gloo_address(const ProcessPlacement& placement) {
  GlooAddress chosen;
  const std::string named = environment("GLOO_SOCKET_IFNAME");
  if (!named.empty()) {
    // Gloo takes a single interface here (the first of a comma list).
    chosen.interface = named.substr(0, named.find(','));
    chosen.address = address_of_interface(chosen.interface);
    chosen.why = "GLOO_SOCKET_IFNAME=" + named;
    return chosen;
  }
  if (placement.num_nodes == 1) {
    chosen.address = "127.0.0.1";
    chosen.why = "a single-node job";
    return chosen;
  }
  chosen.address = source_address_towards(placement.master_addr);
  if (chosen.address.empty()) {
    throw std::runtime_error("fabric: rank " + std::to_string(placement.global_rank) +
                             " has no route to the main address " + placement.master_addr +
                             " (MASTER_ADDR, --main-address): check the address, or name the "
                             "interface that reaches node 0 in GLOO_SOCKET_IFNAME");
  }
  chosen.why = "the address of this host's route to " + placement.master_addr;
  return chosen;
}

std::string JobLayout::describe_node(int node) const {
  std::vector<int> ranks;
  std::vector<std::string> addresses;
  for (size_t rank = 0; rank < node_of_rank.size(); ++rank) {
    if (node_of_rank[rank] != node) continue;
    ranks.push_back(static_cast<int>(rank));
    const std::string& address = address_of_rank[rank];
    if (!address.empty() && std::find(addresses.begin(), addresses.end(), address) == addresses.end())
      addresses.push_back(address);
  }
  std::string text = "node " + std::to_string(node) + " (rank" + (ranks.size() == 1 ? " " : "s ") + join_ranks(ranks);
  for (size_t i = 0; i < addresses.size(); ++i) text += (i == 0 ? " at " : ", ") + addresses[i];
  return text + ")";
}

std::string JobLayout::describe_other_nodes(int node) const {
  std::vector<int> nodes;
  for (int n : node_of_rank)
    if (n != node && std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  std::sort(nodes.begin(), nodes.end());
  std::string text;
  for (size_t i = 0; i < nodes.size(); ++i) text += (i == 0 ? "" : "; ") + describe_node(nodes[i]);
  return text;
}

JobLayout check_job(c10d::Store& store, const ProcessPlacement& placement, std::chrono::milliseconds timeout,
                    const std::string& address) {
  const std::string where = placement.master_addr + ":" + std::to_string(placement.master_port);
  RankRecord mine{placement.world_size, placement.num_nodes, placement.node_rank, address};
  // The first exchange with the store: a MASTER_PORT that another program
  // holds answers nothing, or nonsense.
  const auto exchange = [&](auto&& operation) {
    try {
      return operation();
    } catch (const std::exception& error) {
      const std::string cause = first_line_of(error.what());
      if (timed_out(cause)) throw;  // a rank that did not come: said by the caller
      throw std::runtime_error("fabric: rank " + std::to_string(placement.global_rank) +
                               " got no valid answer from the rendezvous store at " + where + " within " +
                               std::to_string(timeout.count()) +
                               " ms (Options::timeout); is MASTER_PORT held by another program? "
                               "Store error: " +
                               cause);
    }
  };
  const std::string text = format(mine);
  exchange([&] {
    store.set(record_key(placement.global_rank), std::vector<uint8_t>(text.begin(), text.end()));
    return 0;
  });
  // Two ranks of one job started differently: every value that differs, named.
  const auto compare = [&](int rank, const RankRecord& theirs) {
    std::string differences;
    if (theirs.world_size != mine.world_size) {
      differences += "world size " + std::to_string(theirs.world_size) + ", rank " +
                     std::to_string(placement.global_rank) + " with world size " + std::to_string(mine.world_size);
    }
    if (theirs.num_nodes != mine.num_nodes) {
      differences += std::string(differences.empty() ? "" : "; and with ") + std::to_string(theirs.num_nodes) +
                     " nodes, rank " + std::to_string(placement.global_rank) + " with " +
                     std::to_string(mine.num_nodes) + " nodes";
    }
    if (differences.empty()) return;
    throw std::runtime_error("fabric: rank " + std::to_string(rank) + " (node " + std::to_string(theirs.node) +
                             ") was started with " + differences +
                             ": every rank of a job needs the same WORLD_SIZE and number of nodes "
                             "(fabric-run: the same --num-nodes and --devices on every node; check "
                             "the launcher's environment of each rank)");
  };

  JobLayout layout;
  if (placement.global_rank == 0) {
    layout.node_of_rank.assign(static_cast<size_t>(placement.world_size), -1);
    layout.address_of_rank.resize(static_cast<size_t>(placement.world_size));
    layout.node_of_rank[0] = mine.node;
    layout.address_of_rank[0] = mine.address;
    // Each rank's record is checked as it arrives, so that a rank started
    // for another job is refused at once, not after waiting for the others.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int arrived = 1;
    while (arrived < placement.world_size) {
      for (int rank = 1; rank < placement.world_size; ++rank) {
        if (layout.node_of_rank[static_cast<size_t>(rank)] >= 0) continue;
        if (!exchange([&] { return store.check({record_key(rank)}); })) continue;
        const RankRecord theirs = parse(exchange([&] { return store.get(record_key(rank)); }));
        compare(rank, theirs);
        layout.node_of_rank[static_cast<size_t>(rank)] = theirs.node;
        layout.address_of_rank[static_cast<size_t>(rank)] = theirs.address;
        ++arrived;
      }
      if (arrived == placement.world_size) break;
      if (std::chrono::steady_clock::now() > deadline) {
        // Who never came, by node (fabric-run's layout: the same number of
        // ranks on every node, numbered node by node).
        std::map<int, std::vector<int>> missing;
        const int per_node = std::max(1, placement.world_size / std::max(1, placement.num_nodes));
        for (int rank = 1; rank < placement.world_size; ++rank)
          if (layout.node_of_rank[static_cast<size_t>(rank)] < 0) missing[rank / per_node].push_back(rank);
        std::string who;
        for (const auto& [node, ranks] : missing) {
          who += std::string(who.empty() ? "" : "; ") +
                 (placement.num_nodes > 1 ? "node " + std::to_string(node) + ": " : "") + "rank" +
                 (ranks.size() == 1 ? " " : "s ") + join_ranks(ranks);
        }
        throw std::runtime_error("fabric: the job's ranks did not all come within " + std::to_string(timeout.count()) +
                                 " ms (Options::timeout); missing: " + who +
                                 ". Start every node (fabric-run --num-nodes " + std::to_string(placement.num_nodes) +
                                 " --node-rank K --main-address " + placement.master_addr + " --main-port " +
                                 std::to_string(placement.master_port) + " on node K), and check that each reaches " +
                                 where + " (a firewall, a wrong address)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string table;
    for (int rank = 0; rank < placement.world_size; ++rank) {
      const std::string& address = layout.address_of_rank[static_cast<size_t>(rank)];
      table += std::to_string(layout.node_of_rank[static_cast<size_t>(rank)]) + " " +
               (address.empty() ? "-" : address) + "\n";
    }
    store.set(kLayoutKey, std::vector<uint8_t>(table.begin(), table.end()));
    return layout;
  }
  compare(0, parse(exchange([&] { return store.get(record_key(0)); })));
  // Rank 0 publishes the layout once every rank has come, or ends the job
  // naming who did not: wait a little longer than it does.
  std::vector<uint8_t> bytes;
  try {
    store.setTimeout(timeout + std::chrono::seconds(10));
    bytes = store.get(kLayoutKey);
    store.setTimeout(timeout);
  } catch (const std::exception& error) {
    throw std::runtime_error("fabric: rank " + std::to_string(placement.global_rank) +
                             " did not get the job's layout from rank 0's store at " + where +
                             ": rank 0 ended the rendezvous (its message says why) or became "
                             "unreachable. Store error: " +
                             first_line_of(error.what()));
  }
  std::istringstream table(std::string(bytes.begin(), bytes.end()));
  int node = 0;
  std::string node_address;
  while (table >> node >> node_address) {
    layout.node_of_rank.push_back(node);
    layout.address_of_rank.push_back(node_address == "-" ? "" : node_address);
  }
  return layout;
}

std::string describe_lost_peer(const JobLayout& layout, const ProcessPlacement& placement, const std::string& error) {
  static const std::regex peer(R"(\[(\d+\.\d+\.\d+\.\d+)\]:\d+)");
  std::smatch found;
  if (!std::regex_search(error, found, peer)) return "";
  const std::string address = found[1];
  for (size_t rank = 0; rank < layout.address_of_rank.size(); ++rank) {
    if (layout.address_of_rank[rank] == address && layout.node_of_rank[rank] != placement.node_rank)
      return "lost " + layout.describe_node(layout.node_of_rank[rank]);
  }
  return "";
}

c10::intrusive_ptr<c10d::TCPStore> connect_store_client(const std::string& host, const c10d::TCPStoreOptions& options,
                                                        std::chrono::milliseconds deadline) {
  struct Attempt {
    std::mutex mutex;
    std::condition_variable done;
    bool finished = false;
    c10::intrusive_ptr<c10d::TCPStore> store;
    std::exception_ptr error;
  };
  auto attempt = std::make_shared<Attempt>();
  std::thread([attempt, host, options] {
    c10::intrusive_ptr<c10d::TCPStore> store;
    std::exception_ptr error;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(host, options);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(attempt->mutex);
    attempt->store = std::move(store);
    attempt->error = error;
    attempt->finished = true;
    attempt->done.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(attempt->mutex);
  if (!attempt->done.wait_for(lock, deadline, [&] { return attempt->finished; })) {
    throw std::runtime_error("connected, but no answer from the store within " + std::to_string(deadline.count()) +
                             " ms: the program on that port does not speak c10d's store protocol");
  }
  if (attempt->error) std::rethrow_exception(attempt->error);
  return attempt->store;
}

void bound_store_connections(int port, std::chrono::milliseconds timeout) {
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) return;
  timeval limit{};
  limit.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  limit.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  while (const dirent* entry = ::readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == ::dirfd(fds)) continue;
    int type = 0;
    socklen_t type_length = sizeof type;
    if (::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &type_length) != 0 || type != SOCK_STREAM)
      continue;
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof peer;
    if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) continue;
    int peer_port = -1;
    if (peer.ss_family == AF_INET) peer_port = ntohs(reinterpret_cast<const sockaddr_in&>(peer).sin_port);
    if (peer.ss_family == AF_INET6) peer_port = ntohs(reinterpret_cast<const sockaddr_in6&>(peer).sin6_port);
    if (peer_port != port) continue;
    ::setsockopt(static_cast<int>(fd), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    ::setsockopt(static_cast<int>(fd), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  }
  ::closedir(fds);
}

}  // namespace detail
}  // namespace fabric
