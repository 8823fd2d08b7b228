// sim::Estimate: bubbles out of the played schedules, and the published runs.
#include "sim/estimate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "strategies/build_step.h"
#include "strategies/plan_rules.h"
#include "strategies/schedule.h"

namespace shardsim::sim {
namespace {

struct Outcome {
  StepReport report;
  strategies::StepProgram program;
};

Outcome EstimatePlan(const ModelSpec& model, const PlanSpec& plan, const std::string& cluster_preset) {
  const ClusterSpec cluster = ParseClusterPreset(cluster_preset, "--cluster");
  strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
  const topologies::Cluster graph(cluster);
  AxisCollectives collectives(graph, plan);
  strategies::StepProgram program = strategies::BuildStep(model, plan);
  return {Estimate(program, cluster, collectives), std::move(program)};
}

// A model whose stages are alike (tiny vocabulary, so embedding and head weigh nothing).
ModelSpec UniformModel() {
  ModelSpec m = FindModelPreset("llama3-8b")->spec;
  m.vocab_size = 256;
  return m;
}

PlanSpec PipelinePlan(int64_t stages, int64_t microbatches, const std::string& schedule, int64_t chunks = 1) {
  PlanSpec p;
  p.mesh.pipeline = stages;
  p.mesh.tensor = 8 / stages;
  p.global_batch_size = microbatches;
  p.seq_len = 4096;
  p.pipeline_schedule = schedule;
  p.virtual_stages = chunks;
  return p;
}

double BubbleFraction(const StepReport& r) { return r.bubble_s / r.pipeline_s; }

// Many micro-batches: the stages' task lists cover a steady-state prefix and the estimator
// extends it at the steady state's mean rate. The result equals playing every micro-batch, for
// every schedule, with uneven stages (126 layers on 16 stages, 61 on 8) and collectives on the
// way: exactly, except 1F1B over stages of unequal times, whose steady state repeats over more
// micro-batches than are played (within 0.2%: 0.06% and 0.16% here).
TEST(EstimateExtensionTest, ExtendingTheSteadyStateEqualsPlayingEveryMicroBatch) {
  struct Case {
    int64_t layers, stages, chunks, microbatches;
    std::string schedule;
  };
  const std::vector<Case> cases = {{126, 16, 1, 400, "1f1b"}, {126, 16, 1, 416, "zb-h1"},
                                   {32, 4, 2, 300, "interleaved-1f1b"}, {32, 4, 1, 200, "dualpipe"},
                                   {30, 4, 1, 150, "gpipe"}, {30, 1, 1, 100, "1f1b"},
                                   {61, 8, 1, 1000, "1f1b"}, {64, 8, 1, 400, "zbv"}};
  for (const Case& c : cases) {
    ModelSpec model = UniformModel();
    model.num_layers = c.layers;
    model.vocab_size = 32000;  // heavier first and last stages
    PlanSpec plan;
    plan.mesh.pipeline = c.stages;
    plan.mesh.data = 16 / c.stages;
    plan.mesh.tensor = 8;
    plan.global_batch_size = c.microbatches * plan.mesh.data;
    plan.seq_len = 2048;
    plan.pipeline_schedule = c.schedule;
    plan.virtual_stages = c.chunks;
    plan.zero_stage = 1;
    const ClusterSpec cluster = ParseClusterPreset("dgx-h100:128", "--cluster");
    strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
    const topologies::Cluster graph(cluster);
    AxisCollectives collectives(graph, plan);
    const strategies::StepProgram program = strategies::BuildStep(model, plan);
    const std::string label = c.schedule + " p=" + std::to_string(c.stages) + " m=" + std::to_string(c.microbatches);
    ASSERT_LT(strategies::SteadyStateMicrobatches(program.layout.stages, program.layout.chunks, program.microbatches), program.microbatches) << label;
    const StepReport extended = Estimate(program, cluster, collectives);
    // The same program with every micro-batch played.
    ASSERT_EQ(strategies::ValidateSchedule(program), "") << label;
    const StepReport full = Estimate(program, cluster, collectives, /*play_every_microbatch=*/true);
    // 1F1B over stages of unequal times settles into a pattern longer than the plays.
    const double tolerance = c.schedule == "1f1b" && c.stages > 1 ? 2e-3 : 1e-9;
    EXPECT_NEAR(extended.step_time_s / full.step_time_s, 1.0, tolerance) << label;
    EXPECT_NEAR(extended.bubble_s, full.bubble_s, tolerance * full.step_time_s) << label;
    EXPECT_NEAR(extended.compute_s / full.compute_s, 1.0, 1e-12) << label;
  }
}

TEST(EstimateBubbleTest, GpipeAndOneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (std::string s : {"gpipe", "1f1b"}) {
    for (int64_t m : {4, 8, 32}) {
      const double p = 4;
      const StepReport r = EstimatePlan(UniformModel(), PipelinePlan(4, m, s), "dgx-h100:8").report;
      EXPECT_NEAR(BubbleFraction(r), (p - 1) / (static_cast<double>(m) + p - 1), 0.02) << s << " m=" << m;
    }
  }
}

TEST(EstimateBubbleTest, InterleavingDividesTheBubbleByV) {
  const double one = EstimatePlan(UniformModel(), PipelinePlan(4, 16, "1f1b"), "dgx-h100:8").report.bubble_s;
  const double two = EstimatePlan(UniformModel(), PipelinePlan(4, 16, "interleaved-1f1b", 2), "dgx-h100:8").report.bubble_s;
  const double four = EstimatePlan(UniformModel(), PipelinePlan(4, 16, "interleaved-1f1b", 4), "dgx-h100:8").report.bubble_s;
  EXPECT_NEAR(two / one, 0.5, 0.08);
  EXPECT_NEAR(four / one, 0.25, 0.08);
}

TEST(EstimateBubbleTest, ZeroBubbleBeatsOneFOneBAtEqualMemory) {
  const Outcome onef = EstimatePlan(UniformModel(), PipelinePlan(4, 8, "1f1b"), "dgx-h100:8");
  const Outcome zb = EstimatePlan(UniformModel(), PipelinePlan(4, 8, "zb-h1"), "dgx-h100:8");
  EXPECT_LT(zb.report.step_time_s, onef.report.step_time_s * 0.98);
  EXPECT_LE(zb.report.memory.peak.activations, onef.report.memory.peak.activations * 1.0001);
}

TEST(EstimateBubbleTest, DualPipeShrinksTheBubble) {
  PlanSpec p = PipelinePlan(4, 16, "1f1b");
  const StepReport onef = EstimatePlan(UniformModel(), p, "dgx-h100:8").report;
  p.pipeline_schedule = "dualpipe";
  const StepReport dual = EstimatePlan(UniformModel(), p, "dgx-h100:8").report;
  EXPECT_LT(dual.bubble_s, onef.bubble_s / 3);
  EXPECT_LT(dual.step_time_s, onef.step_time_s);
}

TEST(EstimateTest, UtilisationAndFit) {
  PlanSpec p;
  p.mesh.data = 8;
  p.global_batch_size = 64;
  p.seq_len = 4096;
  p.recompute = Recompute::kFull;
  p.zero_stage = 1;
  const StepReport r = EstimatePlan(FindModelPreset("llama3-8b")->spec, p, "dgx-h100:8").report;
  EXPECT_GT(r.mfu, 0.2);
  EXPECT_LT(r.mfu, 0.8);
  EXPECT_GT(r.hfu, r.mfu);  // recomputation executes more than the model needs
  EXPECT_TRUE(r.fits);
  p.recompute = Recompute::kNone;
  p.micro_batch_size = 8;
  const StepReport big = EstimatePlan(FindModelPreset("llama3-8b")->spec, p, "dgx-h100:8").report;
  EXPECT_FALSE(big.fits);
  EXPECT_NE(big.why.find("does not fit"), std::string::npos);
}

// NVIDIA's tile and wave quantization: a full wave of whole tiles keeps all the work; one row
// past a tile boundary wastes most of a tile row; too few tiles leave compute units idle.
TEST(MatmulQuantizationTest, TilesAndWaves) {
  EXPECT_DOUBLE_EQ(MatmulQuantization(128, 108, 128 * 12, 128 * 9), 1.0);             // 108 tiles, one full wave
  EXPECT_DOUBLE_EQ(MatmulQuantization(128, 108, 128 * 12, 128 * 10), 120.0 / 216);    // 120 tiles in 2 waves
  EXPECT_DOUBLE_EQ(MatmulQuantization(128, 4, 129, 128), 129.0 / 256 * 2 / 4);        // 2 tiles, half used; 4 units
  EXPECT_DOUBLE_EQ(MatmulQuantization(0, 0, 7, 7), 1.0);
}

}  // namespace
}  // namespace shardsim::sim
