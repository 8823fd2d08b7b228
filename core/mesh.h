// The logical device mesh: named axes laid out over ranks, and the groups each collective runs
// over. The same rule serves the simulator (which devices talk) and the runtime (which MPI
// sub-communicator a rank joins).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/plan_spec.h"

namespace shardsim {

// Ranks are numbered with the innermost axis of `mesh_order` varying fastest. Worked example:
// mesh data=2, tensor=4 with order [.., data, .., tensor] (tensor innermost): rank = data*4 +
// tensor, so the tensor groups are {0,1,2,3} and {4,5,6,7} (neighbours, the fastest links) and
// the data groups are {0,4}, {1,5}, {2,6}, {3,7}.
class LogicalMesh {
 public:
  // REQUIRES: `order` is a permutation of MeshAxisNames() (ValidatePlan checks it).
  LogicalMesh(const MeshShape& shape, std::vector<std::string> order);

  int64_t size() const { return size_; }
  int64_t AxisSize(std::string_view axis) const;
  // Distance in rank numbers between neighbours along `axis`.
  int64_t Stride(std::string_view axis) const;
  // Position of `rank` along `axis`, in [0, AxisSize(axis)).
  int64_t Coordinate(int64_t rank, std::string_view axis) const;
  // The ranks that share every coordinate with `rank` except along `axes`, in increasing order
  // of their position along `axes` (the first listed axis slowest). REQUIRES: distinct axes.
  std::vector<int64_t> Group(int64_t rank, const std::vector<std::string>& axes) const;
  // Every group along `axes`: a partition of all ranks, each group ordered as Group().
  std::vector<std::vector<int64_t>> Groups(const std::vector<std::string>& axes) const;

 private:
  MeshShape shape_;
  std::vector<std::string> order_;
  int64_t size_ = 1;
};

}  // namespace shardsim
