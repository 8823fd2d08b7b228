// The estimate's per-collective costs (StepReport::collectives) are the breakdown's exposed
// communication op by op: summed per stream and collective they give exposed_comm_s exactly.
#include <cmath>
#include <gtest/gtest.h>

#include <map>

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "sim/estimate.h"
#include "sim/op_cost.h"
#include "sim/simulate.h"
#include "strategies/op_names.h"
#include "strategies/build_step.h"
#include "strategies/plan_rules.h"

namespace shardsim::sim {
namespace {

// A checked plan's step program with what costs it on `cluster` (REQUIRES: `plan` outlives it).
struct Costed {
  Costed(const ModelSpec& model, const ClusterSpec& cluster, const PlanSpec& plan)
      : program((strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:"), strategies::BuildStep(model, plan))),
        graph(cluster),
        collectives(graph, plan),
        roofline(RooflineOf(cluster, plan.dtype, static_cast<double>(program.tokens_per_microbatch))) {}
  strategies::StepProgram program;
  topologies::Cluster graph;
  mutable AxisCollectives collectives;
  Roofline roofline;
};

TEST(EstimateCollectivesTest, PerOpCostsAddUpToTheBreakdown) {
  struct Case {
    std::string model, cluster;
    MeshShape mesh;
    int64_t zero = 0;
    std::string schedule = "1f1b";
    Recompute recompute = Recompute::kNone;
  };
  auto mesh = [](int64_t data, int64_t fsdp, int64_t tensor, int64_t context, int64_t pipeline,
                 int64_t expert) {
    MeshShape m;
    m.data = data, m.fsdp = fsdp, m.tensor = tensor, m.context = context, m.pipeline = pipeline,
    m.expert = expert;
    return m;
  };
  const std::vector<Case> cases = {
      {"llama3-70b", "dgx-h100:64", mesh(2, 1, 8, 1, 4, 1), 1, "zb-h1"},
      {"llama3-8b", "dgx-h100:64", mesh(1, 8, 4, 2, 1, 1), 3, "1f1b", Recompute::kSelective},
      {"mixtral-8x7b", "dgx-h100:64", mesh(2, 1, 4, 1, 2, 4), 0, "zbv", Recompute::kFull}};
  for (const Case& c : cases) {
    const ModelSpec model = FindModelPreset(c.model)->spec;
    const ClusterSpec cluster = ParseClusterPreset(c.cluster, "--cluster");
    PlanSpec plan;
    plan.mesh = c.mesh;
    plan.global_batch_size = 256;
    plan.seq_len = 4096;
    plan.zero_stage = c.zero;
    plan.sequence_parallel = c.mesh.tensor > 1;
    plan.pipeline_schedule = c.schedule;
    plan.recompute = c.recompute;
    strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
    const topologies::Cluster graph(cluster);
    AxisCollectives collectives(graph, plan);
    const StepReport r = Estimate(strategies::BuildStep(model, plan), cluster, collectives);
    ASSERT_FALSE(r.collectives.empty()) << c.model;
    std::map<std::string, double> summed;
    for (const CollectiveCost& op : r.collectives) {
      EXPECT_GT(op.per_step, 0) << op.op;
      EXPECT_LE(op.exposed_s, op.seconds * (1 + 1e-12)) << op.op;
      summed[strategies::ToString(op.stream) + " " + ToString(op.collective)] +=
          op.exposed_s * op.per_step;
    }
    for (const auto& [key, seconds] : r.exposed_comm_s)
      EXPECT_NEAR(summed[key], seconds, 1e-9 * (1 + seconds)) << c.model << " " << key;
    for (const auto& [key, seconds] : summed)
      EXPECT_TRUE(r.exposed_comm_s.count(key) || seconds == 0) << c.model << " " << key;
  }
}

// An overlapped tensor collective hides under its own product only (strategies::OverlapPartner):
// the collectives sharing one product (the backward's regather and input-gradient reduce-scatter
// share the QKV input-gradient product) run one after another, and what they take together beyond
// it is exposed, whatever else the phase computes. The simulation posts them as the product
// starts and waits as it ends, and agrees.
TEST(EstimateCollectivesTest, TensorOverlapHidesUnderItsOwnProduct) {
  const ModelSpec model = FindModelPreset("llama3-8b")->spec;
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:8", "--cluster");
  PlanSpec plan;
  plan.mesh.tensor = 8;
  plan.global_batch_size = 8;
  plan.seq_len = 8192;
  plan.sequence_parallel = true;
  plan.overlap.tensor = true;
  const Costed costed(model, cluster, plan);
  const strategies::StepProgram& program = costed.program;
  AxisCollectives& collectives = costed.collectives;
  const Roofline& roofline = costed.roofline;
  const strategies::LayerProgram& layer = program.Layer(strategies::LayerKind::kDense);
  auto index_of = [&](const std::string& name, strategies::Phase phase) {
    for (size_t i = 0; i < layer.ops.size(); ++i) {
      if (layer.ops[i].name == name && layer.ops[i].phase == phase) return i;
    }
    ADD_FAILURE() << name;
    return size_t{0};
  };
  using strategies::Phase;
  namespace ops = strategies::ops;
  // Forward: each of the four has a product of its own.
  const PhaseCost forward = CostPhase(layer, Phase::kForward, roofline, collectives);
  ASSERT_EQ(forward.collectives.size(), 4u);
  for (const PhaseCost::Collective& c : forward.collectives) {
    ASSERT_GE(c.partner, 0) << c.op->name;
    const double product = roofline.Seconds(layer.ops[static_cast<size_t>(c.partner)]);
    EXPECT_DOUBLE_EQ(c.hide_under_s, product) << c.op->name;
    EXPECT_DOUBLE_EQ(c.exposed_s, std::max(0.0, c.seconds - product)) << c.op->name;
  }
  const double qkv = roofline.Seconds(layer.ops[index_of(std::string(ops::kQkv), Phase::kForward)]);
  const PhaseCost::Collective& enter = forward.collectives[0];
  EXPECT_EQ(enter.op->name, ops::kTensorEnterAttention);
  EXPECT_GT(enter.seconds, qkv);  // the gather takes longer than the QKV product: part sticks out
  EXPECT_GT(enter.exposed_s, 0);
  // Backward: the regather and the reduce-scatter of the attention's input share qkv_dgrad.
  const PhaseCost backward = CostPhase(layer, Phase::kBackwardInput, roofline, collectives);
  const int64_t dgrad = static_cast<int64_t>(index_of(ops::Dgrad(ops::kQkv), Phase::kBackwardInput));
  double together = 0, exposed = 0;
  int sharing = 0;
  for (const PhaseCost::Collective& c : backward.collectives) {
    if (c.partner != dgrad) continue;
    together += c.seconds, exposed += c.exposed_s, ++sharing;
  }
  EXPECT_EQ(sharing, 2);
  EXPECT_NEAR(exposed, std::max(0.0, together - roofline.Seconds(layer.ops[static_cast<size_t>(dgrad)])), 1e-12);
  const SimReport simulated = Simulate(program, cluster, costed.graph, collectives, SimulateOptions{});
  EXPECT_NEAR(simulated.step.step_time_s / simulated.estimate.step_time_s, 1.0, 0.02);
}

// An overlapped all-gather of K/V over context hides under the attention's local block only
// (1 / context of the attention: PyTorch waits for the gather before the next block), in the
// forward, its recomputation and the backward (which gathers K/V again), and the backward's dK/dV
// under the other blocks; the simulation runs the attention in those parts, and agrees.
TEST(EstimateCollectivesTest, ContextAllGatherHidesUnderTheLocalBlock) {
  const ModelSpec model = FindModelPreset("llama3-8b")->spec;
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:16", "--cluster");
  PlanSpec plan;
  plan.mesh.context = 16;
  plan.global_batch_size = 2;
  plan.seq_len = 65536;
  plan.context_kv = "all-gather";
  plan.repeat_kv = true;
  plan.recompute = Recompute::kFull;
  const Costed costed(model, cluster, plan);
  const strategies::LayerProgram& layer = costed.program.Layer(strategies::LayerKind::kDense);
  int gathers = 0;
  for (strategies::Phase phase : {strategies::Phase::kForward, strategies::Phase::kRecompute, strategies::Phase::kBackwardInput}) {
    const PhaseCost cost = CostPhase(layer, phase, costed.roofline, costed.collectives);
    for (const PhaseCost::Collective& c : cost.collectives) {
      if (c.op->stream != strategies::Stream::kContext) continue;
      if (c.op->collective == CollectiveOp::kReduceScatter) {
        // dK/dV pass on under the other blocks' backward.
        ASSERT_GE(c.partner, 0);
        EXPECT_DOUBLE_EQ(c.hide_under_s, costed.roofline.Seconds(layer.ops[static_cast<size_t>(c.partner)]) * 15 / 16);
        continue;
      }
      ++gathers;
      ASSERT_GE(c.partner, 0) << c.op->name;
      const strategies::Op& attention = layer.ops[static_cast<size_t>(c.partner)];
      EXPECT_EQ(attention.kind, strategies::ComputeKind::kAttention) << c.op->name;
      EXPECT_DOUBLE_EQ(c.hide_under_s, costed.roofline.Seconds(attention) / 16) << c.op->name;
      EXPECT_GT(c.exposed_s, 0) << c.op->name;  // the gather outlasts the local block here
      EXPECT_DOUBLE_EQ(c.exposed_s, c.seconds - c.hide_under_s) << c.op->name;
    }
  }
  EXPECT_EQ(gathers, 3);
  const SimReport simulated = Simulate(costed.program, cluster, costed.graph, costed.collectives, SimulateOptions{});
  // The engines differ by what contention adds (the simulation's context gathers and all-reduces
  // share links), not by where the gathers hide.
  double contended_s = 0;
  for (const Contention& c : simulated.contention) contended_s += c.simulated_s - c.uncontended_s;
  EXPECT_LE(std::abs(simulated.step.step_time_s - simulated.estimate.step_time_s), contended_s + 0.005 * simulated.estimate.step_time_s);
  EXPECT_NEAR(simulated.step.step_time_s / simulated.estimate.step_time_s, 1.0, 0.05);
  EXPECT_EQ(ExposedLabel(simulated.estimate, "context all-gather"), "context K/V all-gather");  // not a parameter gather
}

}  // namespace
}  // namespace shardsim::sim
