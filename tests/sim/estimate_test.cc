// sim::Estimate: bubbles out of the played schedules, and the published runs.
#include "sim/estimate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "strategies/build_step.h"

namespace shardsim::sim {
namespace {

struct Outcome {
  StepReport report;
  strategies::StepProgram program;
};

Outcome EstimatePlan(const ModelSpec& model, const PlanSpec& plan, const std::string& cluster_preset) {
  const ClusterSpec cluster = ParseClusterPreset(cluster_preset, "--cluster");
  ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
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

PlanSpec PipelinePlan(int64_t stages, int64_t microbatches, PipelineSchedule schedule, int64_t chunks = 1) {
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

TEST(EstimateBubbleTest, GpipeAndOneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (PipelineSchedule s : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB}) {
    for (int64_t m : {4, 8, 32}) {
      const double p = 4;
      const StepReport r = EstimatePlan(UniformModel(), PipelinePlan(4, m, s), "dgx-h100:8").report;
      EXPECT_NEAR(BubbleFraction(r), (p - 1) / (static_cast<double>(m) + p - 1), 0.02) << ToString(s) << " m=" << m;
    }
  }
}

TEST(EstimateBubbleTest, InterleavingDividesTheBubbleByV) {
  const double one = EstimatePlan(UniformModel(), PipelinePlan(4, 16, PipelineSchedule::kOneFOneB), "dgx-h100:8").report.bubble_s;
  const double two = EstimatePlan(UniformModel(), PipelinePlan(4, 16, PipelineSchedule::kInterleavedOneFOneB, 2), "dgx-h100:8").report.bubble_s;
  const double four = EstimatePlan(UniformModel(), PipelinePlan(4, 16, PipelineSchedule::kInterleavedOneFOneB, 4), "dgx-h100:8").report.bubble_s;
  EXPECT_NEAR(two / one, 0.5, 0.08);
  EXPECT_NEAR(four / one, 0.25, 0.08);
}

TEST(EstimateBubbleTest, ZeroBubbleBeatsOneFOneBAtEqualMemory) {
  const Outcome onef = EstimatePlan(UniformModel(), PipelinePlan(4, 8, PipelineSchedule::kOneFOneB), "dgx-h100:8");
  const Outcome zb = EstimatePlan(UniformModel(), PipelinePlan(4, 8, PipelineSchedule::kZbH1), "dgx-h100:8");
  EXPECT_LT(zb.report.step_time_s, onef.report.step_time_s * 0.98);
  EXPECT_LE(zb.report.memory.peak.activations, onef.report.memory.peak.activations * 1.0001);
}

TEST(EstimateBubbleTest, DualPipeShrinksTheBubble) {
  PlanSpec p = PipelinePlan(4, 16, PipelineSchedule::kOneFOneB);
  const StepReport onef = EstimatePlan(UniformModel(), p, "dgx-h100:8").report;
  p.pipeline_schedule = PipelineSchedule::kDualPipe;
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
