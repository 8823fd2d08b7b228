#include "sim/routed_all_to_all.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace shardsim::sim {
namespace {

// C(a, k) / C(b, k) for a <= b: the chance that a uniform k-subset of b items avoids b - a given ones.
double SubsetRatio(int64_t a, int64_t b, int64_t k) {
  if (a < k) return 0;
  double ratio = 1;
  for (int64_t i = 0; i < k; ++i) ratio *= static_cast<double>(a - i) / static_cast<double>(b - i);
  return ratio;
}

double Choose(int64_t n, int64_t r) {
  if (r < 0 || r > n) return 0;
  double c = 1;
  for (int64_t i = 0; i < r; ++i) c = c * static_cast<double>(n - i) / static_cast<double>(i + 1);
  return c;
}

// Where a member sits: its node (an NVLink domain, or a host of a local cluster), or -1 on a
// fabric without nodes.
int64_t NodeOf(const TopologySpec& t, int64_t device) {
  switch (t.kind) {
    case TopologyKind::kSwitched: return device / t.devices_per_node;
    case TopologyKind::kLocal: return device / (t.local_devices / t.local_hosts);
    case TopologyKind::kTorus: return -1;
  }
  return -1;
}

}  // namespace

double MissProbability(const TokenRouting& r, const std::vector<int64_t>& experts) {
  SHARDSIM_CHECK(r.experts > 0 && r.top_k > 0, "routing without experts");
  const bool limited = r.groups > 1;
  const int64_t groups = limited ? r.groups : 1, chosen = limited ? r.group_top_k : 1;
  const int64_t per_group = r.experts / groups, pool = chosen * per_group;
  // How many of `experts` each group holds; the groups holding none only fill the choice.
  std::map<int64_t, int64_t> held;
  for (int64_t e : experts) ++held[e / per_group];
  const int64_t empty = groups - static_cast<int64_t>(held.size());
  // ways[c][s]: choices of c of the holding groups that hold s of the experts between them.
  const int64_t total = static_cast<int64_t>(experts.size());
  std::vector<std::vector<double>> ways(static_cast<size_t>(chosen + 1), std::vector<double>(static_cast<size_t>(total + 1), 0));
  ways[0][0] = 1;
  for (const auto& [group, count] : held) {
    for (int64_t c = chosen; c >= 1; --c) {
      for (int64_t s = total; s >= count; --s) ways[static_cast<size_t>(c)][static_cast<size_t>(s)] += ways[static_cast<size_t>(c - 1)][static_cast<size_t>(s - count)];
    }
  }
  double miss = 0;
  for (int64_t c = 0; c <= chosen; ++c) {
    const double fill = Choose(empty, chosen - c);
    if (fill == 0) continue;
    for (int64_t s = 0; s <= total; ++s) {
      const double w = ways[static_cast<size_t>(c)][static_cast<size_t>(s)];
      if (w != 0) miss += w * fill * SubsetRatio(pool - s, pool, r.top_k);
    }
  }
  return miss / Choose(groups, chosen);
}

std::optional<Schedule> RoutedAllToAll(const topologies::Cluster& cluster, const DeviceGroup& group, const TokenRouting& routing,
                                       std::string* why_not) {
  const int64_t n = static_cast<int64_t>(group.devices.size());
  if (routing.experts % n != 0) {
    *why_not = std::to_string(routing.experts) + " experts do not spread evenly over " + std::to_string(n) + " members";
    return std::nullopt;
  }
  // The group's members by node, in member order.
  std::map<int64_t, std::vector<int32_t>> by_node;
  for (int32_t i = 0; i < n; ++i) {
    const int64_t node = NodeOf(cluster.spec().topology, group.devices[static_cast<size_t>(i)]);
    if (node < 0) {
      *why_not = "a deduplicating expert dispatcher (ep_dispatcher deepep) forwards rows within NVLink nodes, which a torus has none of";
      return std::nullopt;
    }
    by_node[node].push_back(i);
  }
  const size_t per_node = by_node.begin()->second.size();
  for (const auto& [node, members] : by_node) {
    if (members.size() != per_node) {
      *why_not = "the group's nodes hold unequal numbers of its members (" + std::to_string(per_node) + " and " + std::to_string(members.size()) + ")";
      return std::nullopt;
    }
  }
  const int64_t per_member = routing.experts / n;
  auto experts_of = [&](const std::vector<int32_t>& members) {
    std::vector<int64_t> ids;
    for (int32_t m : members) {
      for (int64_t e = 0; e < per_member; ++e) ids.push_back(m * per_member + e);
    }
    return ids;
  };
  const double k = static_cast<double>(routing.top_k), nodes = static_cast<double>(by_node.size());
  Schedule s{CollectiveOp::kAllToAll, Algorithm::kDirect, n, {}, ""};
  Step step;
  for (const auto& [node, members] : by_node) {
    // Within the node: each member's own tokens and those it forwards from its peers in the other
    // nodes (the same position), once per destination GPU.
    for (int32_t dst : members) {
      const double hit = 1 - MissProbability(routing, experts_of({dst}));
      for (int32_t src : members) {
        if (src != dst && hit > 0) step.flows.push_back({src, dst, nodes * hit / k});
      }
    }
    // Over the network: once per token to this node, from each member of the other nodes to its
    // peer here.
    const double node_hit = 1 - MissProbability(routing, experts_of(members));
    if (node_hit <= 0) continue;
    for (const auto& [other, senders] : by_node) {
      if (other == node) continue;
      for (size_t pos = 0; pos < per_node; ++pos) step.flows.push_back({senders[pos], members[pos], node_hit / k});
    }
  }
  s.steps.push_back(std::move(step));
  s.description = "each token once per destination node over the network and once per GPU within it (deepep): " + std::to_string(by_node.size()) +
                  " node(s) of " + std::to_string(per_node);
  return s;
}

std::optional<NetworkRows> NetworkRowsPerToken(const topologies::Cluster& cluster, const DeviceGroup& group, const TokenRouting& routing) {
  std::string why_not;
  const std::optional<Schedule> s = RoutedAllToAll(cluster, group, routing, &why_not);
  if (!s) return std::nullopt;
  const TopologySpec& t = cluster.spec().topology;
  auto node = [&](int32_t member) { return NodeOf(t, group.devices[static_cast<size_t>(member)]); };
  std::map<int64_t, int64_t> members;
  for (int32_t i = 0; i < static_cast<int32_t>(group.devices.size()); ++i) ++members[node(i)];
  NetworkRows rows;
  rows.nodes = static_cast<int64_t>(members.size());
  rows.per_node = members.begin()->second;
  const double n = static_cast<double>(group.devices.size()), k = static_cast<double>(routing.top_k);
  for (const Flow& f : s->steps.front().flows) rows.deduplicated += node(f.src) != node(f.dst) ? f.fraction * k / n : 0;
  rows.copies = k * (n - static_cast<double>(rows.per_node)) / n;
  return rows;
}

}  // namespace shardsim::sim
