#include "core/mesh.h"

#include <algorithm>

#include "core/error.h"

namespace shardsim {

LogicalMesh::LogicalMesh(const MeshShape& shape, std::vector<std::string> order)
    : shape_(shape), order_(std::move(order)), size_(shape.Product()) {
  SHARDSIM_CHECK(order_.size() == MeshAxisNames().size(), "mesh_order must list every axis");
  SHARDSIM_CHECK(size_ > 0, "mesh size must be positive");
}

int64_t LogicalMesh::AxisSize(std::string_view axis) const { return shape_.Size(axis); }

int64_t LogicalMesh::Stride(std::string_view axis) const {
  int64_t stride = 1;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    if (*it == axis) return stride;
    stride *= shape_.Size(*it);
  }
  SHARDSIM_CHECK(false, "axis not in mesh_order: " + std::string(axis));
  return 0;
}

int64_t LogicalMesh::Coordinate(int64_t rank, std::string_view axis) const {
  SHARDSIM_CHECK(rank >= 0 && rank < size_, "rank out of range");
  return (rank / Stride(axis)) % shape_.Size(axis);
}

std::vector<int64_t> LogicalMesh::Group(int64_t rank, const std::vector<std::string>& axes) const {
  for (size_t i = 0; i < axes.size(); ++i) {
    for (size_t j = i + 1; j < axes.size(); ++j) SHARDSIM_CHECK(axes[i] != axes[j], "axis listed twice: " + axes[i]);
  }
  int64_t base = rank;
  for (const std::string& axis : axes) base -= Coordinate(rank, axis) * Stride(axis);
  std::vector<int64_t> group = {base};
  for (const std::string& axis : axes) {
    std::vector<int64_t> next;
    next.reserve(group.size() * static_cast<size_t>(shape_.Size(axis)));
    for (int64_t member : group) {
      for (int64_t i = 0; i < shape_.Size(axis); ++i) next.push_back(member + i * Stride(axis));
    }
    group = std::move(next);
  }
  return group;
}

std::vector<std::vector<int64_t>> LogicalMesh::Groups(const std::vector<std::string>& axes) const {
  std::vector<std::vector<int64_t>> groups;
  std::vector<bool> seen(static_cast<size_t>(size_), false);
  for (int64_t rank = 0; rank < size_; ++rank) {
    if (seen[static_cast<size_t>(rank)]) continue;
    groups.push_back(Group(rank, axes));
    for (int64_t member : groups.back()) seen[static_cast<size_t>(member)] = true;
  }
  return groups;
}

}  // namespace shardsim
