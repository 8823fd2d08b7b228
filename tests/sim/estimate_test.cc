// sim::Estimate: bubbles out of the played schedules, and the published runs.
#include "sim/estimate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "sim/op_cost.h"
#include "strategies/build_step.h"
#include "strategies/op_names.h"
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
    int64_t rounds = 1;  // schedules per step: whole rounds are played, exactly extended
  };
  const std::vector<Case> cases = {{126, 16, 1, 400, "1f1b"}, {126, 16, 1, 416, "zb-h1"},
                                   {32, 4, 2, 300, "interleaved-1f1b"}, {32, 4, 1, 200, "dualpipe"},
                                   {30, 4, 1, 150, "gpipe"}, {30, 1, 1, 100, "1f1b"},
                                   {61, 8, 1, 1000, "1f1b"}, {64, 8, 1, 400, "zbv"},
                                   {61, 8, 1, 1000, "1f1b", 125}, {126, 16, 1, 400, "1f1b", 25},
                                   {32, 4, 2, 304, "interleaved-1f1b", 38}, {32, 4, 1, 200, "dualpipe", 25},
                                   {64, 8, 1, 400, "zbv", 10}};
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
    plan.pipeline_rounds = c.rounds;
    plan.zero_stage = 1;
    const ClusterSpec cluster = ParseClusterPreset("dgx-h100:128", "--cluster");
    strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
    const topologies::Cluster graph(cluster);
    AxisCollectives collectives(graph, plan);
    const strategies::StepProgram program = strategies::BuildStep(model, plan);
    const std::string label = c.schedule + " p=" + std::to_string(c.stages) + " m=" + std::to_string(c.microbatches) + " rounds=" + std::to_string(c.rounds);
    ASSERT_LT(strategies::SteadyStateMicrobatches(program.layout.stages, program.layout.chunks, program.microbatches), program.microbatches) << label;
    const StepReport extended = Estimate(program, cluster, collectives);
    // The same program with every micro-batch played.
    ASSERT_EQ(strategies::ValidateSchedule(program), "") << label;
    const StepReport full = Estimate(program, cluster, collectives, /*play_every_microbatch=*/true);
    // 1F1B over stages of unequal times settles into a pattern longer than the plays.
    const double tolerance = c.schedule == "1f1b" && c.stages > 1 && c.rounds == 1 ? 2e-3 : 1e-9;
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

// A step of several schedules: under GPipe, 1F1B and ZB-H1 every round pays the bubble of its own
// (p - 1) fill and drain, and a stage holds no more micro-batches than a round has.
TEST(EstimateBubbleTest, RoundsRepeatTheBubbleAndBoundWhatIsInFlight) {
  for (std::string s : {"gpipe", "1f1b", "zb-h1"}) {
    const Outcome one = EstimatePlan(UniformModel(), PipelinePlan(4, 16, s), "dgx-h100:8");
    PlanSpec in_rounds = PipelinePlan(4, 16, s);
    in_rounds.pipeline_rounds = 4;
    const Outcome four = EstimatePlan(UniformModel(), in_rounds, "dgx-h100:8");
    EXPECT_NEAR(four.report.bubble_s / one.report.bubble_s, 4.0, 0.1) << s;
    EXPECT_NEAR(four.report.compute_s / one.report.compute_s, 1.0, 1e-12) << s;
    // Rounds of 4 micro-batches on 4 stages hold at most 4 of them, as one schedule of 16 does
    // in 1F1B; GPipe's 16 in flight become 4.
    const double held = four.report.memory.peak.activations / one.report.memory.peak.activations;
    EXPECT_NEAR(held, s == "gpipe" ? 0.25 : 1.0, 0.02) << s;
    in_rounds.pipeline_rounds = 8;  // 2 micro-batches a round: half of 1F1B's 4 in flight
    const Outcome eight = EstimatePlan(UniformModel(), in_rounds, "dgx-h100:8");
    if (s == "1f1b") EXPECT_NEAR(eight.report.memory.peak.activations / one.report.memory.peak.activations, 0.5, 0.02);
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

// The zero-bubble papers' setting (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, for
// 1F1B and ZB-H1; ZB-V from their "Pipeline Parallelism with Controllable Memory", 2024): every
// chunk's F, B and W take the same time and communication is free. The program is a real
// one (llama3-8b, 32 layers, 4 stages) with each dense layer's work replaced by one matmul of equal
// FLOPs per phase; the embedding and head programs, the step ops and the pipeline send cost
// nothing, and every chunk holds the same number of dense layers only.
struct EqualPhases {
  StepReport report;
  double task_s = 0;  // one F (= one B = one W) of one chunk
};
EqualPhases EstimateWithEqualPhases(const std::string& schedule, int64_t microbatches) {
  PlanSpec plan = PipelinePlan(4, microbatches, schedule);
  // The kernels' figures: one rate for every pass (efficiency.backward 1).
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:8,efficiency=catalogue", "--cluster");
  const ModelSpec model = UniformModel();
  strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
  strategies::StepProgram program = strategies::BuildStep(model, plan);
  const double flops = 1e12;
  auto& dense = program.layer_programs[static_cast<size_t>(strategies::LayerKind::kDense)].ops;
  dense = {strategies::ComputeOp("f", strategies::Phase::kForward, strategies::ComputeKind::kMatmul, flops, 0),
           strategies::ComputeOp("b", strategies::Phase::kBackwardInput, strategies::ComputeKind::kMatmul, flops, 0),
           strategies::ComputeOp("w", strategies::Phase::kBackwardWeight, strategies::ComputeKind::kMatmul, flops, 0)};
  program.layer_programs[static_cast<size_t>(strategies::LayerKind::kEmbedding)].ops.clear();
  program.layer_programs[static_cast<size_t>(strategies::LayerKind::kHead)].ops.clear();
  program.layer_programs[static_cast<size_t>(strategies::LayerKind::kMoe)].ops.clear();
  program.pipeline_send.comm_bytes = 0;
  const int64_t layers_per_chunk = model.num_layers / (4 * static_cast<int64_t>(program.stages.front().chunks.size()));
  for (strategies::Stage& stage : program.stages) {
    stage.step_ops.clear();
    for (strategies::Chunk& chunk : stage.chunks) {
      EXPECT_EQ(chunk.layout.layers, layers_per_chunk) << schedule;
      chunk.layers = {{strategies::LayerKind::kDense, layers_per_chunk}};
    }
  }
  const topologies::Cluster graph(cluster);
  AxisCollectives collectives(graph, plan);
  EqualPhases out;
  out.report = Estimate(program, cluster, collectives, /*play_every_microbatch=*/true);
  out.task_s = static_cast<double>(layers_per_chunk) * flops / (cluster.chip.peak_flop_per_s.at(plan.dtype) * cluster.efficiency.matmul);
  return out;
}

// With equal F, B and W, 1F1B idles (p - 1)(F + B + W): a fraction (p - 1) / (m + p - 1) of the
// step. ZB-H1 idles (p - 1)(F + B - W) = (p - 1) F. ZB-V has no bubble inside any stage's run of
// tasks: the only idle left is that the last stage starts (p - 1) chunk forwards after the first
// (no schedule avoids it; the paper hides it by overlapping steps), so its fraction is
// (p - 1) / (6m + p - 1), with 6m tasks of one chunk's F per stage, and vanishes as m grows.
// Every time is a whole number of one task's time, so the play is exact: tolerance 1e-9 (rounding).
TEST(EstimateBubbleTest, ZeroBubbleVHasNoBubbleWithEqualPhaseTimes) {
  const double p = 4;
  for (int64_t m : {8, 16, 32}) {
    const double mb = static_cast<double>(m);
    const EqualPhases onef = EstimateWithEqualPhases("1f1b", m);
    const EqualPhases h1 = EstimateWithEqualPhases("zb-h1", m);
    const EqualPhases zbv = EstimateWithEqualPhases("zbv", m);
    // Every stage runs 3 m tasks of one chunk (1F1B, ZB-H1) or 6 m of half a chunk (ZB-V): the
    // same work, so the same busy time.
    EXPECT_NEAR(onef.report.pipeline_s - onef.report.bubble_s, 3 * mb * onef.task_s, 1e-9 * onef.report.pipeline_s) << m;
    EXPECT_NEAR(zbv.report.pipeline_s - zbv.report.bubble_s, 6 * mb * zbv.task_s, 1e-9 * zbv.report.pipeline_s) << m;
    EXPECT_NEAR(zbv.task_s * 2, onef.task_s, 1e-12 * onef.task_s);
    EXPECT_NEAR(BubbleFraction(onef.report), (p - 1) / (mb + p - 1), 1e-9) << "1f1b m=" << m;
    EXPECT_NEAR(h1.report.bubble_s, (p - 1) * h1.task_s, 1e-9 * h1.report.pipeline_s) << "zb-h1 m=" << m;
    EXPECT_NEAR(BubbleFraction(h1.report), (p - 1) / (3 * mb + p - 1), 1e-9) << "zb-h1 m=" << m;
    // ZB-V: idle only at the last stage's start, (p - 1) forwards of one chunk.
    EXPECT_NEAR(zbv.report.bubble_s, (p - 1) * zbv.task_s, 1e-9 * zbv.report.pipeline_s) << "zbv m=" << m;
    EXPECT_NEAR(BubbleFraction(zbv.report), (p - 1) / (6 * mb + p - 1), 1e-9) << "zbv m=" << m;
    EXPECT_LT(BubbleFraction(zbv.report), BubbleFraction(onef.report) / 4) << m;
  }
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

// An FP8 product pays its [k,n] operand's cast (read 16 bits, write 8) at Op::weight_cast_share:
// a weight cast once a step costs its forward products a quarter of four micro-batches' casts.
TEST(RooflineTest, Fp8ProductsPayTheirShareOfTheWeightsCast) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:8", "--cluster");
  const Roofline r = RooflineOf(cluster, "fp8");  // tensorwise: no per-element scales
  strategies::Op op = strategies::ComputeOp("mlp_up", strategies::Phase::kForward, strategies::ComputeKind::kMatmul, 2.0 * 4096 * 4096 * 8192, 0);
  op.m = 4096, op.k = 4096, op.n = 8192;
  const double every = r.Seconds(op);
  op.weight_cast_share = 0.25;
  const double weight = 4096.0 * 8192, hbm = cluster.chip.hbm_bandwidth_bytes_per_s * cluster.efficiency.hbm;
  EXPECT_NEAR(every - r.Seconds(op), 0.75 * (2 + 1) * weight / hbm, 1e-12);
  op.weight_cast_share = 0;  // the activation's cast and amax stay
  EXPECT_NEAR(r.Seconds(op) - 2.0 * 4096 * 4096 * 8192 / (r.peak_flop_per_s * r.matmul_efficiency * r.Quantization(4096, 8192)), (2 + 1 + 2) * 4096.0 * 4096 / hbm,
              1e-12);
}

// NVFP4 products run at the fp4 peak and their casts write half a byte and an E4M3 scale per 16.
TEST(RooflineTest, Nvfp4ProductsRunAtTheFp4PeakAndCastToHalfABytes) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-b200:8", "--cluster");
  const Roofline mx = RooflineOf(cluster, "fp8", 0, "mxfp8"), nv = RooflineOf(cluster, "fp8", 0, "nvfp4");
  EXPECT_DOUBLE_EQ(nv.peak_flop_per_s, cluster.chip.peak_flop_per_s.at("fp4"));
  strategies::Op op = strategies::ComputeOp("mlp_up", strategies::Phase::kForward, strategies::ComputeKind::kMatmul, 0, 0);
  op.m = 4096, op.k = 4096, op.n = 8192;  // no FLOPs: the casts alone
  const double a = 4096.0 * 4096, b = 4096.0 * 8192, hbm = cluster.chip.hbm_bandwidth_bytes_per_s * cluster.efficiency.hbm;
  EXPECT_NEAR(nv.Seconds(op), ((2 + 0.5 + 1.0 / 16 + 2) * a + (2 + 0.5 + 1.0 / 16) * b) / hbm, 1e-12);
  EXPECT_NEAR(mx.Seconds(op), ((2 + 1 + 1.0 / 32 + 2) * a + (2 + 1 + 1.0 / 32) * b) / hbm, 1e-12);
}

// The output head's products run at 16 bits in an fp8 plan (Op::sixteen_bit: no framework converts
// the head): the 16-bit peak at the 16-bit matmul efficiency, no casts, no FP8 GEMM table; the step
// program marks the head's three products so and no other.
TEST(RooflineTest, TheHeadsProductsRunAtSixteenBitsInFp8Plans) {
  ClusterSpec cluster = ParseClusterPreset("dgx-h100:8", "--cluster");
  const Roofline fp8 = RooflineOf(cluster, "fp8"), bf16 = RooflineOf(cluster, "bf16");
  strategies::Op op = strategies::ComputeOp("logits", strategies::Phase::kForward, strategies::ComputeKind::kMatmul, 2.0 * 4096 * 4096 * 16384, 0);
  op.m = 4096, op.k = 4096, op.n = 16384;
  op.sixteen_bit = true;
  EXPECT_DOUBLE_EQ(fp8.Seconds(op), bf16.Seconds(op));
  EXPECT_NEAR(fp8.Seconds(op), op.flops / (cluster.chip.peak_flop_per_s.at("bf16") * cluster.efficiency.matmul * fp8.Quantization(op.m, op.n)), 1e-12);
  op.sixteen_bit = false;
  EXPECT_LT(fp8.Seconds(op), bf16.Seconds(op));  // at the fp8 peak, its casts beside
  // A measured FP8 GEMM table does not cost it.
  cluster.calibration.dtype = "fp8";
  cluster.calibration.gemm.m = cluster.calibration.gemm.n = cluster.calibration.gemm.k = {128, 16384};
  cluster.calibration.gemm.flop_per_s.assign(8, 1e15);
  const Roofline measured = RooflineOf(cluster, "fp8");
  EXPECT_TRUE(measured.Calibrated(op));
  op.sixteen_bit = true;
  EXPECT_FALSE(measured.Calibrated(op));
  EXPECT_DOUBLE_EQ(measured.Seconds(op), bf16.Seconds(op));
  // In the program: the head's forward, input-gradient and weight-gradient products only.
  PlanSpec plan;
  plan.mesh.data = 8, plan.global_batch_size = 8, plan.seq_len = 2048, plan.dtype = "fp8";
  const strategies::StepProgram program = strategies::BuildStep(FindModelPreset("llama3-8b")->spec, plan);
  int marked = 0;
  for (const strategies::LayerProgram& layer : program.layer_programs) {
    for (const strategies::Op& o : layer.ops) {
      if (!o.sixteen_bit) continue;
      ++marked;
      EXPECT_EQ(layer.kind, strategies::LayerKind::kHead) << o.name;
      EXPECT_EQ(o.kind, strategies::ComputeKind::kMatmul) << o.name;
    }
  }
  EXPECT_EQ(marked, 3);
  // A 16-bit plan marks none; a multi-token-prediction module's head is the head's products again.
  auto count = [](const strategies::StepProgram& p) {
    int n = 0;
    for (const strategies::LayerProgram& layer : p.layer_programs) {
      for (const strategies::Op& o : layer.ops) n += o.sixteen_bit ? 1 : 0;
    }
    return n;
  };
  PlanSpec sixteen = plan;
  sixteen.dtype = "bf16";
  EXPECT_EQ(count(strategies::BuildStep(FindModelPreset("llama3-8b")->spec, sixteen)), 0);
  ModelSpec mtp = FindModelPreset("llama3-8b")->spec;
  mtp.mtp_layers = 1;
  EXPECT_EQ(count(strategies::BuildStep(mtp, plan)), 6);
  // An MoE layer's router stays 16-bit too (its three products), the experts' do not.
  const strategies::StepProgram moe = strategies::BuildStep(FindModelPreset("mixtral-8x7b")->spec, plan);
  const std::string router(strategies::ops::kRouter);
  for (const strategies::Op& o : moe.Layer(strategies::LayerKind::kMoe).ops) {
    if (o.kind != strategies::ComputeKind::kMatmul || o.is_comm()) continue;
    const bool is_router = o.name == router || o.name == strategies::ops::Dgrad(router) || o.name == strategies::ops::Wgrad(router);
    EXPECT_EQ(o.sixteen_bit, is_router) << o.name;
  }
  EXPECT_EQ(count(moe), 3 + 3);
}

// wgrad_dtype bf16: the weight gradients' products of an fp8 plan run at 16 bits (torchao's
// rowwise_with_gw_hp, Transformer Engine's override_linear_precision), the others in FP8: a step
// between the all-FP8 one and the 16-bit one.
TEST(RooflineTest, WeightGradientsRunAtSixteenBitsUnderWgradDtypeBf16) {
  PlanSpec plan;
  plan.mesh.data = 8, plan.global_batch_size = 8, plan.seq_len = 2048, plan.dtype = "fp8";
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  const Outcome fp8 = EstimatePlan(m, plan, "dgx-h100:8");
  plan.wgrad_dtype = "bf16";
  const Outcome mixed = EstimatePlan(m, plan, "dgx-h100:8");
  for (const strategies::LayerProgram& layer : mixed.program.layer_programs) {
    for (const strategies::Op& op : layer.ops) {
      if (op.kind != strategies::ComputeKind::kMatmul || op.is_comm()) continue;
      EXPECT_EQ(op.sixteen_bit, op.phase == strategies::Phase::kBackwardWeight || layer.kind == strategies::LayerKind::kHead) << op.name;
    }
  }
  plan.dtype = "bf16", plan.wgrad_dtype = "";
  const Outcome sixteen = EstimatePlan(m, plan, "dgx-h100:8");
  EXPECT_GT(mixed.report.step_time_s, fp8.report.step_time_s);
  EXPECT_LT(mixed.report.step_time_s, sixteen.report.step_time_s);
}

// EfficiencySpec::backward: the gradient passes' products and attention run at that share of the
// forward rates; forward and recomputed work at the forward rates; memory-bound ops as before.
TEST(RooflineTest, BackwardPassesRunAtTheirShareOfTheForwardRates) {
  ClusterSpec cluster = ParseClusterPreset("dgx-h100:8", "--cluster");
  cluster.efficiency.backward = 0.5;
  const Roofline r = RooflineOf(cluster, "bf16");
  using strategies::ComputeKind;
  using strategies::Phase;
  for (ComputeKind kind : {ComputeKind::kMatmul, ComputeKind::kAttention, ComputeKind::kScan}) {
    strategies::Op op = strategies::ComputeOp("op", Phase::kForward, kind, 1e12, 1e3);
    op.m = op.n = op.k = 128 * 132;  // whole waves of tiles
    const double forward = r.Seconds(op);
    op.phase = Phase::kRecompute;
    EXPECT_DOUBLE_EQ(r.Seconds(op), forward);
    op.phase = Phase::kBackwardInput;
    EXPECT_DOUBLE_EQ(r.Seconds(op), 2 * forward);
    op.phase = Phase::kBackwardWeight;
    EXPECT_DOUBLE_EQ(r.Seconds(op), 2 * forward);
  }
  const strategies::Op norm = strategies::ComputeOp("norm_grad", Phase::kBackwardInput, ComputeKind::kElementwise, 0, 1e9);
  EXPECT_DOUBLE_EQ(r.Seconds(norm), RooflineOf(ParseClusterPreset("dgx-h100:8", "--cluster"), "bf16").Seconds(norm));
  // A measured GEMM table's rates hold for the forward; the gradients' products take the share.
  cluster.calibration.dtype = "bf16";
  cluster.calibration.gemm.m = cluster.calibration.gemm.n = cluster.calibration.gemm.k = {128, 4096};
  cluster.calibration.gemm.flop_per_s.assign(8, 5e14);
  const Roofline measured = RooflineOf(cluster, "bf16");
  strategies::Op gemm = strategies::ComputeOp("mlp_up", Phase::kForward, ComputeKind::kMatmul, 1e12, 1e3);
  gemm.m = gemm.n = gemm.k = 1024;
  ASSERT_TRUE(measured.Calibrated(gemm));
  EXPECT_DOUBLE_EQ(measured.Seconds(gemm), 1e12 / 5e14);
  gemm.phase = Phase::kBackwardWeight;
  EXPECT_DOUBLE_EQ(measured.Seconds(gemm), 2 * 1e12 / 5e14);
}

}  // namespace
}  // namespace shardsim::sim
