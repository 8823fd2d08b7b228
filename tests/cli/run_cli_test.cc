// `shardsim run` end to end: mpirun, shardsim-runtime and the JSON report; bad input stops
// before launching (the CLI's own checks) or in the runtime (what it does not implement yet),
// in one line with exit status 2 either way.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

class RunCliTest : public CliTest {};

TEST_F(RunCliTest, TrainsOnTwoRanksAndReportsJson) {
  const std::string plan = WriteJson("p.json", {{"mesh", {{"data", 2}}}, {"global_batch_size", 4}, {"seq_len", 64}});
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--steps", "3", "--json"}), &report));
  EXPECT_EQ(report["ranks"], 2);
  ASSERT_EQ(report["losses"].size(), 3u);
  EXPECT_NEAR(report["losses"][0].get<double>(), std::log(256.0), 0.1);  // untrained: uniform over bytes
  EXPECT_LT(report["losses"][2].get<double>(), report["losses"][0].get<double>());
  EXPECT_GT(report["step_time_s"].get<double>(), 0);
  EXPECT_TRUE(report["category_s"].contains("compute"));
}

// --trace writes a Chrome trace: every rank's ops keyed stage/layer/op/microbatch with the step
// program's op names.
TEST_F(RunCliTest, TraceHasTheStepProgramsOpKeys) {
  const std::string plan = WriteJson("p.json", {{"mesh", {{"tensor", 2}}}, {"global_batch_size", 2}, {"seq_len", 64}, {"sequence_parallel", true}});
  const std::string trace_path = PathOf("trace.json");
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--steps", "2", "--trace", trace_path, "--json"}), &report));
  std::ifstream in(trace_path);
  const json trace = json::parse(in);
  std::set<std::string> ops;
  std::set<int> ranks;
  std::map<int64_t, std::set<std::string>> keys_by_step;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ranks.insert(e["tid"].get<int>());
    if (e["args"].contains("op")) ops.insert(e["args"]["op"].get<std::string>());
    keys_by_step[e["args"]["step"].get<int64_t>()].insert(e["args"]["key"].get<std::string>());
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  // Each step runs the same ops under the same keys; the step tells them apart.
  ASSERT_EQ(keys_by_step.size(), 2u);
  EXPECT_EQ(keys_by_step[0], keys_by_step[1]);
  for (const char* op : {"qkv", "attention", "tp_enter_attention", "tp_exit_attention", "mlp_down", "tp_exit_mlp_grad", "qkv_dgrad", "optimizer"}) {
    EXPECT_TRUE(ops.count(op)) << op;
  }
}

// tiny-moe with expert parallelism and FSDP: all-to-all dispatch and combine, sharded parameters.
TEST_F(RunCliTest, TrainsTinyMoeWithExpertParallelism) {
  const std::string plan =
      WriteJson("p.json", {{"mesh", {{"expert", 2}, {"fsdp", 2}}}, {"global_batch_size", 4}, {"seq_len", 32}, {"zero_stage", 3}});
  const std::string trace_path = PathOf("trace.json");
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"run", "--model", "tiny-moe", "--plan", plan, "--steps", "3", "--json", "--trace", trace_path}), &report));
  EXPECT_EQ(report["ranks"], 4);
  ASSERT_EQ(report["losses"].size(), 3u);
  EXPECT_NEAR(report["losses"][0].get<double>(), std::log(256.0), 0.15);  // untrained, plus the balancing loss
  EXPECT_LT(report["losses"][2].get<double>(), report["losses"][0].get<double>());
  std::ifstream in(trace_path);
  const json trace = json::parse(in);
  std::set<std::string> ops;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["args"].contains("op")) ops.insert(e["args"]["op"].get<std::string>());
  }
  for (const char* op : {"router", "ep_dispatch", "experts_up", "ep_combine", "shared_expert_up", "ep_combine_grad", "param_allgather_dense", "param_allgather_expert"}) {
    EXPECT_TRUE(ops.count(op)) << op;
  }
  // Every op carries its program op's kind: compute ones theirs, collectives theirs with axes.
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e["args"].contains("kind")) << e.dump();
    const std::string op = e["args"]["op"].get<std::string>(), kind = e["args"]["kind"].get<std::string>();
    if (op == "ep_dispatch") {
      EXPECT_EQ(kind, "all-to-all over expert");
    } else if (op == "experts_up") {
      EXPECT_EQ(kind, "matmul");
    } else if (op == "param_allgather_dense") {
      EXPECT_EQ(kind, "all-gather over fsdp,expert");
    }
  }
}

// --plot draws this run's loss per step with earlier runs (--compare) overlaid; without --model
// it draws the earlier runs only. Data parallelism equals one rank: the plot says how closely.
TEST_F(RunCliTest, PlotOverlaysTheRunWithEarlierOnes) {
  const std::string one = WriteJson("one.json", {{"mesh", {{"data", 1}}}, {"global_batch_size", 4}, {"seq_len", 64}});
  const std::string two = WriteJson("two.json", {{"mesh", {{"data", 2}}}, {"global_batch_size", 4}, {"seq_len", 64}});
  const CliResult first = RunShardsim({"run", "--model", "tiny-dense", "--plan", one, "--steps", "3", "--json"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string reference = PathOf("one_rank.json");
  std::ofstream(reference) << first.out;
  const std::string svg_path = PathOf("loss.svg");
  const CliResult r = RunShardsim({"run", "--model", "tiny-dense", "--plan", two, "--steps", "3", "--plot", svg_path, "--compare", reference});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The run prints as without --plot: each step's line, with its unit and time, and the median.
  EXPECT_NE(r.out.find("step   2  loss "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" nats  grad norm "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("median step "), std::string::npos) << r.out;
  // With --json: stdout is the runtime's report alone (its per-step gradient norms too), the
  // plot's line on stderr.
  const CliResult as_json = RunShardsim({"run", "--model", "tiny-dense", "--plan", two, "--steps", "2", "--plot", PathOf("json.svg"), "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const json plotted = json::parse(as_json.out);
  EXPECT_EQ(plotted["grad_norms"].size(), 2u) << as_json.out;
  EXPECT_NE(as_json.err.find("wrote "), std::string::npos) << as_json.err;
  EXPECT_NE(r.out.find("wrote " + svg_path + ": the loss per step of 2 runs, largest relative difference from the first "), std::string::npos) << r.out;
  std::ifstream in(svg_path);
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg.find("data=2 (3 steps"), std::string::npos) << svg;
  EXPECT_NE(svg.find("one rank (3 steps"), std::string::npos) << svg;
  // Only earlier runs, as JSON.
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"run", "--plot", PathOf("only.svg"), "--compare", reference, "--compare", reference, "--json"}), &report));
  EXPECT_EQ(report["runs"], 2);
  EXPECT_EQ(report["largest_relative_difference"], 0.0);
  // Refused before anything runs.
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--compare", reference}), {"--compare", "--plot"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--plot", PathOf("x.svg"), "--compare", PathOf("missing.json")}), {"missing.json"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--plan", two, "--plot", "/nonexistent/x.svg"}), {"--plot"}));
  // The plot may not replace a compared report; reports of another model are not compared.
  // (a report named without an extension: one named .json is no SVG name to begin with)
  const std::string bare = PathOf("one_rank_report");
  std::filesystem::copy_file(reference, bare);
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--plot", bare, "--compare", bare}), {"--plot", "would replace it"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--plot", reference, "--compare", reference}), {"--plot", "is named .json but is written as svg"}));
  json other = json::parse(first.out);
  other["model"] = "tiny-moe";
  const std::string moe = PathOf("moe.json");
  std::ofstream(moe) << other.dump();
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--plot", PathOf("y.svg"), "--compare", reference, "--compare", moe}), {"--compare", "tiny-moe"}));
}

TEST_F(RunCliTest, WhatTheRuntimeCannotRunIsOneLine) {
  const std::string plan = WriteJson("p.json", {{"mesh", {{"tensor", 2}}}, {"global_batch_size", 4}, {"seq_len", 64}});
  const CliResult r = RunShardsim({"run", "--model", "tiny-moe", "--plan", plan, "--steps", "1"});
  ASSERT_TRUE(r.exited) << r.command;
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("shardsim-runtime: error: plan:/sequence_parallel: tensor parallelism of MoE layers without sequence parallelism"),
            std::string::npos)
      << r.err;
  // K/V repeated to every query head (tiny-dense has 8 heads, 4 K/V heads).
  const std::string repeated = WriteJson("r.json", {{"mesh", {{"data", 1}}}, {"global_batch_size", 2}, {"seq_len", 64}, {"repeat_kv", true}});
  const CliResult k = RunShardsim({"run", "--model", "tiny-dense", "--plan", repeated, "--steps", "1"});
  EXPECT_EQ(k.exit_code, 2) << k.err;
  EXPECT_EQ(CountLines(k.err), 1) << k.err;
  EXPECT_NE(k.err.find("plan:/repeat_kv: K/V repeated to every query head before the attention: the runtime does not implement it yet"), std::string::npos) << k.err;
}

TEST_F(RunCliTest, BadPlansStopBeforeLaunching) {
  const std::string plan = WriteJson("p.json", {{"mesh", {{"tensor", 3}}}, {"global_batch_size", 4}, {"seq_len", 64}});
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--plan", plan}), {"/mesh/tensor", "tensor=3", "heads=8"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense"}), {"run", "--plan"}));
  const std::string good = WriteJson("g.json", {{"global_batch_size", 4}, {"seq_len", 64}});
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--plan", good, "--steps", "0"}), {"--steps"}));
}

// --timeout reaches shardsim-runtime; what is not a number of seconds in (0, 86400] stops first.
TEST_F(RunCliTest, TimeoutIsCheckedAndPassedOn) {
  const std::string plan = WriteJson("p.json", {{"mesh", {{"data", 1}}}, {"global_batch_size", 2}, {"seq_len", 64}});
  for (const char* bad : {"nan", "inf", "0", "-1", "1e9", "86401", "abc", ""}) {
    EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--timeout", bad}), {"--timeout"})) << bad;
  }
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--timeout", "nan"}), {"86400"}));
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--steps", "1", "--timeout", "30.5", "--json"}), &report));
  EXPECT_EQ(report["losses"].size(), 1u);
}

}  // namespace
}  // namespace shardsim::cli_test
