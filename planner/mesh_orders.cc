#include "planner/mesh_orders.h"

#include <algorithm>

#include "core/mesh_axes.h"

namespace shardsim::planner {

std::vector<std::vector<std::string>> OtherOrders(const MeshShape& mesh) {
  const std::vector<std::string> base = DefaultMeshOrder();
  std::vector<size_t> slots;  // positions of the movable axes in the default order
  std::vector<std::string> axes;
  for (size_t i = 0; i < base.size(); ++i) {
    if (AxisFacts(base[i]).search_reorders && mesh.Size(base[i]) > 1) slots.push_back(i), axes.push_back(base[i]);
  }
  std::vector<std::vector<std::string>> arrangements;
  if (axes.size() <= 3) {
    std::vector<std::string> perm = axes;
    std::sort(perm.begin(), perm.end());
    do {
      if (perm != axes) arrangements.push_back(perm);
    } while (std::next_permutation(perm.begin(), perm.end()));
  } else {
    for (size_t i = 0; i < axes.size(); ++i) {
      std::vector<std::string> inner = axes, outer = axes;
      inner.erase(inner.begin() + static_cast<std::ptrdiff_t>(i));
      inner.push_back(axes[i]);
      outer.erase(outer.begin() + static_cast<std::ptrdiff_t>(i));
      outer.insert(outer.begin(), axes[i]);
      for (auto* a : {&inner, &outer}) {
        if (*a != axes && std::find(arrangements.begin(), arrangements.end(), *a) == arrangements.end()) arrangements.push_back(*a);
      }
    }
  }
  std::vector<std::vector<std::string>> orders;
  for (const auto& arrangement : arrangements) {
    std::vector<std::string> order = base;
    for (size_t k = 0; k < slots.size(); ++k) order[slots[k]] = arrangement[k];
    orders.push_back(order);
  }
  return orders;
}

}  // namespace shardsim::planner
