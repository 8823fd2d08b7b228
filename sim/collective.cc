#include "sim/collective.h"

#include "core/error.h"
#include "core/suggest.h"

namespace shardsim::sim {
namespace {

template <typename Enum>
Enum ParseName(const std::string& name, const std::string& where, const std::vector<std::string>& names, const char* what) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  const std::string s = DidYouMean(name, names);
  throw InputError(where, std::string("unknown ") + what + " '" + name + "'" + (s.empty() ? "" : "; " + s), JoinNames(names));
}

}  // namespace

std::vector<std::string> AlgorithmNames() {
  return {"auto", "ring", "bidirectional-ring", "torus", "hierarchical", "tree", "nvls", "sharp", "direct"};
}

std::string ToString(Algorithm algorithm) { return AlgorithmNames()[static_cast<size_t>(algorithm)]; }

CollectiveOp ParseCollectiveOp(const std::string& name, const std::string& where) {
  return ParseName<CollectiveOp>(name, where, CollectiveOpNames(), "collective");
}

Algorithm ParseAlgorithm(const std::string& name, const std::string& where) {
  return ParseName<Algorithm>(name, where, AlgorithmNames(), "algorithm");
}

double BusBandwidthFactor(CollectiveOp op, int64_t n) {
  const double members = static_cast<double>(n);
  switch (op) {
    case CollectiveOp::kAllReduce: return 2.0 * (members - 1) / members;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll: return (members - 1) / members;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kPermute: return 1.0;
  }
  return 1.0;
}

}  // namespace shardsim::sim
