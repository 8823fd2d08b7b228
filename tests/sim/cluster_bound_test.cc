// The analytic side at the cluster bound (core/cluster_spec.h: kMaxClusterDevices): the largest
// accepted clusters build and cost collectives in about a second, and the structural routes of a
// large fabric, checked on a few-leaf replica (topologies/cluster.cc), are still Dijkstra's.
#include <gtest/gtest.h>

#include <chrono>

#include "core/error.h"
#include "sim/collective_schedule.h"
#include "tests/sim/collective_test_util.h"

namespace shardsim::sim {
namespace {

TEST(ClusterBoundTest, LargestSwitchedClusterRoutesAsDijkstraAndCostsQuickly) {
  const auto start = std::chrono::steady_clock::now();
  const topologies::Cluster cluster = MakeCluster("dgx-h100:" + std::to_string(kMaxClusterDevices));
  EXPECT_TRUE(cluster.structural_routes());
  const CollectiveModel model = Model(cluster, FirstDevices(64), CollectiveOp::kAllReduce, Algorithm::kHierarchical);
  EXPECT_GT(model.Cost(1e9).time_s, 0);
  // About 0.5 s in a release build (3 s before the route check moved to a replica).
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  const int64_t n = cluster.num_devices();
  for (const auto& [a, b] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {0, 9}, {5, n - 1}, {n / 2, 17}, {n - 8, n - 1}}) {
    EXPECT_EQ(cluster.Route(a, b), cluster.ReferenceRoute(a, b)) << a << "->" << b;
  }
}

// Latencies that break the structure are still caught on the replica: in-node traffic over the
// NICs, as Dijkstra routes it.
TEST(ClusterBoundTest, ReplicaCatchesUnusualLatencies) {
  ClusterSpec odd = ParseClusterPreset("dgx-h100:65536,fabric=fat-tree", "--cluster");
  odd.links.at("nvlink").latency_s = 20e-6;
  const topologies::Cluster cluster(odd);
  EXPECT_FALSE(cluster.structural_routes());
  EXPECT_EQ(cluster.Route(0, 1), cluster.ReferenceRoute(0, 1));
}

TEST(ClusterBoundTest, AllToAllGroupsAreBoundedBeforeTheyAreBuilt) {
  EXPECT_NO_THROW(CheckScheduleSize(CollectiveOp::kAllToAll, 4096, "--devices 4096"));
  EXPECT_NO_THROW(CheckScheduleSize(CollectiveOp::kAllReduce, kMaxClusterDevices, "--devices"));
  try {
    CheckScheduleSize(CollectiveOp::kAllToAll, 4097, "--devices 4097");
    ADD_FAILURE() << "accepted an all-to-all over 4097 devices";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "--devices 4097");
    EXPECT_NE(e.valid().find("at most 4096 devices"), std::string::npos) << e.what();
  }
  const auto cluster = MakeCluster("dgx-h100:8192");
  EXPECT_THROW(BuildCollectiveModels(cluster, FirstDevices(8192), CollectiveOp::kAllToAll, Algorithm::kAuto, "test"), InputError);
}

}  // namespace
}  // namespace shardsim::sim
