// Invariants of the schedules: each algorithm moves the bytes its operation needs.
#include "sim/collective_schedule.h"

#include <gtest/gtest.h>

#include "tests/sim/collective_test_util.h"

namespace shardsim::sim {
namespace {

// Bytes (as a fraction of the buffer) each member sends, summed over rounds (1 chunk).
std::vector<double> SentPerMember(const Schedule& s) {
  std::vector<double> sent(static_cast<size_t>(s.group_size), 0);
  for (const Step& step : s.steps) {
    for (const Flow& f : step.flows) sent[static_cast<size_t>(f.src)] += f.fraction * static_cast<double>(step.rounds);
  }
  return sent;
}

Schedule Build(const topologies::Cluster& cluster, int64_t n, CollectiveOp op, Algorithm algorithm) {
  std::string why;
  auto s = BuildSchedule(cluster, FirstDevices(n), op, algorithm, &why);
  EXPECT_TRUE(s.has_value()) << why;
  return s.value_or(Schedule{});
}

// Ring-based all-gather and reduce-scatter send (N-1)/N of the buffer from every member;
// all-reduce twice that (the bandwidth-optimal amount).
TEST(ScheduleTest, RingAndTorusSendTheOptimalBytes) {
  const auto torus = MakeCluster("tpu-v5p:4x4x4");
  for (Algorithm a : {Algorithm::kRing, Algorithm::kBidirectionalRing, Algorithm::kTorus}) {
    for (int64_t n : {4, 16, 64}) {
      const double n_d = static_cast<double>(n);
      for (const auto& [op, factor] : {std::pair{CollectiveOp::kAllGather, 1.0}, std::pair{CollectiveOp::kReduceScatter, 1.0},
                                       std::pair{CollectiveOp::kAllReduce, 2.0}}) {
        for (double sent : SentPerMember(Build(torus, n, op, a))) {
          EXPECT_NEAR(sent, factor * (n_d - 1) / n_d, 1e-12) << ToString(a) << " " << ToString(op) << " n=" << n;
        }
      }
    }
  }
}

// Across NVSwitch nodes a ring runs one channel per member of a node: every member still sends
// the optimal bytes, 1/L of them to the member of its own local index in the next node (its NIC)
// and the rest inside its node.
TEST(ScheduleTest, RingsAcrossNodesSpreadOverEveryNic) {
  const auto gpus = MakeCluster("dgx-h100:32");
  for (Algorithm a : {Algorithm::kRing, Algorithm::kBidirectionalRing}) {
    const Schedule s = Build(gpus, 32, CollectiveOp::kAllReduce, a);
    for (double sent : SentPerMember(s)) EXPECT_NEAR(sent, 2.0 * 31 / 32, 1e-12) << ToString(a);
    std::vector<double> across(32, 0);
    for (const Flow& f : s.steps[0].flows) {
      if (f.src / 8 != f.dst / 8) {
        EXPECT_EQ(f.src % 8, f.dst % 8) << "crosses rails";
        across[static_cast<size_t>(f.src)] += f.fraction * static_cast<double>(s.steps[0].rounds);
      }
    }
    for (double bytes : across) EXPECT_NEAR(bytes, 2.0 * 31 / 32 / 8, 1e-12) << ToString(a);
  }
}

// The channels follow the members' nodes whatever the group's order (here alternating between
// two nodes, so the two directions of the bidirectional ring cross between the same pair of
// nodes); a group with unequal numbers of members per node keeps one ring in group order.
TEST(ScheduleTest, ChannelRingsFollowNodesNotGroupOrder) {
  const auto gpus = MakeCluster("dgx-h100:24");
  DeviceGroup alternating;
  for (int64_t i = 0; i < 8; ++i) alternating.devices.insert(alternating.devices.end(), {8 + i, i});
  for (Algorithm a : {Algorithm::kRing, Algorithm::kBidirectionalRing}) {
    std::string why;
    const auto s = BuildSchedule(gpus, alternating, CollectiveOp::kReduceScatter, a, &why);
    ASSERT_TRUE(s.has_value()) << why;
    for (double sent : SentPerMember(*s)) EXPECT_NEAR(sent, 15.0 / 16, 1e-12) << ToString(a);
    std::vector<double> across(16, 0);
    for (const Flow& f : s->steps[0].flows) {
      const int64_t src = alternating.devices[static_cast<size_t>(f.src)], dst = alternating.devices[static_cast<size_t>(f.dst)];
      if (src / 8 == dst / 8) continue;
      EXPECT_EQ(src % 8, dst % 8) << "crosses rails";
      across[static_cast<size_t>(f.src)] += f.fraction * static_cast<double>(s->steps[0].rounds);
    }
    for (double bytes : across) EXPECT_NEAR(bytes, 15.0 / 16 / 8, 1e-12) << ToString(a);
    EXPECT_NE(s->description.find("8 channels"), std::string::npos) << s->description;
  }
  std::string why;
  const auto uneven = BuildSchedule(gpus, FirstDevices(12), CollectiveOp::kReduceScatter, Algorithm::kRing, &why);
  ASSERT_TRUE(uneven.has_value()) << why;
  EXPECT_NE(uneven->description.find("in group order"), std::string::npos) << uneven->description;
  for (double sent : SentPerMember(*uneven)) EXPECT_NEAR(sent, 11.0 / 12, 1e-12);
}

TEST(ScheduleTest, FlowsStayInsideTheGroupAndNeverLoop) {
  const auto gpus = MakeCluster("dgx-h100:64");
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllReduce, CollectiveOp::kAllToAll,
                          CollectiveOp::kBroadcast, CollectiveOp::kPermute}) {
    for (Algorithm a : AlgorithmsFor(op)) {
      std::string why;
      const auto s = BuildSchedule(gpus, FirstDevices(16), op, a, &why);
      if (!s) continue;
      for (const Step& step : s->steps) {
        for (const Flow& f : step.flows) {
          EXPECT_GE(f.src, 0);
          EXPECT_LT(f.dst, 16);
          EXPECT_NE(f.src, f.dst) << ToString(op) << " " << ToString(a);
          EXPECT_GT(f.fraction, 0);
        }
      }
    }
  }
}

TEST(ScheduleTest, TorusNeedsABoxHierarchicalNeedsNodes) {
  std::string why;
  const auto torus = MakeCluster("tpu-v5p:4x4x4");
  DeviceGroup scattered{{0, 5, 10}};
  EXPECT_FALSE(BuildSchedule(torus, scattered, CollectiveOp::kAllGather, Algorithm::kTorus, &why));
  EXPECT_NE(why.find("box"), std::string::npos) << why;
  EXPECT_FALSE(BuildSchedule(torus, FirstDevices(8), CollectiveOp::kAllGather, Algorithm::kHierarchical, &why));
  const auto gpus = MakeCluster("dgx-h100:16");
  EXPECT_FALSE(BuildSchedule(gpus, FirstDevices(8), CollectiveOp::kAllReduce, Algorithm::kHierarchical, &why));
  EXPECT_NE(why.find("one node"), std::string::npos) << why;
  EXPECT_FALSE(BuildSchedule(gpus, FirstDevices(16), CollectiveOp::kAllReduce, Algorithm::kNvls, &why));
  EXPECT_FALSE(BuildSchedule(gpus, FirstDevices(16), CollectiveOp::kAllToAll, Algorithm::kRing, &why));
}

}  // namespace
}  // namespace shardsim::sim
