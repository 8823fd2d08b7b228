// The collective operations, named once for every layer: the step program emits them, the
// simulators cost them, the runtime issues them.
#pragma once

#include <string>
#include <vector>

namespace shardsim {

enum class CollectiveOp { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kBroadcast, kPermute };

// "all-gather", "reduce-scatter", "all-reduce", "all-to-all", "broadcast", "permute".
std::vector<std::string> CollectiveOpNames();
std::string ToString(CollectiveOp op);

}  // namespace shardsim
