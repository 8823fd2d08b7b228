#include "core/collective_op.h"

namespace shardsim {

std::vector<std::string> CollectiveOpNames() {
  return {"all-gather", "reduce-scatter", "all-reduce", "all-to-all", "broadcast", "permute"};
}

std::string ToString(CollectiveOp op) { return CollectiveOpNames()[static_cast<size_t>(op)]; }

}  // namespace shardsim
