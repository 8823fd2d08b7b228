// Collectives whose kernels run on the chip's compute units (DeepEP's dispatch and combine, 20
// SMs; NCCL's collectives, a thread block per channel) slow the compute they hide under: the
// estimate counts it per phase, and the simulator plays the same seconds after the phase's compute.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "core/inputs.h"
#include "core/model_presets.h"
#include "sim/collective_schedule.h"
#include "sim/estimate.h"
#include "sim/op_cost.h"
#include "sim/simulate.h"
#include "strategies/build_step.h"
#include "strategies/plan_rules.h"

namespace shardsim::sim {
namespace {

struct Case {
  ModelSpec model = FindModelPreset("deepseek-v3")->spec;
  ClusterSpec cluster = LoadCluster("dgx-h100:16");
  PlanSpec Plan(const std::string& dispatcher, bool overlap) const {
    const PlanSpec plan = LoadPlan("", {"mesh.expert=16", "global_batch_size=16", "seq_len=2048", "ep_dispatcher=" + dispatcher,
                                        std::string("overlap.expert=") + (overlap ? "true" : "false")});
    strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
    return plan;
  }
  StepReport Estimated(const PlanSpec& plan) const {
    const Built b(*this, plan);
    return Estimate(b.program, cluster, b.collectives);
  }
  // A plan's step program with the cluster graph and collectives that cost it.
  struct Built {
    Built(const Case& c, const PlanSpec& plan) : program(strategies::BuildStep(c.model, plan)), graph(c.cluster), collectives(graph, plan) {}
    strategies::StepProgram program;
    topologies::Cluster graph;
    mutable AxisCollectives collectives;
  };
};

TEST(BorrowedUnitsTest, HiddenAllToAllsBorrowTheirKernelsUnits) {
  const Case c;
  const strategies::StepProgram program = strategies::BuildStep(c.model, c.Plan("deepep", true));
  int64_t marked = 0;
  for (const strategies::Op& op : program.layer_programs[static_cast<size_t>(strategies::LayerKind::kMoe)].ops) {
    if (op.comm_units > 0) {
      EXPECT_EQ(op.comm_units, 20) << op.name;
      EXPECT_EQ(op.stream, strategies::Stream::kExpert) << op.name;
      ++marked;
    }
  }
  EXPECT_EQ(marked, 4);  // the dispatch and the combine, and their backwards
  // The dense weights' gradient all-reduce over expert hides under the last backward and borrows
  // NCCL's blocks in every plan: the floor the all-to-alls add to.
  const double floor = c.Estimated(c.Plan("deepep", false)).compute_borrowed_s;  // exposed all-to-alls: nothing beside them
  EXPECT_GT(floor, 0);
  EXPECT_DOUBLE_EQ(c.Estimated(c.Plan("alltoall", false)).compute_borrowed_s, floor);
  const StepReport hidden = c.Estimated(c.Plan("deepep", true));
  EXPECT_GT(hidden.compute_borrowed_s, floor);
  EXPECT_LT(hidden.compute_borrowed_s, hidden.compute_s);
  // NCCL's all-to-all over two nodes: its point-to-point channels, 16 thread blocks (the chip's
  // 16 across nodes, rounded up to a power of two).
  EXPECT_GT(c.Estimated(c.Plan("alltoall", true)).compute_borrowed_s, floor);
  Case no_units;
  no_units.cluster.chip.compute_units = 0;  // a chip without a unit count
  EXPECT_EQ(no_units.Estimated(c.Plan("deepep", true)).compute_borrowed_s, 0);
  Case no_nccl_units;
  no_nccl_units.cluster.chip.collective_units = {};  // a chip whose collectives take no units
  EXPECT_EQ(no_nccl_units.Estimated(c.Plan("alltoall", true)).compute_borrowed_s, 0);
  EXPECT_NEAR(no_nccl_units.Estimated(c.Plan("deepep", true)).compute_borrowed_s, hidden.compute_borrowed_s - floor, 1e-9);
}

// NCCL's thread blocks by the communicator's scope (ChipSpec::collective_units): a ring inside a
// DGX H100 node 24, across nodes 16, NVLS 16, the all-to-all 32 inside a node; none on a torus.
TEST(BorrowedUnitsTest, NcclsKernelsHoldTheirChannelsSms) {
  const ClusterSpec h100 = LoadCluster("dgx-h100:16");
  const topologies::Cluster graph(h100);
  auto units = [&](const std::vector<int64_t>& devices, CollectiveOp op, Algorithm algorithm) {
    std::string why;
    const std::optional<Schedule> s = BuildSchedule(graph, {devices}, op, algorithm, &why);
    EXPECT_TRUE(s.has_value()) << why;
    return s ? s->units : -1;
  };
  const std::vector<int64_t> node{0, 1, 2, 3, 4, 5, 6, 7}, two_nodes{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  EXPECT_EQ(units(node, CollectiveOp::kAllGather, Algorithm::kRing), 24);
  EXPECT_EQ(units(two_nodes, CollectiveOp::kReduceScatter, Algorithm::kRing), 16);
  EXPECT_EQ(units(node, CollectiveOp::kAllReduce, Algorithm::kNvls), 16);
  EXPECT_EQ(units(node, CollectiveOp::kAllToAll, Algorithm::kDirect), 32);
  EXPECT_EQ(units(two_nodes, CollectiveOp::kAllToAll, Algorithm::kDirect), 16);
  // A permute sends to one peer on its channels: across the network one per 14 GB/s of the
  // 50 GB/s NIC, inside a node all 32 point-to-point channels.
  EXPECT_EQ(units(two_nodes, CollectiveOp::kPermute, Algorithm::kDirect), 4);
  EXPECT_EQ(units(node, CollectiveOp::kPermute, Algorithm::kDirect), 32);
  const topologies::Cluster torus(LoadCluster("tpu-v5p:2x2x2"));
  std::string why;
  const std::optional<Schedule> t = BuildSchedule(torus, {{0, 1, 2, 3}}, CollectiveOp::kAllGather, Algorithm::kRing, &why);
  ASSERT_TRUE(t.has_value()) << why;
  EXPECT_EQ(t->units, 0);
}

// A hidden FSDP gather and reduce-scatter, or data parallelism's gradient all-reduce under the
// last backward, on a GPU cluster cost the compute they hide under its SMs (the estimate's
// borrowed seconds); on a TPU torus nothing.
TEST(BorrowedUnitsTest, HiddenDataParallelCollectivesBorrowNcclsUnits) {
  const ModelSpec model = FindModelPreset("llama3-8b")->spec;
  for (const auto& [name, axis, borrows] : {std::tuple{"dgx-h100:16", "fsdp", true}, std::tuple{"dgx-h100:16", "data", true},
                                            std::tuple{"tpu-v5p:2x2x4", "fsdp", false}}) {
    const ClusterSpec cluster = LoadCluster(name);
    const PlanSpec plan = LoadPlan("", {std::string("mesh.") + axis + "=16", "global_batch_size=16", "seq_len=4096"});
    strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
    const strategies::StepProgram program = strategies::BuildStep(model, plan);
    const topologies::Cluster graph(cluster);
    AxisCollectives collectives(graph, plan);
    const StepReport r = Estimate(program, cluster, collectives);
    if (borrows) {
      EXPECT_GT(r.compute_borrowed_s, 0) << name << " " << axis;
      EXPECT_LT(r.compute_borrowed_s, 0.2 * r.compute_s) << name << " " << axis;  // 16 of 132 SMs: at most 16/116 of the compute
      // The simulator plays the same loss: its compute agrees with the estimate's to a fraction of
      // the loss (which is 1-3% of the step: a step-time check would not see it missing).
      const SimReport simulated = Simulate(program, cluster, graph, collectives, SimulateOptions{});
      EXPECT_NEAR(simulated.step.step_time_s / r.step_time_s, 1.0, 0.05) << name << " " << axis;
      EXPECT_NEAR(simulated.step.compute_s, r.compute_s, 0.1 * r.compute_borrowed_s) << name << " " << axis;
    } else {
      EXPECT_EQ(r.compute_borrowed_s, 0) << name;
    }
  }
}

// Per phase: u of U units for the hidden h seconds cost the compute W it hides under
// min(W u / (U - u), h u / U).
TEST(BorrowedUnitsTest, EachPhaseLosesWhatItsHiddenKernelsTake) {
  const Case c;
  const PlanSpec plan = c.Plan("deepep", true);
  const Case::Built b(c, plan);
  const strategies::StepProgram& program = b.program;
  const Roofline roofline = RooflineOf(c.cluster, plan.dtype, static_cast<double>(program.tokens_per_microbatch), Fp8RecipeOf(plan), AttentionKernelOf(plan));
  const double units = static_cast<double>(c.cluster.chip.compute_units);
  ASSERT_EQ(units, 132);
  const auto& layer = program.layer_programs[static_cast<size_t>(strategies::LayerKind::kMoe)];
  for (strategies::Phase phase : {strategies::Phase::kForward, strategies::Phase::kBackwardInput}) {
    const PhaseCost cost = CostPhase(layer, phase, roofline, b.collectives);
    double expected = 0;
    for (const PhaseCost::Collective& k : cost.collectives) {
      if (k.op->comm_units == 0) continue;  // DeepEP's dispatch and combine, and nothing else here
      expected += std::min(k.hide_under_s * 20 / (units - 20), (k.seconds - k.exposed_s) * 20 / units);
    }
    EXPECT_GT(expected, 0);
    EXPECT_NEAR(cost.borrowed_s, expected, 1e-12 + 1e-9 * expected);
  }
}

// The simulator adds the same seconds: it agrees with the estimate as without them.
TEST(BorrowedUnitsTest, TheSimulatorPlaysTheBorrowedSeconds) {
  const Case c;
  const Case::Built b(c, c.Plan("deepep", true));
  const StepReport estimated = Estimate(b.program, c.cluster, b.collectives);
  const SimReport simulated = Simulate(b.program, c.cluster, b.graph, b.collectives, SimulateOptions{});
  EXPECT_NEAR(simulated.step.step_time_s / estimated.step_time_s, 1.0, 0.05);
  EXPECT_GE(simulated.step.compute_s, estimated.compute_s - estimated.compute_borrowed_s);
}

}  // namespace
}  // namespace shardsim::sim
