#include "topologies/mesh_mapping.h"

#include <gtest/gtest.h>

#include "core/cluster_presets.h"

namespace shardsim::topologies {
namespace {

TEST(MeshMappingTest, InnermostAxisOnNvlinkOuterOnInfiniband) {
  const Cluster c(ParseClusterPreset("dgx-h100:64", "--cluster"));
  MeshShape shape;
  shape.tensor = 8;
  shape.data = 8;
  const auto axes = DescribeAxes(c, LogicalMesh(shape, DefaultMeshOrder()));
  ASSERT_EQ(axes.size(), 2u);
  EXPECT_EQ(axes[0].axis, "tensor");
  EXPECT_EQ(axes[0].path, (std::vector<std::string>{"nvlink", "nvlink"}));
  EXPECT_EQ(axes[1].axis, "data");
  EXPECT_EQ(axes[1].path.front(), "infiniband (nic)");
  EXPECT_DOUBLE_EQ(axes[1].bottleneck_bytes_per_s, 50e9);
}

TEST(MeshMappingTest, TorusAxesFollowChipAxes) {
  const Cluster c(ParseClusterPreset("tpu-v5p:16x16x16", "--cluster"));
  MeshShape shape;
  shape.tensor = 16;
  shape.fsdp = 16;
  shape.data = 16;
  const auto axes = DescribeAxes(c, LogicalMesh(shape, DefaultMeshOrder()));
  ASSERT_EQ(axes.size(), 3u);
  for (const AxisLinks& a : axes) {
    EXPECT_EQ(a.max_neighbour_hops, 1) << a.axis;
    EXPECT_EQ(a.closing_hops, 1) << a.axis;  // full-cube slices wrap around
  }
  // A mesh axis of 32 spans two chip axes: the step from (15,0) to (0,1) takes two hops
  // (the x wraparound, then +y).
  MeshShape wide;
  wide.tensor = 32;
  wide.data = 128;
  const auto wide_axes = DescribeAxes(c, LogicalMesh(wide, DefaultMeshOrder()));
  EXPECT_EQ(wide_axes[0].axis, "tensor");
  EXPECT_EQ(wide_axes[0].max_neighbour_hops, 2);
}

}  // namespace
}  // namespace shardsim::topologies
