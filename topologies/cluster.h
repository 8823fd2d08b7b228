// The physical cluster as a graph of devices, switches and one-way links (Boost.Graph inside,
// plain values outside), with the route a message takes between two devices.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster_spec.h"

namespace shardsim::topologies {

enum class NodeKind { kDevice, kSwitch };

struct Node {
  NodeKind kind = NodeKind::kDevice;
  std::string name;  // "chip(3,0,1)", "gpu 17", "nvswitch 2", "leaf 4", "core"
};

// One direction of a physical link (or of a bundle of identical links between the same pair).
struct Link {
  int64_t from = 0;  // node ids
  int64_t to = 0;
  std::string link_class;            // a key of ClusterSpec::links: "ici", "nvlink", ...
  double bandwidth_bytes_per_s = 0;  // this direction, all links of the bundle together
  double latency_s = 0;              // added by traversing this link
  double efficiency = 1;             // fraction of bandwidth collectives reach (from the spec)
  std::string name;                  // "chip(0,0,0) -> chip(1,0,0) ici +x0", "leaf 3 -> core"
};

// How the builders turn a spec into links (the modelling choices, stated once):
// - torus: one link per direction to each neighbour along each axis (wraparound only where the
//   spec says so); each hop costs the ICI latency; several slices reach each other through a DCN
//   core switch, each chip with its own DCN uplink.
// - switched: each GPU reaches its node's NVSwitch over all its NVLinks as one bundle, and its
//   leaf switch over its NIC; `leaf_ports` NICs share a leaf whose uplink to an ideal core carries
//   leaf_ports x NIC bandwidth / oversubscription. fat-tree: consecutive NICs share a leaf;
//   rail-optimized: NIC i of `leaf_ports` consecutive nodes share the rail-i leaf. A class's
//   latency is one traversal of that fabric: half on the hop into a switch, half on the hop out;
//   switch-to-switch hops limit bandwidth but add no latency.
// - local: each core reaches a shared-memory switch, latency split the same way.
class Cluster {
 public:
  // REQUIRES: ValidateCluster(spec) passed.
  explicit Cluster(const ClusterSpec& spec);
  ~Cluster();
  Cluster(Cluster&&) noexcept;
  Cluster& operator=(Cluster&&) noexcept;

  const ClusterSpec& spec() const;
  // Devices are nodes [0, num_devices()), in the cluster's device order (on a torus dimension 0
  // varies fastest; on GPU clusters a node's GPUs are consecutive).
  int64_t num_devices() const;
  int64_t num_nodes() const;
  const Node& node(int64_t id) const;
  const std::vector<Link>& links() const;

  // Link ids from device `src` to device `dst`, in order; empty when src == dst.
  // Tori route in dimension order (axis 0 first, the shorter way round where it wraps; half-way
  // round, + from even coordinates and - from odd ones);
  // elsewhere the lowest-latency path (Dijkstra over link latencies, fewest hops on ties), read
  // off the fabric's structure when that agrees with Dijkstra on a sample of pairs.
  // REQUIRES: 0 <= src, dst < num_devices(). Thread-safe.
  std::vector<int64_t> Route(int64_t src, int64_t dst) const;
  // The same route written into `*route` (its storage reused: routing a torus allocates nothing
  // once the vector has grown to the longest route).
  void Route(int64_t src, int64_t dst, std::vector<int64_t>* route) const;
  // The lowest-latency route by Dijkstra over the graph, whatever fast path Route() takes (the
  // reference the fast paths are checked against). Not for tori.
  std::vector<int64_t> ReferenceRoute(int64_t src, int64_t dst) const;
  // True when Route() reads switched or local routes off the fabric's structure.
  bool structural_routes() const;
  // True when Route() is O(hops) (tori and structural fabrics), so batching by source buys nothing.
  bool fast_routes() const;

  // Route(src, d) for every d of `dsts`, from one search (much cheaper than one call each when a
  // device talks to many others, as in an all-to-all).
  std::vector<std::vector<int64_t>> RoutesFrom(int64_t src, const std::vector<int64_t>& dsts) const;

  // Torus coordinates of a device (empty on other topologies); the last entry is the slice
  // when there are several.
  std::vector<int64_t> TorusCoordinates(int64_t device) const;

  // `devices` moved by a translation of the fabric that maps every route onto a route over links
  // of the same class, bandwidth and latency, chosen to bring the first device as near the origin
  // as that symmetry allows: so groups of the same shape anywhere get the same devices (and the
  // same collective costs). On one torus slice, each wrapped axis longer than 2 moves by the
  // smallest member coordinate rounded down to even (routes half-way round break ties by the
  // parity of the coordinate; no member crosses the wraparound, so boxes stay boxes); unwrapped
  // axes, several slices and other fabrics do not move.
  std::vector<int64_t> Translated(const std::vector<int64_t>& devices) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardsim::topologies
