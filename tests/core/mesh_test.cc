#include "core/mesh.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace shardsim {
namespace {

TEST(LogicalMeshTest, WorkedExampleFromTheHeader) {
  MeshShape shape;
  shape.data = 2;
  shape.tensor = 4;
  const LogicalMesh mesh(shape, DefaultMeshOrder());
  EXPECT_EQ(mesh.Groups({"tensor"}), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(mesh.Groups({"data"}), (std::vector<std::vector<int64_t>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(mesh.Coordinate(6, "data"), 1);
  EXPECT_EQ(mesh.Coordinate(6, "tensor"), 2);
}

// For every axis and pair of axes, groups partition the ranks, have the product of the axis
// sizes as size, and vary only along their axes.
TEST(LogicalMeshTest, GroupsPartitionTheRanks) {
  MeshShape shape;
  shape.data = 2;
  shape.fsdp = 3;
  shape.tensor = 2;
  shape.pipeline = 2;
  shape.context = 2;
  const LogicalMesh mesh(shape, {"data", "pipeline", "fsdp", "expert", "context", "tensor"});
  for (const auto& axes : std::vector<std::vector<std::string>>{{"data"}, {"fsdp"}, {"tensor"}, {"pipeline"}, {"context"},
                                                                 {"data", "fsdp"}, {"pipeline", "tensor"}}) {
    std::vector<int> seen(static_cast<size_t>(mesh.size()), 0);
    int64_t expected = 1;
    for (const auto& a : axes) expected *= shape.Size(a);
    for (const auto& group : mesh.Groups(axes)) {
      EXPECT_EQ(static_cast<int64_t>(group.size()), expected);
      for (int64_t r : group) {
        ++seen[static_cast<size_t>(r)];
        for (const std::string& other : MeshAxisNames()) {
          if (std::find(axes.begin(), axes.end(), other) != axes.end()) continue;
          EXPECT_EQ(mesh.Coordinate(r, other), mesh.Coordinate(group[0], other));
        }
      }
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST(LogicalMeshTest, InnermostAxisIsContiguous) {
  MeshShape shape;
  shape.data = 4;
  shape.tensor = 8;
  const LogicalMesh mesh(shape, DefaultMeshOrder());
  EXPECT_EQ(mesh.Stride("tensor"), 1);
  EXPECT_EQ(mesh.Stride("data"), 8);
}

}  // namespace
}  // namespace shardsim
