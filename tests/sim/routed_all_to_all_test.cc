// The deduplicating expert dispatcher's traffic (ep_dispatcher deepep): the chance a token misses
// a set of experts, checked against enumerating every routing of small cases; the schedule's
// network and NVLink rows; and the step costs it changes.
#include "sim/routed_all_to_all.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "core/model_presets.h"
#include "sim/estimate.h"
#include "sim/op_cost.h"
#include "sim/simulate.h"
#include "core/inputs.h"
#include "strategies/build_step.h"
#include "strategies/op_names.h"
#include "strategies/plan_rules.h"
#include "tests/sim/collective_test_util.h"

namespace shardsim::sim {
namespace {

// Every k-subset of `items`, each passed to `visit`.
void Subsets(const std::vector<int64_t>& items, int64_t k, const std::function<void(const std::vector<int64_t>&)>& visit) {
  std::vector<bool> pick(items.size(), false);
  std::fill(pick.begin(), pick.begin() + k, true);
  do {
    std::vector<int64_t> chosen;
    for (size_t i = 0; i < items.size(); ++i) {
      if (pick[i]) chosen.push_back(items[i]);
    }
    visit(chosen);
  } while (std::prev_permutation(pick.begin(), pick.end()));
}

// The miss chance by listing every equally likely routing: each choice of group_top_k groups,
// then each k-subset of their experts.
double EnumeratedMiss(const TokenRouting& r, const std::set<int64_t>& experts) {
  const int64_t groups = r.groups > 1 ? r.groups : 1, chosen = r.groups > 1 ? r.group_top_k : 1, per = r.experts / groups;
  std::vector<int64_t> all_groups(static_cast<size_t>(groups));
  std::iota(all_groups.begin(), all_groups.end(), 0);
  double miss = 0, cases = 0;
  Subsets(all_groups, chosen, [&](const std::vector<int64_t>& gs) {
    std::vector<int64_t> pool;
    for (int64_t g : gs) {
      for (int64_t e = 0; e < per; ++e) pool.push_back(g * per + e);
    }
    // Each group choice is equally likely, then each expert choice within it.
    double group_miss = 0, group_cases = 0;
    Subsets(pool, r.top_k, [&](const std::vector<int64_t>& picked) {
      group_cases += 1;
      if (std::none_of(picked.begin(), picked.end(), [&](int64_t e) { return experts.count(e) > 0; })) group_miss += 1;
    });
    miss += group_miss / group_cases;
    cases += 1;
  });
  return miss / cases;
}

TEST(RoutedAllToAllTest, MissProbabilityMatchesEveryRouting) {
  const std::vector<TokenRouting> routings = {{12, 3, 0, 0}, {12, 3, 4, 2}, {12, 4, 6, 3}, {16, 2, 4, 1}, {10, 5, 5, 4}};
  const std::vector<std::set<int64_t>> sets = {{0}, {0, 1, 2}, {1, 2, 3, 4}, {0, 5, 9}, {2, 3, 6, 7}};
  for (const TokenRouting& r : routings) {
    for (const std::set<int64_t>& s : sets) {
      const double exact = EnumeratedMiss(r, s);
      EXPECT_NEAR(MissProbability(r, std::vector<int64_t>(s.begin(), s.end())), exact, 1e-12)
          << "E=" << r.experts << " k=" << r.top_k << " groups " << r.group_top_k << "/" << r.groups << " set of " << s.size();
    }
  }
}

double Sent(const Schedule& s, const std::function<bool(int32_t, int32_t)>& which) {
  double sent = 0;
  for (const Step& step : s.steps) {
    for (const Flow& f : step.flows) sent += which(f.src, f.dst) ? f.fraction : 0;
  }
  return sent;
}

// Round-robin routing (AutoModel's FakeBalancedGate, torchtitan's debug.moe_force_load_balance):
// token t of a long sequence picks experts t·k ... t·k + k - 1 mod E; the miss chance is the
// share of tokens whose window avoids the set, counted over every token of 4 E of them.
TEST(RoutedAllToAllTest, RoundRobinMissProbabilityCountsTheTokens) {
  const std::vector<std::pair<int64_t, int64_t>> cases = {{256, 8}, {512, 22}, {128, 6}, {32, 4}, {384, 8}, {12, 5}};
  for (const auto& [experts, k] : cases) {
    TokenRouting r{experts, k, 8, 4};  // the group limit plays no part
    r.round_robin = true;
    for (int64_t first : {int64_t{0}, int64_t{3}, experts / 2}) {
      for (int64_t size : {int64_t{1}, int64_t{4}, experts / 8}) {
        std::vector<int64_t> set;
        for (int64_t e = first; e < first + size; ++e) set.push_back(e % experts);
        const int64_t tokens = 4 * experts;
        int64_t missed = 0;
        for (int64_t t = 0; t < tokens; ++t) {
          bool hit = false;
          for (int64_t j = 0; j < k; ++j) hit = hit || std::count(set.begin(), set.end(), (t * k + j) % experts) > 0;
          missed += hit ? 0 : 1;
        }
        EXPECT_NEAR(MissProbability(r, set), static_cast<double>(missed) / static_cast<double>(tokens), 1e-12)
            << "E=" << experts << " k=" << k << " experts " << first << ".." << first + size - 1;
      }
    }
  }
}

// DeepSeek-V3's 256 experts over 64 GPUs in 8 nodes, 4 a GPU: round-robin puts a token's 8
// experts on two neighbouring GPUs of one node, so 7/8 of the tokens leave their node once, against
// 4.6 rows a token under uniform routing.
TEST(RoutedAllToAllTest, RoundRobinRoutingSendsATokenToOneNode) {
  const auto cluster = MakeCluster("dgx-h100:64");
  TokenRouting round_robin{256, 8, 0, 0};
  round_robin.round_robin = true;
  const auto rows = NetworkRowsPerToken(cluster, FirstDevices(64), round_robin);
  ASSERT_TRUE(rows.has_value());
  EXPECT_NEAR(rows->deduplicated, 7.0 / 8, 1e-12);
  const auto uniform = NetworkRowsPerToken(cluster, FirstDevices(64), TokenRouting{256, 8, 0, 0});
  ASSERT_TRUE(uniform.has_value());
  EXPECT_GT(uniform->deduplicated, 4);
  EXPECT_NEAR(rows->copies, uniform->copies, 1e-12);  // every routed copy: the same either way
  // Within the node: a token reaches the two GPUs holding its window, its sender's among them 1 in 32.
  std::string why;
  const auto s = RoutedAllToAll(cluster, FirstDevices(64), round_robin, &why);
  ASSERT_TRUE(s.has_value()) << why;
  auto node = [](int32_t m) { return m / 8; };
  const double within = Sent(*s, [&](int32_t a, int32_t b) { return node(a) == node(b); }) / 64;
  // NVLink rows a token, per member: each of the 8 nodes holds its window 1 time in 8, on 2 GPUs,
  // one of them the sender (own node) or the receiving peer (others) 1 time in 4: (2 - 1/4) / 8 per
  // node.
  EXPECT_NEAR(within * 8, 8 * (2 - 0.25) / 8, 1e-12);
}

// One expert per token: nothing to deduplicate, so the network and NVLink carry what the plain
// all-to-all's do (each member's (n - r) / n of its rows leave its node, and (r - 1) / n stay
// in it, which forwarding adds (nodes - 1) x to).
TEST(RoutedAllToAllTest, OneExpertPerTokenMovesWhatThePlainAllToAllDoes) {
  const auto cluster = MakeCluster("dgx-h100:32");
  const DeviceGroup group = FirstDevices(32);
  std::string why;
  const auto s = RoutedAllToAll(cluster, group, TokenRouting{64, 1, 0, 0}, &why);
  ASSERT_TRUE(s.has_value()) << why;
  auto node = [](int32_t m) { return m / 8; };
  const double across = Sent(*s, [&](int32_t a, int32_t b) { return node(a) != node(b); });
  const double within = Sent(*s, [&](int32_t a, int32_t b) { return node(a) == node(b); });
  EXPECT_NEAR(across / 32, 24.0 / 32, 1e-12);
  EXPECT_NEAR(within / 32, 4 * 7.0 / 32, 1e-12);
}

// DeepSeek-V3's routing over 64 GPUs in 8 nodes: each node holds one group, a token reaches 4
// of 8 groups, so a remote node receives a token with chance 1/2 x (1 - C(96,8)/C(128,8)), not
// the 7 x 8/8 copies a plain all-to-all sends over the network.
TEST(RoutedAllToAllTest, NodeLimitedRoutingBoundsTheNetworkRows) {
  const auto cluster = MakeCluster("dgx-h100:64");
  std::string why;
  const TokenRouting limited{256, 8, 8, 4}, free{256, 8, 0, 0};
  const auto s = RoutedAllToAll(cluster, FirstDevices(64), limited, &why);
  ASSERT_TRUE(s.has_value()) << why;
  double avoid = 1;
  for (int i = 0; i < 8; ++i) avoid *= (96.0 - i) / (128.0 - i);
  const double node_hit = 0.5 * (1 - avoid);
  auto node = [](int32_t m) { return m / 8; };
  const double across = Sent(*s, [&](int32_t a, int32_t b) { return node(a) != node(b); }) / 64;
  EXPECT_NEAR(across, 7 * node_hit / 8, 1e-12);  // per member, as a share of its 8 copies per token
  EXPECT_LE(across * 8, 4.0);                     // at most 4 nodes per token, its own included
  // Without the limit more nodes are reached, still fewer rows than copies.
  const auto unlimited = RoutedAllToAll(cluster, FirstDevices(64), free, &why);
  ASSERT_TRUE(unlimited.has_value());
  const double across_free = Sent(*unlimited, [&](int32_t a, int32_t b) { return node(a) != node(b); }) / 64;
  EXPECT_GT(across_free, across);
  EXPECT_LT(across_free, 7.0 / 8);
}

TEST(RoutedAllToAllTest, RefusesWhatItCannotLayOut) {
  std::string why;
  EXPECT_FALSE(RoutedAllToAll(MakeCluster("tpu-v5p:4x4x4"), FirstDevices(8), TokenRouting{64, 8, 0, 0}, &why).has_value());
  EXPECT_NE(why.find("torus"), std::string::npos) << why;
  EXPECT_FALSE(RoutedAllToAll(MakeCluster("dgx-h100:16"), FirstDevices(16), TokenRouting{24, 8, 0, 0}, &why).has_value());
  EXPECT_NE(why.find("evenly"), std::string::npos) << why;
}

// A group whose nodes hold unequal shares of it (12 GPUs: 8 in one node, 4 in the next, as expert
// groups straddling racks do): every token still reaches each node it needs once, at a wrapped
// position, and with one expert per token the rows are the plain all-to-all's.
TEST(RoutedAllToAllTest, UnequalNodesWrapThePosition) {
  std::string why;
  const auto s = RoutedAllToAll(MakeCluster("dgx-h100:16"), FirstDevices(12), TokenRouting{48, 1, 0, 0}, &why);
  ASSERT_TRUE(s.has_value()) << why;
  auto node = [](int32_t m) { return m / 8; };
  // Member 0 (8 in its node): 4 of 12 members' experts in the other node; member 8 (4 in its node):
  // 8 of 12.
  auto sent_across = [&](int32_t src) { return Sent(*s, [&](int32_t a, int32_t b) { return a == src && node(a) != node(b); }); };
  EXPECT_NEAR(sent_across(0), 4.0 / 12, 1e-12);
  EXPECT_NEAR(sent_across(8), 8.0 / 12, 1e-12);
  // Members 4..7 of the first node send to the second node's members 0..3 (position 4..7 wrapped).
  EXPECT_GT(Sent(*s, [&](int32_t a, int32_t b) { return a == 5 && b == 9; }), 0);
  const auto rows = NetworkRowsPerToken(MakeCluster("dgx-h100:16"), FirstDevices(12), TokenRouting{48, 1, 0, 0});
  ASSERT_TRUE(rows.has_value());
  EXPECT_NEAR(rows->deduplicated, rows->copies, 1e-12);
  EXPECT_EQ(rows->nodes, 2);
}

// Thousands of groups: the chance stays a probability (no overflow of the group choices).
TEST(RoutedAllToAllTest, ManyGroupsStayFinite) {
  const TokenRouting r{2048, 8, 2048, 1024};
  const double miss = MissProbability(r, {0, 1, 2, 3});
  EXPECT_TRUE(std::isfinite(miss));
  // Four experts in four one-expert groups: missed unless one of them is among the 1024 chosen
  // groups and picked; each expert is in the token's 8 with chance 8/2048.
  double all_miss = 1;
  for (int i = 0; i < 8; ++i) all_miss *= (2044.0 - i) / (2048.0 - i);
  EXPECT_NEAR(miss, all_miss, 1e-9);
}

// The step: deepep's all-to-alls cost less than every copy's across nodes, and the rest of the
// step is the same.
TEST(RoutedAllToAllTest, DeduplicatedDispatchShortensTheExpertAllToAlls) {
  const ModelSpec model = FindModelPreset("deepseek-v3")->spec;
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:256", "--cluster");
  const topologies::Cluster graph(cluster);
  PlanSpec plan;
  plan.mesh.pipeline = 4, plan.mesh.expert = 64;
  plan.global_batch_size = 256, plan.seq_len = 4096, plan.zero_stage = 3, plan.recompute = Recompute::kFull;
  strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
  auto all_to_all_s = [&](const PlanSpec& p, double* step_s) {
    AxisCollectives collectives(graph, p);
    const strategies::StepProgram program = strategies::BuildStep(model, p);
    double sum = 0;
    for (const strategies::Op& op : program.layer_programs[static_cast<size_t>(strategies::LayerKind::kMoe)].ops) {
      if (op.collective == CollectiveOp::kAllToAll && op.is_comm()) sum += collectives.Seconds(op);
    }
    *step_s = Estimate(program, cluster, collectives).step_time_s;
    return sum;
  };
  double copies_step = 0, dedup_step = 0;
  const double copies = all_to_all_s(plan, &copies_step);
  PlanSpec deepep = plan;
  deepep.ep_dispatcher = "deepep";
  const double dedup = all_to_all_s(deepep, &dedup_step);
  EXPECT_GT(copies, 0);
  EXPECT_LT(dedup, 0.6 * copies);
  EXPECT_LT(dedup_step, copies_step);
}

// The simulator plays the same flows: on two nodes, where only the expert all-to-alls cross them,
// it agrees with the estimate for both dispatchers, and deduplicating is faster there too.
TEST(RoutedAllToAllTest, TheSimulatorPlaysTheSameFlows) {
  const ModelSpec model = FindModelPreset("deepseek-v3")->spec;
  const ClusterSpec cluster = LoadCluster("dgx-h100:16");
  const topologies::Cluster graph(cluster);
  double simulated[2] = {0, 0};
  for (int deepep = 0; deepep < 2; ++deepep) {
    const PlanSpec plan = LoadPlan("", {"mesh.expert=16", "global_batch_size=16", "seq_len=2048", deepep ? "ep_dispatcher=deepep" : "ep_dispatcher=alltoall"});
    strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
    const strategies::StepProgram program = strategies::BuildStep(model, plan);
    AxisCollectives collectives(graph, plan);
    const double estimated = Estimate(program, cluster, collectives).step_time_s;
    simulated[deepep] = Simulate(program, cluster, graph, collectives, SimulateOptions{}).step.step_time_s;
    EXPECT_NEAR(simulated[deepep] / estimated, 1.0, 0.05) << (deepep ? "deepep" : "alltoall");
  }
  EXPECT_LT(simulated[1], simulated[0]);
}

}  // namespace
}  // namespace shardsim::sim
