// `shardsim validate`'s memory comparison: the runtime's report read, and MoE activations set
// beside the memory model at the routing the rank reported (dropless routing sends a rank more or
// fewer expert rows than its tokens route).
#include "validation/compare.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "sim/estimate.h"
#include "strategies/build_step.h"
#include "strategies/memory_model.h"
#include "strategies/op_names.h"
#include "topologies/cluster.h"

namespace shardsim::validation {
namespace {

strategies::StepProgram ExpertPlan() {
  PlanSpec p;
  p.mesh.expert = 2;
  p.global_batch_size = 8;
  p.seq_len = 256;
  p.micro_batch_size = 1;
  p.dtype = "fp32";
  return strategies::BuildStep(FindModelPreset("tiny-moe")->spec, p);
}

nlohmann::json Report(const nlohmann::json& memory) {
  return {{"step_time_s", 0.1}, {"ranks", 2}, {"memory_bytes", memory}};
}

nlohmann::json NoTrace() { return {{"traceEvents", nlohmann::json::array()}}; }

TEST(CompareMemoryTest, MoeActivationsAreSetBesideTheModelAtTheReportedRouting) {
  const strategies::StepProgram program = ExpertPlan();
  const double balanced = strategies::EstimateMemory(program).stages[0].activations;
  const double row = strategies::ExpertRowActivationBytes(program.model, program.plan);
  // tiny-moe: a row is its input (256 floats) and its gate, up and activation (256 each).
  EXPECT_DOUBLE_EQ(row, 4.0 * (256 + 3 * 256));
  const MeasuredRun run = ReadMeasuredRun(
      Report({{{"rank", 0}, {"stage", 0}, {"activations", 25e6}, {"expert_rows_at_activation_peak", {{"received", 2927}, {"sent", 2048}}}},
              {{"rank", 1}, {"stage", 0}, {"activations", 19e6}, {"expert_rows_at_activation_peak", {{"received", 1500}, {"sent", 2048}}}},
              {{"rank", 2}, {"stage", 0}, {"activations", 21e6}}}),
      NoTrace(), "test");
  const std::vector<MemoryRow> rows = CompareMemory(run, program);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[0].predicted_bytes, balanced + (2927 - 2048) * row);
  EXPECT_DOUBLE_EQ(rows[0].routing_bytes, (2927 - 2048) * row);
  EXPECT_DOUBLE_EQ(rows[1].predicted_bytes, balanced - (2048 - 1500) * row);
  // A rank that reported no routing is compared with the balanced prediction.
  EXPECT_DOUBLE_EQ(rows[2].predicted_bytes, balanced);
  EXPECT_EQ(rows[2].rows_received, -1);
  // The JSON keeps the balanced prediction and its error beside the routed one.
  Comparison c;
  c.memory = rows;
  const nlohmann::json j = ComparisonJson(c);
  EXPECT_DOUBLE_EQ(j["memory"][0]["predicted_balanced_bytes"].get<double>(), balanced);
  EXPECT_EQ(j["memory"][0]["expert_rows_received"].get<int64_t>(), 2927);
  EXPECT_FALSE(j["memory"][2].contains("predicted_balanced_bytes"));
}

// With tensor > 1 the experts read rows gathered over tensor (received is t x sent when
// balanced), and a capacity factor is counted on both sides by the model only: no adjustment.
TEST(CompareMemoryTest, NoRoutingAdjustmentWithTensorParallelExpertsOrACapacityFactor) {
  for (const bool tensor : {true, false}) {
    PlanSpec p;
    p.mesh.expert = tensor ? 1 : 2;
    p.mesh.tensor = tensor ? 2 : 1;
    p.sequence_parallel = tensor;
    p.ep_capacity_factor = tensor ? 1.0 : 1.25;
    p.global_batch_size = 8;
    p.seq_len = 256;
    p.micro_batch_size = 1;
    p.dtype = "fp32";
    const strategies::StepProgram program = strategies::BuildStep(FindModelPreset("tiny-moe")->spec, p);
    const MeasuredRun run = ReadMeasuredRun(
        Report({{{"rank", 0}, {"stage", 0}, {"activations", 25e6}, {"expert_rows_at_activation_peak", {{"received", 2048}, {"sent", 1024}}}}}), NoTrace(),
        "test");
    const std::vector<MemoryRow> rows = CompareMemory(run, program);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].routing_bytes, 0.0) << (tensor ? "tensor 2" : "capacity factor 1.25");
    EXPECT_DOUBLE_EQ(rows[0].predicted_bytes, strategies::EstimateMemory(program).stages[0].activations);
  }
}

TEST(CompareMemoryTest, DenseModelsHaveNoExpertRows) {
  PlanSpec p;
  p.mesh.data = 2;
  p.global_batch_size = 8;
  p.seq_len = 256;
  EXPECT_EQ(strategies::ExpertRowActivationBytes(FindModelPreset("tiny-dense")->spec, p), 0.0);
}

// The time predictions cost the routing the run reported (the busiest expert rank's rows over the
// mean) as that capacity factor, whatever factor the plan names (the runtime routes dropless);
// a balanced run at 1, a run that reported none as planned.
TEST(MeasuredRoutingTest, TimePredictionsCostTheRoutingThatHappened) {
  MeasuredRun run = ReadMeasuredRun({{"step_time_s", 0.1}, {"ranks", 2}, {"expert_load_imbalance", 1.42}}, NoTrace(), "test");
  EXPECT_DOUBLE_EQ(run.expert_load_imbalance, 1.42);
  const PlanSpec plan = ExpertPlan().plan;
  std::vector<std::string> notes;
  EXPECT_DOUBLE_EQ(AtMeasuredRouting(plan, run, notes).ep_capacity_factor, 1.42);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("1.42x"), std::string::npos) << notes[0];
  // More rows on the busiest rank: more expert compute in the program it costs.
  auto expert_flops = [](const strategies::StepProgram& p) {
    double flops = 0;
    for (const strategies::Op& op : p.Layer(strategies::LayerKind::kMoe).ops) {
      if (op.name.rfind("experts_", 0) == 0) flops += op.flops;
    }
    return flops;
  };
  const strategies::StepProgram timed = strategies::BuildStep(FindModelPreset("tiny-moe")->spec, AtMeasuredRouting(plan, run, notes));
  EXPECT_NEAR(expert_flops(timed) / expert_flops(ExpertPlan()), 1.42, 0.01);
  // A plan's own capacity factor does not describe the dropless run: the measured load wins.
  PlanSpec capped = plan;
  capped.ep_capacity_factor = 1.25;
  EXPECT_DOUBLE_EQ(AtMeasuredRouting(capped, run, notes).ep_capacity_factor, 1.42);
  run.expert_load_imbalance = 1.002;
  EXPECT_DOUBLE_EQ(AtMeasuredRouting(capped, run, notes).ep_capacity_factor, 1.0);
  notes.clear();
  EXPECT_DOUBLE_EQ(AtMeasuredRouting(plan, run, notes).ep_capacity_factor, 1.0);
  EXPECT_TRUE(notes.empty());
  // Not reported (a dense run, one step): as planned.
  const MeasuredRun silent = ReadMeasuredRun({{"step_time_s", 0.1}, {"ranks", 2}}, NoTrace(), "test");
  EXPECT_DOUBLE_EQ(AtMeasuredRouting(capped, silent, notes).ep_capacity_factor, 1.25);
  EXPECT_TRUE(notes.empty());
}

// Memory is set beside the balanced program (at each rank's reported routing), the per-op table
// too (averaged over ranks: the mean load); only the step and its categories use the program at
// the busiest rank's load.
TEST(MeasuredRoutingTest, MemoryAndOpsStayWithTheBalancedProgram) {
  const strategies::StepProgram balanced = ExpertPlan();
  const nlohmann::json trace = {{"traceEvents",
                                 {{{"ph", "X"}, {"tid", 0}, {"ts", 0.0}, {"dur", 1000.0}, {"cat", "compute"},
                                   {"args", {{"key", "0/0/experts_up/0"}, {"step", 0}}}}}}};
  MeasuredRun run = ReadMeasuredRun(
      Report({{{"rank", 0}, {"stage", 0}, {"activations", 25e6}, {"expert_rows_at_activation_peak", {{"received", 2048}, {"sent", 2048}}}}}),
      trace, "test");
  run.expert_load_imbalance = 1.5;
  std::vector<std::string> notes;
  const strategies::StepProgram timed = strategies::BuildStep(FindModelPreset("tiny-moe")->spec, AtMeasuredRouting(balanced.plan, run, notes));
  ClusterSpec cluster = ParseClusterPreset("dgx-h100:2", "--cluster");
  cluster.chip.peak_flop_per_s["fp32"] = 67e12;  // the runtime's dtype: H100 SXM's fp32 (non-tensor) peak
  const topologies::Cluster graph(cluster);
  sim::AxisCollectives collectives(graph, timed.plan);
  const sim::StepReport report = sim::Estimate(timed, cluster, collectives);
  const Comparison c = Compare(run, timed, balanced, cluster, collectives, report, report);
  ASSERT_FALSE(c.memory.empty());
  EXPECT_DOUBLE_EQ(c.memory[0].predicted_bytes, CompareMemory(run, balanced)[0].predicted_bytes);
  EXPECT_LT(c.memory[0].predicted_bytes, strategies::EstimateMemory(timed).stages[0].activations);
  // The one measured span, against the balanced program's op (the timed one computes 1.5x the
  // rows); per step per rank over the report's 2 ranks.
  ASSERT_EQ(c.ops.size(), 1u);
  const sim::Roofline roofline = sim::RooflineOf(cluster, balanced.plan.dtype, static_cast<double>(balanced.tokens_per_microbatch));
  auto experts_up = [](const strategies::StepProgram& p) {
    for (const strategies::Op& op : p.Layer(strategies::LayerKind::kMoe).ops) {
      if (op.name == strategies::ops::kExpertsUp && op.phase == strategies::Phase::kForward) return op;
    }
    ADD_FAILURE() << "no experts_up";
    return strategies::Op{};
  };
  EXPECT_NEAR(experts_up(timed).flops / experts_up(balanced).flops, 1.5, 1e-9);
  EXPECT_DOUBLE_EQ(c.ops[0].predicted_s, roofline.Seconds(experts_up(balanced)) / 2);
}

}  // namespace
}  // namespace shardsim::validation
