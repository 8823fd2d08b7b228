// The collective operations, named once for every layer: the step program emits them, the
// simulators cost them, the runtime issues them.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

namespace shardsim {

enum class CollectiveOp { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kBroadcast, kPermute };

// "all-gather", "reduce-scatter", "all-reduce", "all-to-all", "broadcast", "permute".
std::vector<std::string> CollectiveOpNames();
std::string ToString(CollectiveOp op);

// Which experts a token of a routed all-to-all (an MoE layer's dispatch and combine) picks, for a
// dispatcher that sends each token once per destination node and once per destination device
// instead of once per routed copy (PlanSpec::ep_dispatcher deepep): `experts` spread evenly, in
// order, over the group's members; `top_k` of them per token, from its best `group_top_k` of
// `groups` equal groups (0: no group limit). Empty (experts 0): every routed copy travels on its
// own, evenly to every member.
// `round_robin`: instead, token t of a sequence picks experts t·top_k ... t·top_k + top_k - 1
// (mod experts), the group limit aside (PlanSpec::expert_routing round-robin).
struct TokenRouting {
  int64_t experts = 0, top_k = 0, groups = 0, group_top_k = 0;
  bool round_robin = false;
  bool deduplicated() const { return experts > 0; }
  auto operator<=>(const TokenRouting&) const = default;
};

}  // namespace shardsim
