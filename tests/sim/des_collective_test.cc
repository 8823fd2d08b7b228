// The SimGrid engine against the analytic model: equal where no link is shared, slower by the
// contention where groups share links, and naming the links that were shared.
#include "sim/des_collective.h"

#include <gtest/gtest.h>

#include "core/mesh.h"
#include "tests/sim/collective_test_util.h"

namespace shardsim::sim {
namespace {

// Every group along `axis` of a data x tensor mesh, as device groups (rank r on device r).
std::vector<DeviceGroup> AxisGroups(int64_t data, int64_t tensor, const std::string& axis) {
  MeshShape shape;
  shape.data = data;
  shape.tensor = tensor;
  std::vector<DeviceGroup> groups;
  for (const auto& ranks : LogicalMesh(shape, DefaultMeshOrder()).Groups({axis})) groups.push_back({ranks});
  return groups;
}

struct Case {
  std::string cluster;
  int64_t devices;
  CollectiveOp op;
  Algorithm algorithm;
};

// Every algorithm, on a single group (nothing shared with other groups), at a latency-bound and
// a bandwidth-bound size.
TEST(DesAgreementTest, MatchesAnalyticWithin2PercentForEveryAlgorithm) {
  const std::vector<Case> cases = {
      {"tpu-v5p:4x4x4", 4, CollectiveOp::kAllGather, Algorithm::kRing},
      {"tpu-v5p:4x4x4", 16, CollectiveOp::kAllGather, Algorithm::kBidirectionalRing},
      {"tpu-v5p:4x4x4", 64, CollectiveOp::kAllReduce, Algorithm::kTorus},
      {"tpu-v5p:4x4x2", 32, CollectiveOp::kReduceScatter, Algorithm::kTorus},
      {"dgx-h100:32", 32, CollectiveOp::kAllReduce, Algorithm::kHierarchical},
      {"dgx-h100:32", 32, CollectiveOp::kReduceScatter, Algorithm::kRing},  // NCCL's channels over 4 nodes
      {"dgx-h100:32", 32, CollectiveOp::kAllReduce, Algorithm::kTree},
      {"dgx-h100:32", 16, CollectiveOp::kBroadcast, Algorithm::kRing},
      {"dgx-h100:8", 8, CollectiveOp::kAllReduce, Algorithm::kNvls},
      {"dgx-h100:32", 32, CollectiveOp::kAllToAll, Algorithm::kDirect},
      {"tpu-v5e:4x4", 16, CollectiveOp::kPermute, Algorithm::kDirect},
  };
  for (const Case& c : cases) {
    const auto cluster = MakeCluster(c.cluster);
    const DeviceGroup group = FirstDevices(c.devices);
    const CollectiveModel model = Model(cluster, group, c.op, c.algorithm);
    std::vector<DesRequest> requests;
    std::vector<double> analytic;
    for (double bytes : {4096.0, 256.0 * 1048576}) {
      const CollectiveEstimate e = model.Cost(bytes);
      requests.push_back({{&model.schedule()}, bytes, e.chunks});
      analytic.push_back(e.time_s);
    }
    const DesReport des = SimulateCollectives(cluster, {group}, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_NEAR(des.times_s[i] / analytic[i], 1.0, 0.02)
          << c.cluster << " " << ToString(c.op) << " " << ToString(c.algorithm) << " bytes=" << requests[i].bytes;
    }
  }
}

// Every tensor group of a mesh runs at once on disjoint NVSwitch nodes: still no contention.
TEST(DesAgreementTest, DisjointGroupsDoNotSlowEachOther) {
  const auto cluster = MakeCluster("dgx-h100:64");
  const std::vector<DeviceGroup> groups = AxisGroups(8, 8, "tensor");
  const GroupCollective collective(cluster, groups, CollectiveOp::kAllReduce, Algorithm::kRing, "test");
  const double bytes = 64.0 * 1048576;
  DesRequest request{{}, bytes, 1};
  for (const Schedule& s : collective.candidates()[0].schedules) request.schedules.push_back(&s);
  const DesReport des = SimulateCollectives(cluster, groups, {request});
  EXPECT_NEAR(des.times_s[0] / collective.Fastest(bytes).estimate.time_s, 1.0, 0.02);
  EXPECT_EQ(des.busiest_links[0][0].groups, 1);
}

// Scaling-book style contention: all-to-all across nodes through a 2:1 oversubscribed spine takes
// about twice as long as through a non-blocking one, and the report names the spine links.
TEST(DesContentionTest, OversubscribedSpineDoublesAllToAll) {
  std::vector<double> times;
  std::vector<std::string> busiest;
  for (const std::string oversubscription : {"1", "2"}) {
    const auto cluster = MakeCluster("dgx-h100:512,fabric=fat-tree,oversubscription=" + oversubscription);
    const std::vector<DeviceGroup> groups = AxisGroups(64, 8, "data");
    const GroupCollective collective(cluster, groups, CollectiveOp::kAllToAll, Algorithm::kDirect, "test");
    DesRequest request{{}, 256.0 * 1048576, 1};
    for (const Schedule& s : collective.candidates()[0].schedules) request.schedules.push_back(&s);
    const DesReport des = SimulateCollectives(cluster, groups, {request});
    const CollectiveModel& model = collective.candidates()[0].models[0];
    times.push_back(des.times_s[0]);
    busiest.push_back(cluster.links()[static_cast<size_t>(des.busiest_links[0][0].link)].name);
    if (oversubscription == "2") {
      EXPECT_GT(des.times_s[0] / model.Cost(256.0 * 1048576).time_s, 1.5);  // the analytic model sees one group only
      EXPECT_EQ(des.busiest_links[0][0].groups, 8);
    }
  }
  EXPECT_NEAR(times[1] / times[0], 2.0, 0.15);
  EXPECT_NE(busiest[1].find("spine"), std::string::npos) << busiest[1];
}

}  // namespace
}  // namespace shardsim::sim
