#include "topologies/mesh_mapping.h"

#include <algorithm>
#include <limits>
#include <random>
#include <set>

#include "core/error.h"

namespace shardsim::topologies {
namespace {

// Pair indices to route: all when there are at most `max_pairs`, else the first half of the
// budget in order and the rest drawn with a fixed seed (so the output is deterministic), which
// catches boundaries (node, leaf, slice) at any period.
std::vector<int64_t> SamplePairs(int64_t pairs, int64_t max_pairs) {
  std::vector<int64_t> chosen;
  if (pairs <= max_pairs) {
    for (int64_t p = 0; p < pairs; ++p) chosen.push_back(p);
    return chosen;
  }
  for (int64_t p = 0; p < max_pairs / 2; ++p) chosen.push_back(p);
  std::mt19937_64 random(static_cast<uint64_t>(pairs));
  std::uniform_int_distribution<int64_t> pick(max_pairs / 2, pairs - 1);
  std::set<int64_t> drawn;
  while (static_cast<int64_t>(drawn.size()) < max_pairs - max_pairs / 2) drawn.insert(pick(random));
  chosen.insert(chosen.end(), drawn.begin(), drawn.end());
  return chosen;
}

}  // namespace

std::vector<AxisLinks> DescribeAxes(const Cluster& cluster, const LogicalMesh& mesh, int64_t max_pairs) {
  SHARDSIM_CHECK(mesh.size() == cluster.num_devices(), "mesh and cluster sizes differ");
  std::vector<std::string> axes = MeshAxisNames();
  std::sort(axes.begin(), axes.end(), [&](const std::string& a, const std::string& b) { return mesh.Stride(a) < mesh.Stride(b); });
  std::vector<AxisLinks> out;
  for (const std::string& axis : axes) {
    if (mesh.AxisSize(axis) == 1) continue;
    AxisLinks info;
    info.axis = axis;
    info.size = mesh.AxisSize(axis);
    info.bottleneck_bytes_per_s = std::numeric_limits<double>::infinity();
    const std::vector<int64_t> group = mesh.Group(0, {axis});
    std::vector<int64_t> longest;
    for (const int64_t p : SamplePairs(static_cast<int64_t>(group.size()) - 1, max_pairs)) {
      const size_t i = static_cast<size_t>(p);
      ++info.pairs_checked;
      const std::vector<int64_t> route = cluster.Route(DeviceOfRank(mesh, group[i]), DeviceOfRank(mesh, group[i + 1]));
      if (route.size() > longest.size()) longest = route;
      for (int64_t id : route) {
        info.bottleneck_bytes_per_s = std::min(info.bottleneck_bytes_per_s, cluster.links()[static_cast<size_t>(id)].bandwidth_bytes_per_s);
      }
    }
    info.max_neighbour_hops = static_cast<int64_t>(longest.size());
    const std::vector<int64_t> closing = cluster.Route(DeviceOfRank(mesh, group.back()), DeviceOfRank(mesh, group.front()));
    info.closing_hops = static_cast<int64_t>(closing.size());
    for (int64_t id : closing) {
      info.bottleneck_bytes_per_s = std::min(info.bottleneck_bytes_per_s, cluster.links()[static_cast<size_t>(id)].bandwidth_bytes_per_s);
    }
    for (int64_t id : longest) {
      const Link& link = cluster.links()[static_cast<size_t>(id)];
      const std::string label = link.name.substr(link.name.rfind(' ') + 1);
      info.path.push_back(link.link_class + (label == link.link_class ? "" : " (" + label + ")"));
    }
    out.push_back(info);
  }
  return out;
}

}  // namespace shardsim::topologies
