#include "sim/collective_schedule.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/units.h"
#include "sim/routed_all_to_all.h"

namespace shardsim::sim {
namespace {

using topologies::Cluster;

int32_t Mod(int64_t a, int64_t n) { return static_cast<int32_t>(((a % n) + n) % n); }

// Ring neighbours i -> i + direction over the n members first[0], first[stride], ..., each flow
// carrying `fraction`.
void AddRing(const int32_t* first, int64_t n, int64_t stride, int direction, double fraction, std::vector<Flow>& flows) {
  if (n < 2) return;
  for (int64_t i = 0; i < n; ++i) flows.push_back({first[i * stride], first[Mod(i + direction, n) * stride], fraction});
}

void AddRing(const std::vector<int32_t>& order, int direction, double fraction, std::vector<Flow>& flows) {
  AddRing(order.data(), static_cast<int64_t>(order.size()), 1, direction, fraction, flows);
}

std::vector<int32_t> Iota(int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Rounds a ring of n members needs: N-1 for all-gather / reduce-scatter, 2(N-1) for all-reduce.
int64_t RingRounds(CollectiveOp op, int64_t n) { return op == CollectiveOp::kAllReduce ? 2 * (n - 1) : n - 1; }

// The group's members by node (NVLink domain): node k's `local` members, in group order, are
// members[k * local, (k + 1) * local), nodes in the order of their ids.
struct NodeLayout {
  int64_t nodes = 0;
  int64_t local = 0;
  std::vector<int32_t> members;
  const int32_t* Node(int64_t k) const { return members.data() + k * local; }
};

// The layout, or nullopt with `*why_not` unless the cluster is switched and the group spans 2 or
// more nodes with the same number (>= 2) of its members in each.
std::optional<NodeLayout> LayOutByNode(const Cluster& cluster, const DeviceGroup& group, std::string* why_not) {
  const TopologySpec& t = cluster.spec().topology;
  if (t.kind != TopologyKind::kSwitched) {
    *why_not = "the cluster has no NVSwitch nodes";
    return std::nullopt;
  }
  std::vector<std::pair<int64_t, int32_t>> keyed(group.devices.size());  // (node, member)
  for (size_t i = 0; i < group.devices.size(); ++i) keyed[i] = {NodeOf(t, group.devices[i]), static_cast<int32_t>(i)};
  if (!std::is_sorted(keyed.begin(), keyed.end())) std::sort(keyed.begin(), keyed.end());  // groups are mostly in node order
  NodeLayout layout;
  for (size_t begin = 0, end = 0; begin < keyed.size(); begin = end) {
    while (end < keyed.size() && keyed[end].first == keyed[begin].first) layout.members.push_back(keyed[end++].second);
    const int64_t count = static_cast<int64_t>(end - begin);
    if (layout.nodes++ == 0) layout.local = count;
    if (count != layout.local) {
      *why_not = "nodes hold different numbers of the group's devices";
      return std::nullopt;
    }
  }
  if (layout.nodes < 2 || layout.local < 2) {
    *why_not = layout.nodes < 2 ? "the group lies inside one node" : "the group has one device per node";
    return std::nullopt;
  }
  return layout;
}

// NCCL's rings across NVSwitch nodes: one channel per member a node holds (L of them), each
// entering and leaving every node on its own rail, so every member's NIC carries one channel's
// share (1/L) and the rest of the ring runs over NVLink. Per round a member sends 1/n of the
// buffer as a plain ring does: (L-1)/(L n) to the next member of its node, 1/(L n) to the member
// of the same local index in the next node (`direction` -1 mirrors both).
void AddChannelRings(const NodeLayout& layout, int direction, double fraction, std::vector<Flow>& flows) {
  const double l = static_cast<double>(layout.local);
  for (int64_t k = 0; k < layout.nodes; ++k) {
    const int32_t* here = layout.Node(k);
    const int32_t* next = layout.Node(Mod(k + direction, layout.nodes));
    for (int64_t a = 0; a < layout.local; ++a) {
      flows.push_back({here[a], here[Mod(a + direction, layout.local)], fraction * (l - 1) / l});
      flows.push_back({here[a], next[a], fraction / l});
    }
  }
}

// A ring over the group in its order, or, across NVSwitch nodes (`layout`), NCCL's channel
// rings (AddChannelRings).
Schedule Ring(CollectiveOp op, int64_t n, bool bidirectional, const std::optional<NodeLayout>& layout) {
  Schedule s{op, bidirectional ? Algorithm::kBidirectionalRing : Algorithm::kRing, n, {}, ""};
  Step step;
  step.rounds = RingRounds(op, n);
  const double share = (bidirectional ? 0.5 : 1.0) / static_cast<double>(n);
  const std::vector<int32_t> order = layout ? std::vector<int32_t>{} : Iota(n);  // group order, where no channels
  for (int direction : bidirectional ? std::vector<int>{+1, -1} : std::vector<int>{+1}) {
    if (layout) {
      AddChannelRings(*layout, direction, share, step.flows);
    } else {
      AddRing(order, direction, share, step.flows);
    }
  }
  s.steps.push_back(step);
  const std::string kind = bidirectional ? "bidirectional ring" : "ring";
  if (layout) {
    s.description = kind + " over " + std::to_string(n) + " devices in " + std::to_string(layout->local) + " channels, each crossing the " +
                    std::to_string(layout->nodes) + " nodes on its own NIC (NCCL's rings)";
  } else {
    s.description = kind + " over " + std::to_string(n) + " devices in group order";
  }
  return s;
}

// --- torus: the group must be a box of the torus; one bidirectional ring per box axis. ---

struct TorusBox {
  std::vector<int64_t> extent;           // members along each coordinate (1 where the box is flat)
  std::vector<int32_t> member_at;        // box-local coordinates (axis 0 fastest) -> member
  std::vector<std::vector<int64_t>> local;  // member -> box-local coordinates
  std::vector<size_t> axes;              // coordinates with extent > 1
};

std::optional<TorusBox> FindBox(const Cluster& cluster, const DeviceGroup& group, std::string* why_not) {
  if (cluster.spec().topology.kind != TopologyKind::kTorus) {
    *why_not = "the cluster is not a torus";
    return std::nullopt;
  }
  const size_t n = group.devices.size();
  std::vector<std::vector<int64_t>> coords(n);
  for (size_t i = 0; i < n; ++i) coords[i] = cluster.TorusCoordinates(group.devices[i]);
  const size_t rank = coords[0].size();
  TorusBox box;
  std::vector<int64_t> low(rank);
  for (size_t a = 0; a < rank; ++a) {
    std::vector<int64_t> values;
    for (const auto& c : coords) values.push_back(c[a]);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    const int64_t m = static_cast<int64_t>(values.size());
    if (values.back() - values.front() + 1 != m) {
      *why_not = "the group's chips are not contiguous along torus axis " + std::to_string(a);
      return std::nullopt;
    }
    box.extent.push_back(m);
    low[a] = values.front();
    if (m > 1) box.axes.push_back(a);
  }
  int64_t volume = 1;
  for (int64_t e : box.extent) volume *= e;
  if (volume != static_cast<int64_t>(n)) {
    *why_not = "the group is not a box of the torus (" + std::to_string(n) + " chips in a " + std::to_string(volume) + "-chip bounding box)";
    return std::nullopt;
  }
  box.member_at.assign(static_cast<size_t>(volume), -1);
  box.local.resize(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t index = 0;
    for (size_t a = rank; a-- > 0;) {
      box.local[i].insert(box.local[i].begin(), coords[i][a] - low[a]);
      index = index * box.extent[a] + (coords[i][a] - low[a]);
    }
    box.member_at[static_cast<size_t>(index)] = static_cast<int32_t>(i);
  }
  return box;
}

int32_t Neighbour(const TorusBox& box, int32_t member, size_t axis, int direction) {
  const std::vector<int64_t>& c = box.local[static_cast<size_t>(member)];
  int64_t index = 0;
  for (size_t a = c.size(); a-- > 0;) index = index * box.extent[a] + (a == axis ? Mod(c[a] + direction, box.extent[a]) : c[a]);
  return box.member_at[static_cast<size_t>(index)];
}

// One phase: part j (of k) runs a bidirectional ring along `axis_of[j]`, each direction carrying
// `fraction[j]` per round. Parts on shorter axes finish first, so the phase is split into steps
// by how many parts are still running.
void AppendTorusPhase(const TorusBox& box, const std::vector<size_t>& axis_of, const std::vector<double>& fraction,
                      std::vector<Step>& steps) {
  std::vector<int64_t> rounds_of(axis_of.size());
  for (size_t j = 0; j < axis_of.size(); ++j) rounds_of[j] = box.extent[axis_of[j]] - 1;
  std::vector<int64_t> ends = rounds_of;
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  int64_t done = 0;
  for (int64_t end : ends) {
    Step step;
    step.rounds = end - done;
    for (size_t j = 0; j < axis_of.size(); ++j) {
      if (rounds_of[j] < end) continue;
      for (int32_t m = 0; m < static_cast<int32_t>(box.local.size()); ++m) {
        step.flows.push_back({m, Neighbour(box, m, axis_of[j], +1), fraction[j]});
        step.flows.push_back({m, Neighbour(box, m, axis_of[j], -1), fraction[j]});
      }
    }
    steps.push_back(std::move(step));
    done = end;
  }
}

// Scaling book: all-gather over k axes at once splits the data into k parts, part j visiting the
// axes in the order rotated by j, so every axis's links are busy in every phase.
Schedule Torus(CollectiveOp op, const TorusBox& box) {
  const int64_t n = static_cast<int64_t>(box.local.size());
  const size_t k = box.axes.size();
  Schedule s{op, Algorithm::kTorus, n, {}, ""};
  auto axis = [&](size_t part, size_t phase) { return box.axes[(part + phase) % k]; };
  // Reduce-scatter: part j holds 1/k of the data; each phase divides it by the axis's extent.
  if (op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllReduce) {
    std::vector<double> data(k, 1.0 / static_cast<double>(k));
    for (size_t p = 0; p < k; ++p) {
      std::vector<size_t> axis_of(k);
      std::vector<double> fraction(k);
      for (size_t j = 0; j < k; ++j) {
        axis_of[j] = axis(j, p);
        const double m = static_cast<double>(box.extent[axis_of[j]]);
        fraction[j] = data[j] / m / 2;
        data[j] /= m;
      }
      AppendTorusPhase(box, axis_of, fraction, s.steps);
    }
  }
  // All-gather: part j starts from 1/(kN) per chip and multiplies by each axis's extent; after a
  // reduce-scatter it visits the axes in reverse order.
  if (op == CollectiveOp::kAllGather || op == CollectiveOp::kAllReduce) {
    std::vector<double> block(k, 1.0 / static_cast<double>(k) / static_cast<double>(n));
    for (size_t p = 0; p < k; ++p) {
      std::vector<size_t> axis_of(k);
      std::vector<double> fraction(k);
      for (size_t j = 0; j < k; ++j) {
        axis_of[j] = op == CollectiveOp::kAllReduce ? axis(j, k - 1 - p) : axis(j, p);
        fraction[j] = block[j] / 2;
        block[j] *= static_cast<double>(box.extent[axis_of[j]]);
      }
      AppendTorusPhase(box, axis_of, fraction, s.steps);
    }
  }
  std::string shape;
  for (size_t a : box.axes) shape += (shape.empty() ? "" : "x") + std::to_string(box.extent[a]);
  s.description = "bidirectional ring per torus axis (" + shape + "), " + std::to_string(k) + " axes in parallel phases";
  return s;
}

// --- hierarchical: inside each node, then across nodes (one ring per local index), then inside.

std::optional<Schedule> Hierarchical(const Cluster& cluster, const DeviceGroup& group, CollectiveOp op, bool in_network,
                                     std::string* why_not) {
  const TopologySpec& t = cluster.spec().topology;
  const std::optional<NodeLayout> layout = LayOutByNode(cluster, group, why_not);
  if (!layout) return std::nullopt;
  const int64_t nodes = layout->nodes, local = layout->local;
  const int64_t n = nodes * local;
  const double g = static_cast<double>(local), m = static_cast<double>(nodes);
  auto inside = [&](double fraction, int64_t rounds) {
    Step step;
    step.rounds = rounds;
    for (int64_t k = 0; k < nodes; ++k) AddRing(layout->Node(k), local, 1, +1, fraction, step.flows);
    return step;
  };
  auto across = [&](double fraction, int64_t rounds) {
    Step step;
    step.rounds = rounds;
    for (int64_t l = 0; l < local; ++l) AddRing(layout->Node(0) + l, nodes, local, +1, fraction, step.flows);
    return step;
  };
  Schedule s{op, in_network ? Algorithm::kSharp : Algorithm::kHierarchical, n, {}, ""};
  if (in_network) {
    if (!t.sharp) {
      *why_not = "this cluster's InfiniBand does not reduce in the network (add ,sharp=true where it does)";
      return std::nullopt;
    }
    // SHARP: each GPU sends its V/G shard into the switches and gets the reduced shard back: V/G
    // out of and into every NIC, as the flows to the next node's GPU of the same index load them.
    s.steps = {inside(1 / g, local - 1), across(1 / g, 1), inside(1 / g, local - 1)};
    s.description = "ring inside each of " + std::to_string(nodes) + " nodes, in-network reduction (SHARP) across nodes";
    return s;
  }
  switch (op) {
    case CollectiveOp::kAllReduce:
      s.steps = {inside(1 / g, local - 1), across(1 / g / m, 2 * (nodes - 1)), inside(1 / g, local - 1)};
      break;
    case CollectiveOp::kReduceScatter: s.steps = {inside(1 / g, local - 1), across(1 / g / m, nodes - 1)}; break;
    case CollectiveOp::kAllGather: s.steps = {across(1 / g / m, nodes - 1), inside(1 / g, local - 1)}; break;
    default: *why_not = "hierarchical runs all-reduce, all-gather and reduce-scatter"; return std::nullopt;
  }
  s.description = "ring inside each of " + std::to_string(nodes) + " nodes (" + std::to_string(local) +
                  " devices), ring across nodes per local index (not an algorithm NCCL runs: auto never picks it)";
  return s;
}

// --- trees (NCCL's double binary tree): over the nodes with a chain inside each (NodeTree), or a
// heap-ordered binary tree over the members and its mirror.

int64_t TreeDepth(int64_t n) {
  int64_t depth = 0;
  while ((int64_t{1} << (depth + 1)) - 1 < n) ++depth;
  return depth;
}

void AddTreeEdges(int64_t n, bool mirrored, bool upward, double fraction, std::vector<Flow>& flows) {
  for (int64_t i = 1; i < n; ++i) {
    int64_t child = i, parent = (i - 1) / 2;
    if (mirrored) {
      child = n - 1 - child;
      parent = n - 1 - parent;
    }
    flows.push_back(upward ? Flow{static_cast<int32_t>(child), static_cast<int32_t>(parent), fraction}
                           : Flow{static_cast<int32_t>(parent), static_cast<int32_t>(child), fraction});
  }
}

// NCCL's all-reduce tree across NVSwitch nodes (`layout`): per channel (one per member a node
// holds, each 1/L of the buffer) a chain through the node's members ending at the channel's own
// member, which alone crosses the network: to its node's parent and children in a binary tree
// over the nodes and in its mirror, half the channel's bytes each (NCCL's double binary tree, one
// tree node per machine: src/graph/trees.cc, ncclGetDtree). Reduce up and broadcast down run at
// once, pipelined, over the chain's L-1 hops and the node tree's depth each way.
Schedule NodeTree(const NodeLayout& layout, int64_t n) {
  Schedule s{CollectiveOp::kAllReduce, Algorithm::kTree, n, {}, ""};
  const int64_t depth = std::max<int64_t>(1, TreeDepth(layout.nodes));
  const double f = 1.0 / static_cast<double>(layout.local);
  Step step{{}, 2 * (layout.local - 1 + depth), true};
  for (int64_t c = 0; c < layout.local; ++c) {
    for (int64_t k = 0; k < layout.nodes; ++k) {
      const int32_t* node = layout.Node(k);
      for (int64_t j = 0; j + 1 < layout.local; ++j) {  // the chain c-1, ..., c+1, c (mod L), ending at c
        const int32_t nearer = node[Mod(c + j, layout.local)], farther = node[Mod(c + j + 1, layout.local)];
        step.flows.push_back({farther, nearer, f});
        step.flows.push_back({nearer, farther, f});
      }
    }
    for (bool mirrored : {false, true}) {
      for (int64_t i = 1; i < layout.nodes; ++i) {
        int64_t child = i, parent = (i - 1) / 2;
        if (mirrored) {
          child = layout.nodes - 1 - child;
          parent = layout.nodes - 1 - parent;
        }
        const int32_t below = layout.Node(child)[c], above = layout.Node(parent)[c];
        step.flows.push_back({below, above, f / 2});
        step.flows.push_back({above, below, f / 2});
      }
    }
  }
  s.steps = {step};
  s.description = "double binary tree over " + std::to_string(layout.nodes) + " nodes (depth " + std::to_string(depth) + ") in " +
                  std::to_string(layout.local) + " channels, each a chain through a node's " + std::to_string(layout.local) +
                  " devices to its own NIC; reduce and broadcast pipelined at once (NCCL's trees)";
  return s;
}

Schedule Tree(CollectiveOp op, int64_t n, const std::optional<NodeLayout>& layout) {
  if (op == CollectiveOp::kAllReduce && layout) return NodeTree(*layout, n);
  Schedule s{op, Algorithm::kTree, n, {}, ""};
  const int64_t depth = std::max<int64_t>(1, TreeDepth(n));
  if (op == CollectiveOp::kAllReduce) {
    Step up{{}, depth, true}, down{{}, depth, true};
    AddTreeEdges(n, false, true, 0.5, up.flows);
    AddTreeEdges(n, true, true, 0.5, up.flows);
    AddTreeEdges(n, false, false, 0.5, down.flows);
    AddTreeEdges(n, true, false, 0.5, down.flows);
    s.steps = {up, down};
    s.description = "double binary tree (depth " + std::to_string(depth) + "), reduce then broadcast, pipelined in chunks";
  } else {
    Step down{{}, depth, true};
    AddTreeEdges(n, false, false, 1.0, down.flows);
    s.steps = {down};
    s.description = "binary tree from member 0 (depth " + std::to_string(depth) + "), pipelined in chunks";
  }
  return s;
}

}  // namespace

void CheckScheduleSize(CollectiveOp op, int64_t group_size, const std::string& where) {
  if (op != CollectiveOp::kAllToAll || group_size * (group_size - 1) <= kMaxScheduleFlows) return;
  int64_t largest = 2;
  while ((largest + 1) * largest <= kMaxScheduleFlows) ++largest;
  throw InputError(where,
                   "an all-to-all over " + std::to_string(group_size) + " devices is " + std::to_string(group_size * (group_size - 1)) +
                       " flows (every pair), more than the " + std::to_string(kMaxScheduleFlows) + " one collective may hold",
                   "all-to-all groups of at most " + std::to_string(largest) + " devices",
                   "use a smaller group (expert parallelism is rarely wider than 256)");
}

std::vector<Algorithm> AlgorithmsFor(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return {Algorithm::kRing, Algorithm::kBidirectionalRing, Algorithm::kTorus, Algorithm::kHierarchical, Algorithm::kTree,
              Algorithm::kNvls, Algorithm::kSharp};
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
      return {Algorithm::kRing, Algorithm::kBidirectionalRing, Algorithm::kTorus, Algorithm::kHierarchical};
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kPermute: return {Algorithm::kDirect};
    case CollectiveOp::kBroadcast: return {Algorithm::kRing, Algorithm::kTree};
  }
  return {};
}

std::vector<Algorithm> AutoAlgorithmsFor(CollectiveOp op) {
  std::vector<Algorithm> algorithms = AlgorithmsFor(op);
  // NCCL (src/graph/tuning.cc at NVIDIA/nccl@b6475625, ncclTopoTuneModel) runs all-reduce as a
  // ring, a tree, NVLS or CollNet (SHARP), all-gather and reduce-scatter as a ring, NVLS or
  // CollNet: never the two-level ring `hierarchical` builds, whose fewer rounds would hide a
  // large group's ring latency that NCCL pays.
  std::erase(algorithms, Algorithm::kHierarchical);
  return algorithms;
}

namespace {

// The fixed cost of one call of `algorithm` on a GPU cluster, beyond its rounds' route latencies:
// NCCL's own latency model (src/graph/tuning.cc at NVIDIA/nccl@b6475625, `baseLat` in us): ring
// 6.6 and tree 6.8 (the LL protocol, which NCCL picks for small buffers; the hierarchical
// algorithm's phases and the broadcast chain are rings); NVLS 23 (its whole latency there, one
// NVLink step). None where NCCL's model puts none (CollNet/SHARP, point-to-point), nor on TPU
// tori or CPU hosts, where no source gives one (a calibrated host cluster's measured curves
// carry theirs).
double LaunchSeconds(const Cluster& cluster, Algorithm algorithm) {
  if (cluster.spec().topology.kind != TopologyKind::kSwitched) return 0;
  switch (algorithm) {
    case Algorithm::kRing:
    case Algorithm::kBidirectionalRing:
    case Algorithm::kHierarchical: return 6.6e-6;
    case Algorithm::kTree: return 6.8e-6;
    case Algorithm::kNvls: return 23e-6;
    default: return 0;
  }
}

// The compute units NCCL's kernel for `op` by `algorithm` holds on each device of `group` (one
// thread block per channel): the chip's count for a communicator inside one node or across nodes
// (NCCL sizes its channels by the communicator's NVLink and network bandwidth), NVLS's own; the
// all-to-all spreads over its point-to-point channels, the collective channels rounded up to a
// power of two (src/graph/paths.cc at NVIDIA/nccl@5067397c); a permute sends to one peer on that
// peer's channels: across the network one per 14 GB/s of the NIC (paths.cc ncclTopoGetNchannels,
// NCCL_P2P_PER_CHANNEL_NET_BW: 4 for 400 Gb/s), inside a node all the point-to-point channels for
// a large send (enqueue.cc doubles a peer's channels while each carries more than its share).
// At most all but one of the chip's units. None off switched (GPU) clusters.
int64_t KernelUnits(const Cluster& cluster, const DeviceGroup& group, CollectiveOp op, Algorithm algorithm) {
  const ClusterSpec& spec = cluster.spec();
  if (spec.topology.kind != TopologyKind::kSwitched) return 0;
  const CollectiveUnits& units = spec.chip.collective_units;
  if (algorithm == Algorithm::kNvls) return units.nvls;
  const int64_t first = NodeOf(spec.topology, group.devices.front());
  const bool across = std::any_of(group.devices.begin(), group.devices.end(), [&](int64_t d) { return NodeOf(spec.topology, d) != first; });
  const int64_t channels = across ? units.across_nodes : units.in_node;
  if (algorithm != Algorithm::kDirect || channels <= 0) return channels;
  const int64_t p2p = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(channels)));
  if (op != CollectiveOp::kPermute || !across) return p2p;
  const auto nic = spec.links.find("infiniband");
  const double nic_bytes_per_s = nic == spec.links.end() ? 0 : nic->second.bandwidth_bytes_per_s * static_cast<double>(nic->second.links_per_device);
  return std::min<int64_t>(p2p, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(nic_bytes_per_s / 14e9))));
}

std::optional<Schedule> BuildFlows(const Cluster& cluster, const DeviceGroup& group, CollectiveOp op, Algorithm algorithm,
                                   std::string* why_not, const TokenRouting& routing);

}  // namespace

std::optional<Schedule> BuildSchedule(const Cluster& cluster, const DeviceGroup& group, CollectiveOp op, Algorithm algorithm,
                                      std::string* why_not, const TokenRouting& routing) {
  std::optional<Schedule> schedule = BuildFlows(cluster, group, op, algorithm, why_not, routing);
  if (!schedule) return schedule;
  schedule->launch_s = LaunchSeconds(cluster, algorithm);
  schedule->units = std::min(KernelUnits(cluster, group, op, algorithm), std::max<int64_t>(0, cluster.spec().chip.compute_units - 1));
  if (schedule->launch_s > 0) schedule->description += "; " + FormatSeconds(schedule->launch_s) + " a call first (NCCL's base latency)";
  if (schedule->units > 0) schedule->description += "; its kernel holds " + std::to_string(schedule->units) + " SMs a device (NCCL's thread blocks)";
  return schedule;
}

namespace {

std::optional<Schedule> BuildFlows(const Cluster& cluster, const DeviceGroup& group, CollectiveOp op, Algorithm algorithm,
                                   std::string* why_not, const TokenRouting& routing) {
  SHARDSIM_CHECK(!group.devices.empty(), "empty group");
  const std::vector<Algorithm> valid = AlgorithmsFor(op);
  if (std::find(valid.begin(), valid.end(), algorithm) == valid.end()) {
    std::string names;
    for (Algorithm a : valid) names += (names.empty() ? "" : ", ") + ToString(a);
    *why_not = ToString(op) + " runs with " + names;
    return std::nullopt;
  }
  const int64_t n = static_cast<int64_t>(group.devices.size());
  switch (algorithm) {
    case Algorithm::kRing:
      if (op == CollectiveOp::kBroadcast) {
        Schedule s{op, algorithm, n, {}, "chain from member 0, pipelined in chunks"};
        Step chain{{}, std::max<int64_t>(1, n - 1), true};
        for (int64_t i = 0; i + 1 < n; ++i) chain.flows.push_back({static_cast<int32_t>(i), static_cast<int32_t>(i + 1), 1.0});
        s.steps.push_back(chain);
        return s;
      }
      [[fallthrough]];
    case Algorithm::kBidirectionalRing: {
      std::string unused;  // no channels where the group does not span nodes evenly: a ring in group order
      return Ring(op, n, algorithm == Algorithm::kBidirectionalRing, LayOutByNode(cluster, group, &unused));
    }
    case Algorithm::kTorus: {
      auto box = FindBox(cluster, group, why_not);
      if (!box) return std::nullopt;
      return Torus(op, *box);
    }
    case Algorithm::kHierarchical: return Hierarchical(cluster, group, op, false, why_not);
    case Algorithm::kSharp: return Hierarchical(cluster, group, op, true, why_not);
    case Algorithm::kTree: {
      std::string unused;  // no channels where the group does not span nodes evenly: a tree in group order
      return Tree(op, n, LayOutByNode(cluster, group, &unused));
    }
    case Algorithm::kNvls: {
      const TopologySpec& t = cluster.spec().topology;
      if (t.kind != TopologyKind::kSwitched || !t.nvls) {
        *why_not = "this cluster's NVSwitch has no in-switch reduction";
        return std::nullopt;
      }
      const int64_t node = group.devices[0] / t.devices_per_node;
      for (int64_t d : group.devices) {
        if (d / t.devices_per_node != node) {
          *why_not = "the group spans several NVSwitch nodes";
          return std::nullopt;
        }
      }
      // NVLS: each GPU reduces its 1/N slice in the switch (the switch reads every GPU's copy of
      // it: V out of each GPU in all, V/N back in) and multicasts the reduced slice (V/N out, V in
      // from all slices): V (N+1)/N each way over every GPU's NVLinks, so busbw = 2(N-1)/(N+1)
      // x the link bandwidth (nccl-tests). The flows i -> i+1 through the switch load exactly that.
      // Measured, the switch's multimem reductions run below the links' ring rate: 476-480 GB/s
      // busbw on 8 H100s (NVIDIA/nccl-tests#212, #290), where the rate rings reach (360 GB/s,
      // about 370 published in #212) gives 560: the flows carry 560/480 of those bytes.
      constexpr double kNvlsRateShare = 480.0 / 560.0;
      Schedule s{op, algorithm, n, {}, "in-switch reduction and multicast (NVLS) over " + std::to_string(n) + " GPUs"};
      Step step;
      AddRing(Iota(n), +1, static_cast<double>(n + 1) / static_cast<double>(n) / kNvlsRateShare, step.flows);
      s.steps.push_back(step);
      return s;
    }
    case Algorithm::kDirect: {
      if (op == CollectiveOp::kAllToAll && routing.deduplicated()) return RoutedAllToAll(cluster, group, routing, why_not);
      Schedule s{op, algorithm, n, {}, ""};
      Step step;
      if (op == CollectiveOp::kAllToAll) {
        if (n * (n - 1) > kMaxScheduleFlows) {
          *why_not = "an all-to-all over " + std::to_string(n) + " devices has more flows than one collective may hold";
          return std::nullopt;
        }
        for (int32_t i = 0; i < n; ++i) {
          for (int32_t j = 0; j < n; ++j) {
            if (i != j) step.flows.push_back({i, j, 1.0 / static_cast<double>(n)});
          }
        }
        s.description = "every pair at once (" + std::to_string(n * (n - 1)) + " flows)";
      } else {
        AddRing(Iota(n), +1, 1.0, step.flows);
        s.description = "each member sends to the next one";
      }
      s.steps.push_back(step);
      return s;
    }
    case Algorithm::kAuto: break;
  }
  SHARDSIM_CHECK(false, "BuildSchedule needs a concrete algorithm");
  return std::nullopt;
}

}  // namespace

}  // namespace shardsim::sim
