// Rendezvous across nodes: where rank 0's store listens, which network
// address Gloo uses, the check that every rank belongs to the same job, and
// who is where (to name the node a rank lost).
//
// One node: everything is on loopback (the store listens on 127.0.0.1 only,
// Gloo binds 127.0.0.1). Several nodes: the store listens on the main
// address (MASTER_ADDR, --main-address) only, and each rank's Gloo binds
// the address its host uses to reach the main address (the route's source
// address): a host with several interfaces, one of which cannot reach the
// other nodes, picks the right one without configuration.
// GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME name an interface instead;
// FABRIC_STORE_BIND=all (or an address) makes the store listen elsewhere.
#pragma once

#include "plugins/environments/process_placement.h"

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace fabric {
namespace detail {

// ---- addresses of this host ------------------------------------------------
// `host` (a name or an IPv4 address) as a dotted IPv4 address; "" if it has none.
std::string ipv4_of(const std::string& host);
// The IPv4 address this host sends from to reach `host` (the kernel's route
// choice, no packet is sent); "" when there is no route.
std::string source_address_towards(const std::string& host);
// The interface that holds the IPv4 `address` ("" if none does), and the
// IPv4 address of interface `name` ("" if it has none).
std::string interface_with_address(const std::string& address);
std::string address_of_interface(const std::string& name);

// ---- where rank 0's store listens --------------------------------------------
// The address rank 0's store binds instead of every interface: the main
// address when it is one of this host's (loopback for single-node jobs),
// FABRIC_STORE_BIND when set ("all": every interface); "" = every interface.
std::string store_bind_address(const ProcessPlacement& placement);

// While it lives, this thread's binds of a wildcard address (IPv4 0.0.0.0,
// IPv6 ::) go to `ipv4` instead (IPv6: the v4-mapped ::ffff:ipv4, which
// serves IPv4 clients). Inactive for "". Every other bind passes unchanged.
class BindScope {
 public:
  explicit BindScope(const std::string& ipv4);
  ~BindScope();
  BindScope(const BindScope&) = delete;
  BindScope& operator=(const BindScope&) = delete;

 private:
  bool active_ = false;
  unsigned char previous_[4] = {0, 0, 0, 0};
  bool previous_active_ = false;
};

// ---- store connections that cannot block for ever ---------------------------------
// A TCPStore client of `host`, connected within `deadline`. c10d 2.x pings
// the server inside the constructor and waits for the answer with no
// timeout: a MASTER_PORT held by a program that accepts connections but
// does not answer would block the rank for ever. The constructor runs on a
// helper thread; past the deadline this throws (the thread, still blocked,
// ends with the process).
c10::intrusive_ptr<c10d::TCPStore> connect_store_client(const std::string& host, const c10d::TCPStoreOptions& options,
                                                        std::chrono::milliseconds deadline);
// Gives this process's connections to the store at `port` (those whose peer
// port it is) a receive and send timeout. c10d 2.x waits in recv() with no
// timeout in every store operation but wait()/get(), so a store cut off
// without a reset (a network failure) would block check(), add() and set()
// for ever; 1.13 set the same timeouts itself.
void bound_store_connections(int port, std::chrono::milliseconds timeout);

// ---- the address Gloo binds ------------------------------------------------------
struct GlooAddress {
  std::string interface;  // GLOO_SOCKET_IFNAME: create the device for it
  std::string address;    // otherwise: create the device for this address
  std::string why;        // for messages: how it was chosen
};
GlooAddress gloo_address(const ProcessPlacement& placement);

// ---- who is where ---------------------------------------------------------------
struct JobLayout {
  std::vector<int> node_of_rank;
  std::vector<std::string> address_of_rank;
  // "node 1 (ranks 2, 3 at 10.0.0.2)"
  std::string describe_node(int node) const;
  // Every node but `node`, described, joined by "; ".
  std::string describe_other_nodes(int node) const;
};

// Every rank publishes its world size, number of nodes, node and address;
// rank 0 waits (up to `timeout`) until all ranks have, checks that they
// were started for the same job (a different world size or number of nodes
// is refused, naming both values), names the ranks that never came, and
// publishes the layout, which every other rank reads.
JobLayout check_job(c10d::Store& store, const ProcessPlacement& placement, std::chrono::milliseconds timeout,
                    const std::string& address);

// For a collective that failed with `error` on this rank: "lost node 1
// (ranks 2, 3 at 10.0.0.2)" when the error names a peer on another node
// (Gloo's "Connection closed by peer [10.0.0.2]:port"), else "".
std::string describe_lost_peer(const JobLayout& layout, const ProcessPlacement& placement, const std::string& error);

}  // namespace detail
}  // namespace fabric
