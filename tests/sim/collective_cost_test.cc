// Known answers: the scaling book's closed forms on TPU tori and nccl-tests' figures on NVSwitch.
#include "sim/collective_cost.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "tests/sim/collective_test_util.h"

namespace shardsim::sim {
namespace {

constexpr double kGiB = 1073741824.0;

// v5p ICI from the catalogue: 9e10 B/s per link one way, efficiency 0.9, 1 us per hop.
const double kIci = 9e10 * 0.9;
const double kHop = 1e-6;

TEST(TorusClosedFormTest, BidirectionalRingAllGatherOverOneAxis) {
  const auto cluster = MakeCluster("tpu-v5p:16x16x16");
  const DeviceGroup x_axis = FirstDevices(16);  // dimension 0 varies fastest: one wrapped ring
  const double n = 16;
  const double expected = (n - 1) / n * kGiB / (2 * kIci) + (n - 1) * kHop;  // ~ V / bidirectional link bandwidth
  EXPECT_NEAR(Seconds(cluster, x_axis, CollectiveOp::kAllGather, Algorithm::kBidirectionalRing, kGiB) / expected, 1.0, 1e-6);
  EXPECT_NEAR(Seconds(cluster, x_axis, CollectiveOp::kAllGather, Algorithm::kTorus, kGiB) / expected, 1.0, 1e-6);
}

TEST(TorusClosedFormTest, TwoAxesAtOnceHalveTheTime) {
  const auto cluster = MakeCluster("tpu-v5p:16x16x16");
  const double one = Seconds(cluster, FirstDevices(16), CollectiveOp::kAllGather, Algorithm::kTorus, kGiB);
  const double two = Seconds(cluster, FirstDevices(256), CollectiveOp::kAllGather, Algorithm::kTorus, kGiB);
  // Bandwidth terms: (255/256) V / (4W) against (15/16) V / (2W); latency 30 hops against 15.
  const double expected = 255.0 / 256 * kGiB / (4 * kIci) + 30 * kHop;
  EXPECT_NEAR(two / expected, 1.0, 1e-6);
  EXPECT_NEAR(two / one, 0.5, 0.04);  // (255/256) / (15/16) / 2 = 0.53
  const double three = Seconds(cluster, FirstDevices(4096), CollectiveOp::kAllGather, Algorithm::kTorus, kGiB);
  EXPECT_NEAR(three / one, 1.0 / 3, 0.04);
}

TEST(TorusClosedFormTest, AllReduceIsTwiceAllGather) {
  const auto cluster = MakeCluster("tpu-v5p:8x8x8");
  for (int64_t n : {8, 64, 512}) {
    const double ag = Seconds(cluster, FirstDevices(n), CollectiveOp::kAllGather, Algorithm::kTorus, kGiB);
    const double rs = Seconds(cluster, FirstDevices(n), CollectiveOp::kReduceScatter, Algorithm::kTorus, kGiB);
    const double ar = Seconds(cluster, FirstDevices(n), CollectiveOp::kAllReduce, Algorithm::kTorus, kGiB);
    EXPECT_NEAR(rs / ag, 1.0, 1e-9) << n;
    EXPECT_NEAR(ar / ag, 2.0, 1e-9) << n;
  }
}

TEST(TorusClosedFormTest, SmallMessagesAreLatencyBound) {
  const auto cluster = MakeCluster("tpu-v5p:16x16x16");
  const double t = Seconds(cluster, FirstDevices(16), CollectiveOp::kAllGather, Algorithm::kTorus, 8);
  EXPECT_NEAR(t / (15 * kHop), 1.0, 1e-3);
}

TEST(TorusClosedFormTest, AxesWithoutWraparoundCostMore) {
  // x has 4 chips in both; 4x4x4 is a whole cube (wraps), 4x4x2 is not (a line of 4).
  const double ring = Seconds(MakeCluster("tpu-v5p:4x4x4"), FirstDevices(4), CollectiveOp::kAllGather, Algorithm::kBidirectionalRing, kGiB);
  const double line = Seconds(MakeCluster("tpu-v5p:4x4x2"), FirstDevices(4), CollectiveOp::kAllGather, Algorithm::kBidirectionalRing, kGiB);
  EXPECT_GT(line / ring, 1.9);  // the ring's closing flow runs back along the line, sharing its links
}

TEST(NvswitchTest, RingAllReduceBusBandwidthIsNvlinkTimesEfficiency) {
  const auto cluster = MakeCluster("dgx-h100:8");
  const double t = Seconds(cluster, FirstDevices(8), CollectiveOp::kAllReduce, Algorithm::kRing, kGiB);
  const double busbw = kGiB / t * BusBandwidthFactor(CollectiveOp::kAllReduce, 8);
  EXPECT_NEAR(busbw / (18 * 25e9 * 0.8), 1.0, 0.01);
}

// NCCL's rings across nodes run one channel per GPU of a node, each leaving every node on its own
// NIC: busbw = 8 NICs x 50 GB/s x 0.9 for a large reduce-scatter on 8 nodes of 8 H100s (published:
// ~360 GB/s on 4-8 nodes, NVIDIA/nccl#1229), over twice the hierarchical algorithm's, whose
// phases run one after another; `auto` picks the ring for large buffers.
TEST(NvswitchTest, RingAcrossNodesCrossesOnEveryNic) {
  const auto cluster = MakeCluster("dgx-h100:64");
  const double bytes = 8 * kGiB;
  const double ring = Seconds(cluster, FirstDevices(64), CollectiveOp::kReduceScatter, Algorithm::kRing, bytes);
  const double busbw = bytes / ring * BusBandwidthFactor(CollectiveOp::kReduceScatter, 64);
  EXPECT_NEAR(busbw / (8 * 50e9 * 0.9), 1.0, 0.02);  // the rest: 63 rounds of the route's latency
  const double hierarchical = Seconds(cluster, FirstDevices(64), CollectiveOp::kReduceScatter, Algorithm::kHierarchical, bytes);
  EXPECT_GT(hierarchical, 1.5 * ring);
  const auto models = BuildCollectiveModels(cluster, FirstDevices(64), CollectiveOp::kAllReduce, Algorithm::kAuto, "test");
  EXPECT_EQ(models[Fastest(models, bytes).first].schedule().algorithm, Algorithm::kRing);
  // A group with one GPU per node keeps the plain ring over the nodes' NICs.
  DeviceGroup rail;
  for (int64_t node = 0; node < 8; ++node) rail.devices.push_back(node * 8);
  const double per_nic = Seconds(cluster, rail, CollectiveOp::kReduceScatter, Algorithm::kRing, bytes);
  EXPECT_NEAR(bytes / per_nic * BusBandwidthFactor(CollectiveOp::kReduceScatter, 8) / (50e9 * 0.9), 1.0, 0.02);
}

// NCCL never runs the two-level ring: `auto` on a GPU cluster pays a ring's 511 rounds for a small
// reduce-scatter over 64 nodes, where the two-level ring would pay 70 (7 inside, 63 across); the
// algorithm still runs on request.
TEST(NvswitchTest, AutoPicksOnlyWhatNcclRuns) {
  const auto cluster = MakeCluster("dgx-h100:512");
  const DeviceGroup all = FirstDevices(512);
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllReduce}) {
    const auto models = BuildCollectiveModels(cluster, all, op, Algorithm::kAuto, "test");
    for (const CollectiveModel& m : models) EXPECT_NE(m.schedule().algorithm, Algorithm::kHierarchical) << ToString(op);
    const auto offered = AutoAlgorithmsFor(op);
    EXPECT_EQ(std::count(offered.begin(), offered.end(), Algorithm::kHierarchical), 0) << ToString(op);
  }
  const double bytes = 1 << 20;
  const double hierarchical = Seconds(cluster, all, CollectiveOp::kReduceScatter, Algorithm::kHierarchical, bytes);
  const auto models = BuildCollectiveModels(cluster, all, CollectiveOp::kReduceScatter, Algorithm::kAuto, "test");
  const double automatic = Fastest(models, bytes).second.time_s;
  EXPECT_GT(automatic, 5 * hierarchical);  // latency-bound: 511 rounds against 70
  EXPECT_EQ(automatic, Seconds(cluster, all, CollectiveOp::kReduceScatter, Algorithm::kRing, bytes));
  // The estimate's path (every group of an axis at once) picks the same.
  const GroupCollective axis(cluster, {all}, CollectiveOp::kReduceScatter, Algorithm::kAuto, "test", 64, false, {});
  EXPECT_EQ(axis.Fastest(bytes).estimate.time_s, automatic);
}

TEST(NvswitchTest, NvlsBeatsRingWhereTheSwitchHasIt) {
  const auto h100 = MakeCluster("dgx-h100:8");
  const double ring = Seconds(h100, FirstDevices(8), CollectiveOp::kAllReduce, Algorithm::kRing, kGiB);
  const double nvls = Seconds(h100, FirstDevices(8), CollectiveOp::kAllReduce, Algorithm::kNvls, kGiB);
  EXPECT_LT(nvls, ring);
  // V (N+1)/N up and down each GPU's NVLinks at 480/560 of the ring's rate.
  EXPECT_NEAR(nvls / (9.0 / 8 * kGiB / (18 * 25e9 * 0.8 * 480 / 560)), 1.0, 0.01);
  // busbw 2(N-1)/(N+1) of that rate: 480 GB/s, as nccl-tests measures NVLS on 8 H100s
  // (NVIDIA/nccl-tests#212, #290).
  EXPECT_NEAR(kGiB / nvls * BusBandwidthFactor(CollectiveOp::kAllReduce, 8) / 480e9, 1.0, 0.01);
  // A small buffer pays NCCL's NVLS latency (23 us), so a tree (6.8 us and six NVLink hops) wins.
  EXPECT_NEAR(Seconds(h100, FirstDevices(8), CollectiveOp::kAllReduce, Algorithm::kNvls, 8) / 24e-6, 1.0, 0.01);
  const auto models = BuildCollectiveModels(h100, FirstDevices(8), CollectiveOp::kAllReduce, Algorithm::kAuto, "test");
  EXPECT_EQ(models[Fastest(models, 8192).first].schedule().algorithm, Algorithm::kTree);
  EXPECT_EQ(models[Fastest(models, kGiB).first].schedule().algorithm, Algorithm::kNvls);
  EXPECT_THROW(Seconds(MakeCluster("dgx-a100:8"), FirstDevices(8), CollectiveOp::kAllReduce, Algorithm::kNvls, kGiB), InputError);
}

TEST(NvswitchTest, SharpHalvesTheAcrossNodeTrafficWhereEnabled) {
  const auto plain = MakeCluster("dgx-h100:64");
  const auto sharp = MakeCluster("dgx-h100:64,sharp=true");
  EXPECT_THROW(Seconds(plain, FirstDevices(64), CollectiveOp::kAllReduce, Algorithm::kSharp, kGiB), InputError);
  const double hierarchical = Seconds(sharp, FirstDevices(64), CollectiveOp::kAllReduce, Algorithm::kHierarchical, kGiB);
  const double in_network = Seconds(sharp, FirstDevices(64), CollectiveOp::kAllReduce, Algorithm::kSharp, kGiB);
  // Inside (reduce-scatter, then all-gather): 2 x 7 rounds of 1 us + 2 x (7/8) V / 360 GB/s.
  // Across, per local index: a ring all-reduce of V/8 over 8 nodes, 14 rounds of 5 us +
  // 2 x (7/8) (V/8) / 45 GB/s; SHARP sends V/8 once up and down each NIC: 5 us + (V/8) / 45 GB/s.
  const double inside = 14e-6 + 2 * 7.0 / 8 * kGiB / 360e9;
  // The hierarchical algorithm's rings pay NCCL's ring base latency first (6.6 us); SHARP none.
  EXPECT_NEAR(hierarchical / (6.6e-6 + inside + 14 * 5e-6 + 2 * 7.0 / 8 * kGiB / 8 / 45e9), 1.0, 1e-6);
  EXPECT_NEAR(in_network / (inside + 5e-6 + kGiB / 8 / 45e9), 1.0, 1e-6);
}

TEST(TreeTest, AcrossNodesEachChannelCrossesTheNetworkOnItsOwnNic) {
  // 64 nodes of 8: per channel (1/8 of the buffer) a chain through a node's 8 GPUs to the
  // channel's own one, which sends to and receives from its node's parent and two children in one
  // tree (half the channel's bytes each way) and its parent in the mirror, where it is a leaf:
  // 2/8 of the buffer each way through every NIC, as the channel rings carry (NCCL's trees).
  const auto cluster = MakeCluster("dgx-h100:512");
  const CollectiveModel tree(cluster, FirstDevices(512), *[&] {
    std::string why_not;
    return BuildSchedule(cluster, FirstDevices(512), CollectiveOp::kAllReduce, Algorithm::kTree, &why_not);
  }());
  ASSERT_EQ(tree.schedule().steps.size(), 1u);
  EXPECT_EQ(tree.schedule().steps[0].rounds, 2 * (7 + 6));  // up and down: the chain's 7 hops, 6 levels of 64 nodes
  EXPECT_NEAR(tree.profiles()[0].seconds_per_byte * 50e9 * 0.9, 2.0 / 8, 1e-9);
  // So large buffers take the rings' time, give or take their latencies; a mid-sized one pays 26
  // rounds where the ring pays 1,022.
  const double ring = Seconds(cluster, FirstDevices(512), CollectiveOp::kAllReduce, Algorithm::kRing, 64 * kGiB);
  EXPECT_NEAR(tree.Cost(64 * kGiB).time_s / ring, 1.0, 0.03);
  const auto models = BuildCollectiveModels(cluster, FirstDevices(512), CollectiveOp::kAllReduce, Algorithm::kAuto, "test");
  EXPECT_EQ(models[Fastest(models, 16 << 20).first].schedule().algorithm, Algorithm::kTree);
  EXPECT_LT(tree.Cost(16 << 20).time_s, 0.2 * Seconds(cluster, FirstDevices(512), CollectiveOp::kAllReduce, Algorithm::kRing, 16 << 20));
}

TEST(TreeTest, InsideANodeOrOffSwitchesTheTreeIsOverTheGroup) {
  std::string why_not;
  const auto one_node = BuildSchedule(MakeCluster("dgx-h100:8"), FirstDevices(8), CollectiveOp::kAllReduce, Algorithm::kTree, &why_not);
  ASSERT_TRUE(one_node);
  EXPECT_EQ(one_node->steps.size(), 2u);  // reduce up, then broadcast down the double binary tree over the 8
  const auto torus = BuildSchedule(MakeCluster("tpu-v5p:4x4x4"), FirstDevices(64), CollectiveOp::kAllReduce, Algorithm::kTree, &why_not);
  ASSERT_TRUE(torus);
  EXPECT_EQ(torus->steps.size(), 2u);
}

TEST(AllToAllTest, SwitchAllToAllIsNicBound) {
  // nccl-tests: on a switch, all-to-all moves (N-1)/N of the buffer through each GPU's NIC.
  const auto cluster = MakeCluster("dgx-h100:64");
  DeviceGroup rail;  // one GPU per node: everything crosses InfiniBand
  for (int64_t node = 0; node < 8; ++node) rail.devices.push_back(node * 8);
  const double t = Seconds(cluster, rail, CollectiveOp::kAllToAll, Algorithm::kDirect, kGiB);
  EXPECT_NEAR(t / (7.0 / 8 * kGiB / (50e9 * 0.9) + 5e-6), 1.0, 1e-6);
}

TEST(CollectiveModelTest, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kBroadcast, 8), 1.0);
}

// The planner shares one model between groups the torus's symmetry maps onto each other
// (Cluster::Translated): every algorithm must cost them the same.
TEST(TranslationTest, TranslatedGroupsCostTheSame) {
  const topologies::Cluster c = MakeCluster("tpu-v5p:8x8x8");
  // (64, 4) and (8, 4) from z or y = 6 wrap round: {6, 7, 0, 1} is no box, though its translate would be.
  for (const auto& [stride, size] : {std::pair<int64_t, int64_t>{1, 8}, {8, 8}, {3, 16}, {64, 8}, {9, 32}, {64, 4}, {8, 4}}) {
    for (int64_t first : {0, 5, 77, 300, 6 * 64 + 3, 6 * 8 + 1}) {
      DeviceGroup group;
      for (int64_t k = 0; k < size; ++k) group.devices.push_back((first + k * stride) % c.num_devices());
      const DeviceGroup moved{c.Translated(group.devices)};
      for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kAllToAll}) {
        const GroupCollective a(c, {group}, op, Algorithm::kAuto, "test"), b(c, {moved}, op, Algorithm::kAuto, "test");
        for (double bytes : {1e3, 1e6, 1e9}) {
          EXPECT_EQ(a.Fastest(bytes).estimate.time_s, b.Fastest(bytes).estimate.time_s) << "stride " << stride << " first " << first;
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardsim::sim
