#include "core/mesh_axes.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace shardsim {
namespace {

// The table is indexed by MeshAxis, each name and default position appears once.
constexpr bool TableIsConsistent() {
  for (size_t i = 0; i < kMeshAxes.size(); ++i) {
    if (static_cast<size_t>(kMeshAxes[i].axis) != i) return false;
    if (kMeshAxes[i].default_order < 0 ||
        static_cast<size_t>(kMeshAxes[i].default_order) >= kMeshAxes.size())
      return false;
    for (size_t j = 0; j < i; ++j) {
      if (kMeshAxes[i].name == kMeshAxes[j].name ||
          kMeshAxes[i].default_order == kMeshAxes[j].default_order)
        return false;
    }
  }
  return true;
}
static_assert(
    TableIsConsistent(),
    "kMeshAxes: one row per MeshAxis in enum order, distinct names and default positions");

}  // namespace

const MeshAxisFacts* FindMeshAxis(std::string_view name) {
  for (const MeshAxisFacts& f : kMeshAxes) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const MeshAxisFacts& AxisFacts(std::string_view name) {
  const MeshAxisFacts* f = FindMeshAxis(name);
  SHARDSIM_CHECK(f != nullptr, "unknown mesh axis " + std::string(name));
  return *f;
}

bool ReplicatesParams(const MeshAxisFacts& axis, bool routed_experts) {
  switch (axis.params) {
    case ParamRole::kSplit:
    case ParamRole::kSharded:
      return false;
    case ParamRole::kReplicated:
      return true;
    case ParamRole::kReplicatedDense:
      return !routed_experts;
  }
  return false;
}

std::vector<int64_t> SearchedDegrees(MeshAxis axis, int64_t limit, int64_t layers) {
  const MeshAxisFacts& f = AxisFacts(axis);
  const int64_t top = f.search_max > 0 ? std::min(limit, f.search_max) : limit;
  std::vector<int64_t> degrees;
  switch (f.search_degrees) {
    case SearchDegrees::kRemainder:
      if (limit >= 1) degrees.push_back(limit);
      break;
    case SearchDegrees::kPowersOfTwo:
      for (int64_t d = 1; d <= top; d *= 2) degrees.push_back(d);
      break;
    case SearchDegrees::kPowersOfTwoOrLayerDivisors:
      // Powers of two too: stages then differ by a layer, as Llama 3 405B's 126 layers on 16.
      for (int64_t d = 1; d <= top; ++d) {
        if ((layers > 0 && layers % d == 0) || (d & (d - 1)) == 0) degrees.push_back(d);
      }
      break;
  }
  return degrees;
}

}  // namespace shardsim
