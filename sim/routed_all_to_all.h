// The expert all-to-all of a dispatcher that sends each token once per destination node and once
// per destination device rather than once per routed copy (PlanSpec::ep_dispatcher deepep):
// DeepSeek-V3 section 3.2.2 and DeepEP's normal kernels send a token over InfiniBand once to each
// node holding any of its experts, to the GPU there with the sender's own position in its node,
// which forwards it over NVLink once to each GPU of that node holding any of them; within the
// sender's node it goes over NVLink once to each such GPU. The combine runs the same paths back.
//
// Routing is taken as balanced (the traffic's expectation): a token's top_k experts are a
// uniformly drawn subset of its group_top_k groups' experts, those groups a uniformly drawn subset
// of all (no group limit: one group). A router that favours groups it then fills several experts
// of sends fewer rows than this; the expectation is of rows, not of the slowest rank's. Under
// round-robin routing (TokenRouting::round_robin) a token's experts are k neighbouring ones, on a
// few neighbouring GPUs, mostly of one node: each source sends tokens of every position, so the
// same per-destination expectations hold.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/collective_op.h"
#include "sim/collective_schedule.h"

namespace shardsim::sim {

// The probability that none of a token's experts is among `experts` (ids below routing.experts,
// each once).
double MissProbability(const TokenRouting& routing, const std::vector<int64_t>& experts);

// The all-to-all's flows over `group` (its members hold routing.experts / members experts each,
// in member order), as fractions of the nccl-tests size of the routed copies each member sends:
// one step, every flow at once (DeepEP overlaps the network and NVLink legs in chunks). Where a
// node holds fewer of the group's members than the sender's, the sender's position wraps around
// the ones it holds. Nullopt with `*why_not` where the group has no nodes to forward in (a torus)
// or the experts do not spread evenly over it.
std::optional<Schedule> RoutedAllToAll(const topologies::Cluster& cluster, const DeviceGroup& group, const TokenRouting& routing,
                                       std::string* why_not);

// Rows per token that leave a member's node over the network, deduplicated and as every routed
// copy would (top_k x the share of the group's members in other nodes), for the estimate's report.
struct NetworkRows {
  double deduplicated = 0, copies = 0;
  int64_t nodes = 0, per_node = 0;  // the group's nodes and the most of its members one holds
};
// Nullopt where RoutedAllToAll is.
std::optional<NetworkRows> NetworkRowsPerToken(const topologies::Cluster& cluster, const DeviceGroup& group, const TokenRouting& routing);

}  // namespace shardsim::sim
