// Collectives: the operations, the algorithms that implement them, and the group of devices one
// runs over. Sizes follow nccl-tests: `bytes` is the all-reduce / broadcast buffer, the
// all-gather output, the reduce-scatter input, the all-to-all per-rank send buffer, and the
// bytes each rank sends in a permute.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/collective_op.h"
#include "topologies/cluster.h"

namespace shardsim::sim {

using shardsim::CollectiveOp;
using shardsim::CollectiveOpNames;
using shardsim::ToString;

enum class Algorithm {
  kAuto,               // the fastest applicable one of AutoAlgorithmsFor's (never kHierarchical)
  kRing,               // one ring in group order; across NVSwitch nodes NCCL's channel rings, one per NIC
  kBidirectionalRing,  // two rings in opposite directions, half the data each
  kTorus,              // a bidirectional ring per physical torus axis, axes in parallel phases
  kHierarchical,       // inside each NVSwitch node, then across nodes, then inside again (on request only)
  kTree,               // NCCL's double binary tree (broadcast: one binary tree), pipelined
  kNvls,               // in-switch reduction and multicast (NVLink SHARP), inside one node
  kSharp,              // hierarchical, with the across-node all-reduce done in the InfiniBand switches
  kDirect,             // every pair at once (all-to-all, permute)
};

std::string ToString(Algorithm algorithm);
std::vector<std::string> AlgorithmNames();  // includes "auto"
// Throw InputError naming `where` (with the closest name) for unknown names.
CollectiveOp ParseCollectiveOp(const std::string& name, const std::string& where);
Algorithm ParseAlgorithm(const std::string& name, const std::string& where);

// nccl-tests' bus bandwidth factor: busbw = algbw x factor (2(N-1)/N for all-reduce; (N-1)/N
// for all-gather, reduce-scatter and all-to-all; 1 for broadcast and permute).
double BusBandwidthFactor(CollectiveOp op, int64_t group_size);

// The devices of one group, in the order the group's ranks have.
struct DeviceGroup {
  std::vector<int64_t> devices;
};

}  // namespace shardsim::sim
