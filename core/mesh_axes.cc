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
      if (kMeshAxes[i].name == kMeshAxes[j].name || kMeshAxes[i].letter == kMeshAxes[j].letter ||
          kMeshAxes[i].default_order == kMeshAxes[j].default_order)
        return false;
    }
  }
  return true;
}
static_assert(
    TableIsConsistent(),
    "kMeshAxes: one row per MeshAxis in enum order, distinct names, letters and default positions");

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

std::vector<int64_t> SearchedDegrees(MeshAxis axis, int64_t left, int64_t bound) {
  const MeshAxisFacts& f = AxisFacts(axis);
  std::vector<int64_t> degrees;
  if (left < 1) return degrees;
  if (f.search_degrees == SearchDegrees::kRemainder) return {left};
  int64_t top = f.search_max > 0 ? std::min(left, f.search_max) : left;
  if (bound > 0) top = std::min(top, bound);
  for (int64_t d = 1; d <= top; ++d) {
    if (left % d == 0) degrees.push_back(d);
  }
  return degrees;
}

}  // namespace shardsim
