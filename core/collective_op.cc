#include "core/collective_op.h"

namespace shardsim {

std::vector<std::string> CollectiveOpNames() {
  return {"all-gather", "reduce-scatter", "all-reduce", "all-to-all", "broadcast", "permute"};
}

std::string ToString(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllGather: return "all-gather";
    case CollectiveOp::kReduceScatter: return "reduce-scatter";
    case CollectiveOp::kAllReduce: return "all-reduce";
    case CollectiveOp::kAllToAll: return "all-to-all";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kPermute: return "permute";
  }
  return "all-reduce";
}

}  // namespace shardsim
