// Placing a logical mesh on physical devices, and saying which links each mesh axis uses.
// Rank r of the mesh runs on device r: the innermost axis of mesh_order varies fastest over
// ranks and the device order puts the fastest links first (torus dimension 0, a node's GPUs), so
// the innermost axis lands on the fastest links.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/mesh.h"
#include "topologies/cluster.h"

namespace shardsim::topologies {

// REQUIRES: mesh.size() == cluster.num_devices().
inline int64_t DeviceOfRank(const LogicalMesh& mesh, int64_t rank) {
  (void)mesh;
  return rank;
}

// What the group of rank 0 along one axis travels over, neighbour to neighbour.
struct AxisLinks {
  std::string axis;
  int64_t size = 1;
  std::vector<std::string> path;  // the longest neighbour route, as "class (label)" per hop
  int64_t max_neighbour_hops = 0;
  int64_t closing_hops = 0;       // hops from the last member back to the first (a ring's last step)
  double bottleneck_bytes_per_s = 0;  // slowest link on the neighbour and closing routes, one way
  int64_t pairs_checked = 0;          // neighbour pairs routed (all, or an even sample of them)
};

// One entry per axis of size > 1, innermost first. Routes at most `max_pairs` neighbour pairs
// per axis, evenly spread over the group (regular topologies repeat themselves).
std::vector<AxisLinks> DescribeAxes(const Cluster& cluster, const LogicalMesh& mesh, int64_t max_pairs = 64);

}  // namespace shardsim::topologies
