#include "sim/routed_all_to_all.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

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

double LogChoose(int64_t n, int64_t r) {
  return std::lgamma(static_cast<double>(n + 1)) - std::lgamma(static_cast<double>(r + 1)) - std::lgamma(static_cast<double>(n - r + 1));
}

}  // namespace

double MissProbability(const TokenRouting& r, const std::vector<int64_t>& experts) {
  SHARDSIM_CHECK(r.experts > 0 && r.top_k > 0 && r.top_k <= r.experts, "routing without experts");
  if (r.round_robin) {
    // Token t's experts start at t·k mod E: over E / gcd(k, E) tokens the starts run through the
    // multiples of gcd(k, E) once each, so the share of those windows that avoid `experts`.
    const int64_t step = std::gcd(r.top_k, r.experts), starts = r.experts / step;
    std::vector<char> held(static_cast<size_t>(r.experts), 0);
    for (int64_t e : experts) held[static_cast<size_t>(e)] = 1;
    int64_t misses = 0;
    for (int64_t s = 0; s < starts; ++s) {
      bool hit = false;
      for (int64_t j = 0; j < r.top_k && !hit; ++j) hit = held[static_cast<size_t>((s * step + j) % r.experts)] != 0;
      misses += hit ? 0 : 1;
    }
    return static_cast<double>(misses) / static_cast<double>(starts);
  }
  const bool limited = r.groups > 1;
  const int64_t groups = limited ? r.groups : 1, chosen = limited ? r.group_top_k : 1;
  const int64_t per_group = r.experts / groups, pool = chosen * per_group;
  // How many of `experts` each group holds; the groups holding none only fill the choice.
  std::map<int64_t, int64_t> held;
  for (int64_t e : experts) ++held[e / per_group];
  const int64_t holding = static_cast<int64_t>(held.size()), empty = groups - holding;
  // q[c][s]: among uniform choices of c of the holding groups seen so far, the share that holds s
  // of the experts (a probability, so that thousands of groups neither overflow nor round off).
  const int64_t total = static_cast<int64_t>(experts.size()), most = std::min(chosen, holding);
  std::vector<std::vector<double>> q(static_cast<size_t>(most + 1), std::vector<double>(static_cast<size_t>(total + 1), 0));
  q[0][0] = 1;
  int64_t seen = 0;
  for (const auto& [group, count] : held) {
    ++seen;
    const double h = static_cast<double>(seen);
    for (int64_t c = std::min(most, seen); c >= 1; --c) {
      auto& row = q[static_cast<size_t>(c)];
      const auto& below = q[static_cast<size_t>(c - 1)];
      for (int64_t s = total; s >= 0; --s) {
        // This group left out (c of the seen - 1 others), or taken (c - 1 of them).
        const double out = c < seen ? row[static_cast<size_t>(s)] * (h - static_cast<double>(c)) / h : 0;
        const double in = s >= count ? below[static_cast<size_t>(s - count)] * static_cast<double>(c) / h : 0;
        row[static_cast<size_t>(s)] = out + in;
      }
    }
  }
  double miss = 0;
  for (int64_t c = 0; c <= most; ++c) {
    if (chosen - c > empty) continue;
    // The chance that c of the chosen groups are holding ones (hypergeometric), in logs.
    const double p_c = std::exp(LogChoose(holding, c) + LogChoose(empty, chosen - c) - LogChoose(groups, chosen));
    for (int64_t s = 0; s <= total; ++s) {
      const double w = q[static_cast<size_t>(c)][static_cast<size_t>(s)];
      if (w != 0) miss += p_c * w * SubsetRatio(pool - s, pool, r.top_k);
    }
  }
  SHARDSIM_CHECK(std::isfinite(miss) && miss >= -1e-12 && miss <= 1 + 1e-12, "routing miss probability out of range");
  return std::clamp(miss, 0.0, 1.0);
}

std::optional<Schedule> RoutedAllToAll(const topologies::Cluster& cluster, const DeviceGroup& group, const TokenRouting& routing,
                                       std::string* why_not) {
  const int64_t n = static_cast<int64_t>(group.devices.size());
  if (routing.experts % n != 0) {
    *why_not = std::to_string(routing.experts) + " experts do not spread evenly over " + std::to_string(n) + " members";
    return std::nullopt;
  }
  // The group's members by node, in member order, and each member's position in its node.
  const TopologySpec& t = cluster.spec().topology;
  std::map<int64_t, std::vector<int32_t>> by_node;
  std::vector<size_t> position(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int64_t node = NodeOf(t, group.devices[static_cast<size_t>(i)]);
    if (node < 0) {
      *why_not = "a deduplicating expert dispatcher (ep_dispatcher deepep) forwards rows within NVLink nodes, which a torus has none of";
      return std::nullopt;
    }
    position[static_cast<size_t>(i)] = by_node[node].size();
    by_node[node].push_back(i);
  }
  const int64_t per_member = routing.experts / n;
  auto experts_of = [&](const std::vector<int32_t>& members) {
    std::vector<int64_t> ids;
    for (int32_t m : members) {
      for (int64_t e = 0; e < per_member; ++e) ids.push_back(m * per_member + e);
    }
    return ids;
  };
  const double k = static_cast<double>(routing.top_k);
  std::vector<double> member_hit(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) member_hit[static_cast<size_t>(i)] = 1 - MissProbability(routing, experts_of({i}));
  std::map<int64_t, double> node_hit;
  for (const auto& [node, members] : by_node) node_hit[node] = 1 - MissProbability(routing, experts_of(members));
  // Rows per routed copy a member sends, by (source, destination), summed over the paths.
  std::map<std::pair<int32_t, int32_t>, double> load;
  auto to_members = [&](int32_t from, const std::vector<int32_t>& members) {
    for (int32_t dst : members) {
      if (dst != from) load[{from, dst}] += member_hit[static_cast<size_t>(dst)] / k;
    }
  };
  for (const auto& [node, members] : by_node) {
    for (int32_t src : members) {
      // Within its node: once to each GPU holding any of the token's experts.
      to_members(src, members);
      // To each other node: once over the network to the member with its position there (the
      // position wrapped where that node holds fewer of the group), which forwards it on.
      for (const auto& [other, receivers] : by_node) {
        if (other == node) continue;
        const int32_t peer = receivers[position[static_cast<size_t>(src)] % receivers.size()];
        load[{src, peer}] += node_hit.at(other) / k;
        to_members(peer, receivers);
      }
    }
  }
  Schedule s{CollectiveOp::kAllToAll, Algorithm::kDirect, n, {}, ""};
  Step step;
  for (const auto& [pair, fraction] : load) {
    if (fraction > 0) step.flows.push_back({pair.first, pair.second, fraction});
  }
  s.steps.push_back(std::move(step));
  s.description = "each token once per destination node over the network and once per GPU within it (deepep): " + std::to_string(by_node.size()) +
                  " node(s)";
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
  const double n = static_cast<double>(group.devices.size()), k = static_cast<double>(routing.top_k);
  // Averaged over the members: each sends k copies per token, (n - its node's members) / n of
  // them to other nodes.
  for (const auto& [id, count] : members) {
    rows.copies += k * (n - static_cast<double>(count)) / n * static_cast<double>(count) / n;
    rows.per_node = std::max(rows.per_node, count);
  }
  for (const Flow& f : s->steps.front().flows) rows.deduplicated += node(f.src) != node(f.dst) ? f.fraction * k / n : 0;
  return rows;
}

}  // namespace shardsim::sim
