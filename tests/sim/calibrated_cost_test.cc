// The step engines cost ops at a calibration's measured rates where it covers them.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/inputs.h"
#include "sim/estimate.h"
#include "sim/op_cost.h"
#include "sim/simulate.h"
#include "strategies/build_step.h"
#include "topologies/cluster.h"

namespace shardsim::sim {
namespace {

using strategies::ComputeKind;
using strategies::Op;

// local:2 with a flat GEMM grid at `gemm` FLOP/s, attention at `attention` FLOP/s and the RMS
// norm at `norm` bytes/s; the roofline's peak and bandwidth far from them.
ClusterSpec Calibrated(double gemm, double attention, double norm) {
  ClusterSpec c = LoadCluster("local:2");
  c.calibration.dtype = "fp32";
  c.calibration.gemm.m = c.calibration.gemm.n = c.calibration.gemm.k = {32, 2048};
  c.calibration.gemm.flop_per_s.assign(8, gemm);
  c.calibration.kernels["attention"] = KernelRate{true, {{64, attention}, {1024, attention}}};
  c.calibration.kernels["attention_norm"] = KernelRate{false, {{64, norm}, {1024, norm}}};
  return c;
}

PlanSpec DataPlan() {
  PlanSpec p;
  p.mesh.data = 2;
  p.global_batch_size = 4;
  p.seq_len = 256;
  p.dtype = "fp32";
  return p;
}

TEST(CalibratedCostTest, OpsCoveredByTheCalibrationUseItsRates) {
  const ClusterSpec c = Calibrated(5e10, 2e10, 4e9);
  const Roofline r = RooflineOf(c, "fp32", 256);
  Op matmul = strategies::ComputeOp("qkv", strategies::Phase::kForward, ComputeKind::kMatmul, 1e9, 1e6);
  matmul.m = 256, matmul.n = 512, matmul.k = 256;
  EXPECT_TRUE(r.Calibrated(matmul));
  EXPECT_DOUBLE_EQ(r.Seconds(matmul), 1e9 / 5e10);
  const Op attention = strategies::ComputeOp("attention", strategies::Phase::kForward, ComputeKind::kAttention, 1e9, 1e6);
  EXPECT_DOUBLE_EQ(r.Seconds(attention), 1e9 / 2e10);
  const Op norm = strategies::ComputeOp("attention_norm", strategies::Phase::kForward, ComputeKind::kElementwise, 0, 1e6);
  EXPECT_DOUBLE_EQ(r.Seconds(norm), 1e6 / 4e9);
  const Op other = strategies::ComputeOp("mlp_residual", strategies::Phase::kForward, ComputeKind::kElementwise, 0, 1e6);
  EXPECT_FALSE(r.Calibrated(other));
  EXPECT_DOUBLE_EQ(r.Seconds(other), 1e6 / c.chip.hbm_bandwidth_bytes_per_s);  // the roofline
  // Another dtype: the calibration (fp32) does not apply.
  ClusterSpec bf16 = c;
  bf16.chip.peak_flop_per_s["bf16"] = 1e12;
  EXPECT_FALSE(RooflineOf(bf16, "bf16").Calibrated(matmul));
  // Unfused attention's batched products are not the measured blockwise kernel: the roofline at
  // the matmul share costs them.
  const Roofline unfused = RooflineOf(c, "fp32", 256, "", std::string(kUnfusedAttention));
  EXPECT_FALSE(unfused.Calibrated(attention));
  EXPECT_DOUBLE_EQ(unfused.Seconds(attention),
                   std::max(1e9 / (c.chip.peak_flop_per_s.at("fp32") * c.efficiency.matmul), 1e6 / unfused.hbm_bytes_per_s));
  EXPECT_TRUE(unfused.Calibrated(norm));
}

TEST(CalibratedCostTest, FasterMeasuredGemmsShortenTheEstimate) {
  const ModelSpec model = LoadModel("tiny-dense");
  const PlanSpec plan = DataPlan();
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  auto compute = [&](double gemm) {
    const ClusterSpec c = Calibrated(gemm, 2e10, 4e9);
    const topologies::Cluster graph(c);
    AxisCollectives collectives(graph, plan);
    return Estimate(program, c, collectives).compute_s;
  };
  const double slow = compute(2.5e10), fast = compute(5e10);
  // Matmuls are most of tiny-dense's step: doubling their rate takes off well over a third.
  EXPECT_LT(fast, 0.7 * slow);
  EXPECT_GT(fast, 0.5 * slow);  // the rest (attention, norms) does not change
}

TEST(CalibratedCostTest, MeasuredCollectiveCurvesReplaceTheModelPerTransport) {
  ClusterSpec c = LoadCluster("local:2");
  c.calibration.dtype = "fp32";
  c.calibration.collectives.push_back({"all-reduce", 2, "shm", {{1024, 1e-5}, {1048576, 1e-3}}});
  const PlanSpec plan = DataPlan();
  {
    const topologies::Cluster graph(c);
    AxisCollectives collectives(graph, plan);
    EXPECT_DOUBLE_EQ(collectives.Seconds(CollectiveOp::kAllReduce, {"data"}, 1048576), 1e-3);
    // No curve for all-gather: the analytic model on the links.
    EXPECT_GT(collectives.Seconds(CollectiveOp::kAllGather, {"data"}, 1048576), 0);
    EXPECT_NE(collectives.Seconds(CollectiveOp::kAllGather, {"data"}, 1048576), 1e-3);
  }
  // Over two hosts the data axis crosses TCP: the shm curve no longer applies, a tcp one does.
  c.topology.local_hosts = 2;
  c.links["tcp"] = LinkSpec{1.25e8, 5e-5, 1, 1.0, "test"};
  c.calibration.collectives.push_back({"all-reduce", 2, "tcp", {{1024, 1e-4}, {1048576, 1e-2}}});
  const topologies::Cluster graph(c);
  AxisCollectives collectives(graph, plan);
  EXPECT_DOUBLE_EQ(collectives.Seconds(CollectiveOp::kAllReduce, {"data"}, 1048576), 1e-2);
}

// A cluster whose calibration measured that compute hides at most half of a collective runs the
// program's overlapped collectives as blocking: every one of them adds its whole time.
TEST(CalibratedCostTest, CollectivesThatDoNotMoveUnderComputeRunAsBlocking) {
  const ModelSpec model = LoadModel("tiny-dense");
  PlanSpec plan = DataPlan();
  plan.mesh.data = 1;
  plan.mesh.fsdp = 2;
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  auto estimate = [&](double hidden) {
    ClusterSpec c = Calibrated(5e10, 2e10, 4e9);
    c.calibration.collective_hidden = hidden;
    const topologies::Cluster graph(c);
    AxisCollectives collectives(graph, plan);
    return Estimate(program, c, collectives);
  };
  const StepReport overlapping = estimate(-1), measured_overlap = estimate(0.9), blocking = estimate(0.1);
  ASSERT_TRUE(std::any_of(overlapping.collectives.begin(), overlapping.collectives.end(), [](const CollectiveCost& c) { return c.overlapped; }));
  EXPECT_DOUBLE_EQ(measured_overlap.step_time_s, overlapping.step_time_s);
  double all = 0;
  for (const CollectiveCost& c : blocking.collectives) {
    EXPECT_FALSE(c.overlapped) << c.op;
    EXPECT_DOUBLE_EQ(c.exposed_s, c.seconds) << c.op;
    all += c.seconds * c.per_step;
  }
  EXPECT_NEAR(blocking.step_time_s - overlapping.step_time_s, all - (overlapping.step_time_s - overlapping.compute_s - overlapping.bubble_s),
              0.05 * all);
  EXPECT_GT(blocking.step_time_s, overlapping.step_time_s + 0.5 * all);
}

TEST(CalibratedCostTest, BlockingCollectivesKeepPointToPointOverlap) {
  PlanSpec plan = DataPlan();
  plan.mesh.data = 1;
  plan.mesh.context = 2;
  plan.overlap.context = true;
  const strategies::StepProgram program = strategies::WithBlockingCollectives(strategies::BuildStep(LoadModel("tiny-dense"), plan));
  int permutes = 0;
  for (const strategies::LayerProgram& layer : program.layer_programs) {
    for (const Op& op : layer.ops) {
      if (!op.is_comm()) continue;
      if (op.collective == CollectiveOp::kPermute) {
        ++permutes;
        EXPECT_TRUE(op.overlapped) << op.name;
      } else {
        EXPECT_FALSE(op.overlapped) << op.name;
      }
    }
  }
  EXPECT_GT(permutes, 0);
}

// Both engines cost a collective as the calibration measured it: the simulator routes the model's
// flows and waits out what the measured curve takes beyond them.
TEST(CalibratedCostTest, SimulationFollowsMeasuredCurvesSlowerThanTheModel) {
  const ModelSpec model = LoadModel("tiny-dense");
  const PlanSpec plan = DataPlan();
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  ClusterSpec c = Calibrated(5e10, 2e10, 4e9);
  c.calibration.collective_hidden = 0;
  // Ten times the shared-memory link's time: 10 ms per MiB.
  c.calibration.collectives.push_back({"all-reduce", 2, "shm", {{1024, 1e-4}, {1048576, 1e-2}, {67108864, 0.64}}});
  const topologies::Cluster graph(c);
  AxisCollectives collectives(graph, plan);
  const SimReport r = Simulate(program, c, graph, collectives);
  EXPECT_NEAR(r.step.step_time_s, r.estimate.step_time_s, 0.02 * r.estimate.step_time_s);
  double all_reduce = 0;
  for (const CollectiveCost& cc : r.estimate.collectives) all_reduce += cc.seconds * cc.per_step;
  EXPECT_GT(all_reduce, 0.2 * r.estimate.step_time_s);  // the curve weighs in the step
}

}  // namespace
}  // namespace shardsim::sim
