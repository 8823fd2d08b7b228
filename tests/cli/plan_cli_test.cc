// `shardsim plan` end to end: ranked plans in the report format, which feed back into estimate.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

class CliPlanTest : public CliTest {};

TEST_F(CliPlanTest, PlansFeedBackIntoEstimate) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1M", "--seq-len",
                                         "4096", "--top", "3", "--json"}),
                            &out));
  ASSERT_EQ(out["plans"].size(), 3u);
  EXPECT_GT(out["search"]["evaluated"].get<int64_t>(), 100);
  EXPECT_GT(out["search"]["plans_per_s"].get<double>(), 0);
  for (size_t i = 1; i < 3; ++i) EXPECT_GE(out["plans"][i - 1]["tokens_per_s"].get<double>(), out["plans"][i]["tokens_per_s"].get<double>());
  const json& best = out["plans"][0];
  EXPECT_TRUE(best["fits"].get<bool>());
  json again;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--plan", WriteJson("best.json", best["plan"]),
                                         "--json"}),
                            &again));
  EXPECT_DOUBLE_EQ(again["step_time_s"].get<double>(), best["step_time_s"].get<double>());
}

TEST_F(CliPlanTest, TableExplainsTheBest) {
  const CliResult r = RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1M", "--seq-len", "4096"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.err;
  EXPECT_NE(r.out.find("Best plan, in the sharding notation"), std::string::npos);
  EXPECT_NE(r.out.find("Wqkv["), std::string::npos);
  EXPECT_NE(r.out.find("The best of each other family"), std::string::npos);
}

TEST_F(CliPlanTest, PlotsTheParetoPlans) {
  json out;
  const std::string svg = PathOf("pareto.svg");
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1M", "--seq-len",
                                         "4096", "--plot", svg, "--json"}),
                            &out));
  std::ifstream in(svg);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  size_t circles = 0;
  for (size_t at = text.find("<circle"); at != std::string::npos; at = text.find("<circle", at + 1)) ++circles;
  EXPECT_EQ(circles, out["pareto"].size());
  EXPECT_GE(circles, 2u);
}

TEST_F(CliPlanTest, BadInputIsNamed) {
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16"}), {"--global-batch-tokens", "--seq-len"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1000", "--seq-len", "512"}),
                           {"--global-batch-tokens", "sequences"}));
  const std::vector<std::string> base = {"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1M", "--seq-len", "4096"};
  auto with = [&base](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(with({"--set", "mesh.tensor=3"}), {"mesh.tensor=3", "no mesh"}));
  // A fixed mesh order is checked before the search (it once met the unknown axis inside it).
  EXPECT_TRUE(IsInputError(with({"--set", "mesh_order=bad"}), {"mesh_order", "unknown axis 'bad'", "pipeline"}));
  EXPECT_TRUE(IsInputError(with({"--set", "mesh_order=data,tensor"}), {"mesh_order", "all 6 axes"}));
  EXPECT_TRUE(IsInputError(with({"--set", "zero_stage=5"}), {"zero_stage"}));
  EXPECT_TRUE(IsInputError(with({"--set", "seq_len=2048"}), {"--seq-len", "seq_len"}));
  EXPECT_TRUE(IsInputError(with({"--set", "dtype=fp32"}), {"dtype", "no peak"}));
  EXPECT_TRUE(IsInputError(with({"--framework", "megatorn"}), {"--framework", "megatron-core"}));
  EXPECT_TRUE(IsInputError(with({"--set", "framework=titan"}), {"framework", "torchtitan"}));
  EXPECT_TRUE(IsInputError(with({"--framework", "maxtext", "--set", "framework=torchtitan"}), {"--framework", "torchtitan"}));
  for (const char* bad : {"0", "1.5", "-0.2", "nan", "lots"}) EXPECT_TRUE(IsInputError(with({"--max-memory", bad}), {"--max-memory"})) << bad;
  EXPECT_TRUE(IsInputError(with({"--max-memory", "200GiB"}), {"--max-memory", "HBM"}));
  // Not memory: the framework runs none of the plans, and the error says why.
  EXPECT_TRUE(IsInputError(with({"--framework", "deepspeed", "--set", "dtype=fp8"}), {"--framework deepspeed", "runs none", "fp8"}));
  // Activation offloading fixed beyond the model's layers, or on a cluster with no host link
  // (the search once met the latter inside a plan's costing).
  EXPECT_TRUE(IsInputError(with({"--set", "offload_layers=33"}), {"offload_layers", "32 decoder layers"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "tpu-v5p:4x4x4", "--global-batch-tokens", "1M", "--seq-len", "4096",
                                        "--set", "offload_layers=4"}),
                           {"/offload_layers", "host"}));
}

// A fixed pipeline schedule means pipeline stages: no plan without them meets it.
TEST_F(CliPlanTest, FixedScheduleMeansStages) {
  const CliResult r = RunShardsim({"plan", "--model", "llama3-70b", "--cluster", "dgx-h100:64", "--global-batch-tokens", "4M", "--seq-len", "8192",
                                   "--set", "pipeline_schedule=zbv", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  ASSERT_FALSE(out["plans"].empty());
  for (const json& p : out["plans"]) {
    EXPECT_GT(p["plan"]["mesh"]["pipeline"].get<int64_t>(), 1);
    EXPECT_EQ(p["plan"]["pipeline_schedule"], "zbv");
  }
}

// A fixed expert fold: every plan keeps the experts over the context ranks; an empty list is
// the default (the expert axis), fixed like any field.
TEST_F(CliPlanTest, FixedExpertFoldIsKept) {
  auto plan = [](const std::string& axes) {
    return RunShardsim({"plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "256K", "--seq-len", "8192",
                        "--set", "expert_axes=" + axes, "--json"});
  };
  const CliResult folded = plan("context");
  ASSERT_EQ(folded.exit_code, 0) << folded.err;
  const json out = json::parse(folded.out);
  ASSERT_FALSE(out["plans"].empty());
  for (const json& p : out["plans"]) {
    EXPECT_GT(p["plan"]["mesh"]["context"].get<int64_t>(), 1);
    EXPECT_EQ(p["plan"]["expert_axes"], json::array({"context"}));
  }
  const CliResult unset = plan("");
  EXPECT_EQ(unset.exit_code, 0) << unset.err;
  // The header names an empty fold as unset, not as JSON's null.
  const CliResult text = RunShardsim({"plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "256K", "--seq-len",
                                      "8192", "--set", "expert_axes="});
  EXPECT_NE(text.out.find("expert_axes=unset"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("null"), std::string::npos) << text.out;
  const json unset_out = json::parse(unset.out);  // kept alive: the loop reads into it
  for (const json& p : unset_out["plans"]) EXPECT_FALSE(p["plan"].contains("expert_axes"));
}

// --set fixes fields: every plan shown keeps them, and the output says they were fixed.
TEST_F(CliPlanTest, ConstraintsAreKeptAndShown) {
  const CliResult r = RunShardsim({"plan", "--model", "llama3-70b", "--cluster", "dgx-h100:64", "--global-batch-tokens", "4M", "--seq-len", "8192",
                                       "--set", "mesh.tensor=8", "--set", "dtype=fp8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["fixed"]["mesh.tensor"], 8);
  EXPECT_EQ(out["fixed"]["dtype"], "fp8");
  for (const json& p : out["plans"]) {
    EXPECT_EQ(p["plan"]["mesh"]["tensor"], 8);
    EXPECT_EQ(p["plan"]["dtype"], "fp8");
  }
  const CliResult text = RunShardsim({"plan", "--model", "llama3-70b", "--cluster", "dgx-h100:64", "--global-batch-tokens", "4M", "--seq-len", "8192",
                                          "--set", "mesh.tensor=8"});
  EXPECT_NE(text.out.find("fixed by --plan/--set: mesh.tensor=8"), std::string::npos) << text.out;
}

// The batch may come from the plan instead of the flags.
TEST_F(CliPlanTest, BatchFromThePlan) {
  const CliResult flags = RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "64K", "--seq-len", "2048", "--json"});
  const CliResult fixed = RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "global_batch_size=32", "--set", "seq_len=2048", "--json"});
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_EQ(json::parse(flags.out)["plans"][0]["tokens_per_s"], json::parse(fixed.out)["plans"][0]["tokens_per_s"]);
}

// Nothing fits: exit 3, the message says so and names the smallest size that fits and what the
// nearest misses would need.
TEST_F(CliPlanTest, NothingFitsSaysSoAndHowManyDevices) {
  const std::vector<std::string> args = {"plan", "--model", "llama3-405b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "4M", "--seq-len", "8192"};
  const CliResult text = RunShardsim(args);
  EXPECT_EQ(text.exit_code, 3) << text.err;
  EXPECT_NE(text.out.find("No plan of llama3-405b fits"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("The smallest size of dgx-h100 on which one fits: dgx-h100:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("more"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("% of HBM)"), std::string::npos) << text.out;
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const CliResult j = RunShardsim(json_args);
  EXPECT_EQ(j.exit_code, 3);
  const json out = json::parse(j.out);
  EXPECT_FALSE(out["fits"].get<bool>());
  ASSERT_TRUE(out["smallest_fit"]["found"].get<bool>());
  EXPECT_GT(out["smallest_fit"]["devices"].get<int64_t>(), 8);
  EXPECT_LE(out["smallest_fit"]["plan"]["memory"]["peak_bytes_per_device"].get<double>(), out["max_memory_bytes_per_device"].get<double>());
  for (const json& miss : out["nearest_misses"]) EXPECT_GT(miss["needed_bytes_per_device"].get<double>(), out["max_memory_bytes_per_device"].get<double>());
  // Bytes are whole numbers.
  EXPECT_TRUE(out["max_memory_bytes_per_device"].is_number_integer()) << out["max_memory_bytes_per_device"];
  ASSERT_FALSE(out["nearest_misses"].empty());
  for (const json& miss : out["nearest_misses"]) {
    EXPECT_TRUE(miss["needed_bytes_per_device"].is_number_integer()) << miss;
    EXPECT_TRUE(miss["host_memory_limit_bytes"].is_number_integer()) << miss;
  }
}

// A batch of so many sequences that the search's cap on micro-batches makes them too large to fit
// says so; fixing a smaller micro-batch searches it (quickly: no work per micro-batch).
TEST_F(CliPlanTest, TheMicroBatchCapIsNamedWhereItLeavesNothing) {
  const std::vector<std::string> args = {"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1T", "--seq-len", "1"};
  const CliResult capped = RunShardsim(args);
  EXPECT_EQ(capped.exit_code, 3) << capped.err;
  EXPECT_NE(capped.out.find("at most 4096 micro-batches a replica a step"), std::string::npos) << capped.out;
  std::vector<std::string> fixed = args;
  fixed.insert(fixed.end(), {"--set", "micro_batch_size=1", "--json"});
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(fixed), &out));
  EXPECT_EQ(out["plans"][0]["plan"]["micro_batch_size"].get<int64_t>(), 1);
}

// A fixed schedule asks for pipeline stages: where the fixed axes leave no room for them, the
// error names the schedule (the axes alone would run); where the axes alone fail, the axes.
TEST_F(CliPlanTest, FixedScheduleWithoutRoomForStagesNamesTheSchedule) {
  const std::vector<std::string> base = {"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "1M", "--seq-len", "4096"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(with({"--set", "pipeline_schedule=1f1b", "--set", "mesh.data=8"}),
                           {"--set pipeline_schedule=1f1b", "mesh.pipeline > 1", "mesh.data=8", "hint: leave pipeline_schedule=1f1b out"}));
  EXPECT_TRUE(IsInputError(with({"--set", "virtual_stages=2", "--set", "mesh.tensor=8"}), {"--set virtual_stages=2", "mesh.tensor=8"}));
  const CliResult axes = with({"--set", "pipeline_schedule=1f1b", "--set", "mesh.tensor=3"});
  EXPECT_TRUE(IsInputError(axes, {"--set mesh.tensor=3", "no mesh"}));
  EXPECT_EQ(axes.err.find("pipeline_schedule"), std::string::npos) << axes.err;
  EXPECT_EQ(with({"--set", "pipeline_schedule=1f1b", "--set", "mesh.data=2"}).exit_code, 0);
  // From a plan file, the file's field is named.
  const TempDir dir;
  std::vector<std::string> from_file = base;
  from_file.insert(from_file.end(), {"--plan", dir.Write("p.json", R"({"pipeline_schedule": "1f1b", "mesh": {"data": 8}})")});
  EXPECT_TRUE(IsInputError(RunShardsim(from_file), {"p.json:/pipeline_schedule", "needs pipeline stages"}));
}

// Fixed fields that no plan rule admits on this cluster: one line naming the field and the rule
// (exit 2), not "nothing fits in memory"; the memory misses stay for plans the rules admit.
TEST_F(CliPlanTest, FixedFieldsNoRuleAdmitsNameTheField) {
  const CliResult r = RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "1M", "--seq-len", "4096",
                                   "--set", "micro_batch_size=3"});
  EXPECT_TRUE(IsInputError(r, {"/micro_batch_size", "no plan on dgx-h100:8 keeps it", "must divide", "valid:"}));
  const CliResult rounds = RunShardsim({"plan", "--model", "llama3-70b", "--cluster", "dgx-h100:64", "--global-batch-tokens", "4M", "--seq-len",
                                        "8192", "--set", "pipeline_rounds=3"});
  EXPECT_TRUE(IsInputError(rounds, {"/pipeline_rounds"}));
  // A fixed chunk count no schedule of any mesh runs: the rule, not memory.
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "1M", "--seq-len", "4096",
                                        "--set", "virtual_stages=3"}),
                           {"/virtual_stages", "refused", "valid:"}));
  // Where memory refuses the plans here and the rules refuse the fixed field at every larger size,
  // the search for a larger size says so.
  const CliResult larger = RunShardsim({"plan", "--model", "llama3-405b", "--cluster", "dgx-h100:64", "--global-batch-tokens", "1M", "--seq-len", "4096",
                                        "--set", "micro_batch_size=3", "--json"});
  EXPECT_EQ(larger.exit_code, 3) << larger.err;
  EXPECT_NE(json::parse(larger.out)["smallest_fit"]["why_not"].get<std::string>().find("the plan rules refused every plan for the fixed micro_batch_size"),
            std::string::npos)
      << larger.out;
  // A memory shortfall is still one: the rules admit the plans, memory refuses them.
  EXPECT_EQ(RunShardsim({"plan", "--model", "llama3-405b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "4M", "--seq-len", "8192", "--set",
                         "micro_batch_size=1"}).exit_code,
            3);
}

// The demo's text fits 120 columns; --wide may not, and spells the layout out.
TEST_F(CliPlanTest, TextFitsOneHundredTwentyColumns) {
  const std::vector<std::string> demo = {"plan", "--model", "llama3-70b", "--cluster", "dgx-h100:64", "--global-batch-tokens", "4M", "--seq-len", "8192",
                                         "--train-tokens", "15T", "--price-per-device-hour", "2.5", "--export", "megatron-core"};
  const CliResult r = RunShardsim(demo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t longest = 0, lines = 0;
  for (size_t at = 0, end; at < r.out.size(); at = end + 1) {
    end = r.out.find('\n', at);
    if (end == std::string::npos) end = r.out.size();
    longest = std::max(longest, end - at);
    ++lines;
  }
  EXPECT_LE(longest, 120u) << r.out;
  EXPECT_GT(lines, 30u);
  EXPECT_NE(r.out.find("Training on 15 T tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--tensor-model-parallel-size"), std::string::npos) << r.out;
  std::vector<std::string> wide = demo;
  wide.push_back("--wide");
  const CliResult w = RunShardsim(wide);
  EXPECT_NE(w.out.find("layout (outer>inner)"), std::string::npos);
}

// --json keeps the export of every plan, and the whole run when --train-tokens is given.
TEST_F(CliPlanTest, JsonHasTheExportAndTheTrainingRun) {
  const CliResult r = RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "64K", "--seq-len", "2048",
                                       "--framework", "torchtitan", "--train-tokens", "1T", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["framework"], "torchtitan");
  for (const json& p : out["plans"]) {
    EXPECT_EQ(p["export"]["target"], "torchtitan");
    EXPECT_TRUE(p["export"]["not_expressed"].empty());
    // torchtitan compiles its loss on request: the search asks for the fused one, and exports it.
    EXPECT_EQ(p["plan"]["cross_entropy"], "fused");
    EXPECT_NE(p["export"]["text"].get<std::string>().find("\"loss\""), std::string::npos);
    EXPECT_FALSE(p["export"]["text"].get<std::string>().empty());
    const double seconds = p["training_run"]["seconds"].get<double>();
    EXPECT_NEAR(seconds, 1e12 / p["tokens_per_s"].get<double>(), 1e-6 * seconds);
  }
}

// A small search (8 GPUs, one node) keeps the two simulations quick.
const std::vector<std::string> kSmallPlan = {"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "64K", "--seq-len", "2048"};

std::vector<std::string> SmallPlan(std::vector<std::string> more) {
  std::vector<std::string> args = kSmallPlan;
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST_F(CliPlanTest, RefineRanksTheTopPlansBySimulation) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(SmallPlan({"--refine", "2", "--json"})), &out));
  ASSERT_TRUE(out.contains("refined"));
  const json& refined = out["refined"];
  ASSERT_EQ(refined.size(), 2u);
  std::vector<int64_t> ranks;
  for (const json& r : refined) {
    const double estimated = r["estimated_step_time_s"].get<double>(), simulated = r["simulated_step_time_s"].get<double>();
    EXPECT_GT(estimated, 0);
    EXPECT_GT(simulated, 0);
    EXPECT_NEAR(r["difference"].get<double>(), simulated / estimated - 1, 1e-9);
    EXPECT_EQ(r["why"].get<std::string>().empty(), std::abs(simulated / estimated - 1) <= 0.02) << r["why"];
    EXPECT_TRUE(r["contention"].is_array());
    EXPECT_TRUE(r["plan"].contains("mesh"));
    ranks.push_back(r["rank_by_estimate"].get<int64_t>());
    // The estimate shown is the search's estimate of the same plan.
    const json& ranked = out["plans"][static_cast<size_t>(ranks.back() - 1)];
    EXPECT_EQ(r["plan"], ranked["plan"]);
    EXPECT_DOUBLE_EQ(estimated, ranked["step_time_s"].get<double>());
  }
  EXPECT_LE(refined[0]["simulated_step_time_s"].get<double>(), refined[1]["simulated_step_time_s"].get<double>());
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(out["refine_failed"].empty());

  json plain;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(SmallPlan({"--json"})), &plain));
  EXPECT_FALSE(plain.contains("refined"));
}

// The simulations' limits bound --refine's runs (each refused plan is listed with the limit it
// passed) and need --refine.
TEST_F(CliPlanTest, RefineTakesTheSimulationLimits) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(SmallPlan({"--refine", "1", "--max-seconds", "0.001", "--json"})), &out));
  ASSERT_EQ(out["refine_failed"].size(), 1u) << out.dump();
  EXPECT_NE(out["refine_failed"][0]["error"].get<std::string>().find("--max-seconds"), std::string::npos) << out.dump();
  const CliResult alone = RunShardsim(SmallPlan({"--max-seconds", "5"}));
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("--max-seconds: needs --refine"), std::string::npos) << alone.err;
}

TEST_F(CliPlanTest, RefineTableHasOneRowPerPlan) {
  const CliResult r = RunShardsim(SmallPlan({"--refine", "2"}));
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.err;
  const size_t section = r.out.find("Refined by simulation (SimGrid)");
  ASSERT_NE(section, std::string::npos) << r.out;
  // The table: a header, a rule, then the rows, each starting with its rank by simulation.
  std::istringstream lines(r.out.substr(section));
  std::string line;
  std::vector<std::string> table;
  std::getline(lines, line);  // the section's title
  while (std::getline(lines, line) && !line.empty()) table.push_back(line);
  ASSERT_GE(table.size(), 4u) << r.out.substr(section);
  EXPECT_NE(table[0].find("simulated"), std::string::npos);
  EXPECT_EQ(table[1].find("  ---"), 0u);
  EXPECT_EQ(table[2].rfind("  1 ", 0), 0u) << table[2];
  EXPECT_EQ(table[3].rfind("  2 ", 0), 0u) << table[3];
  for (size_t i = 0; i < 4; ++i) EXPECT_LE(table[i].size(), 120u) << table[i];
  EXPECT_NE(r.out.find("simulations in", section), std::string::npos);
  EXPECT_NE(r.out.find(" wall", section), std::string::npos);
}

TEST_F(CliPlanTest, RefineOutOfRangeIsRejected) {
  EXPECT_TRUE(IsInputError(RunShardsim(SmallPlan({"--refine", "0"})), {"--refine"}));
  EXPECT_TRUE(IsInputError(RunShardsim(SmallPlan({"--refine", "1000"})), {"--refine"}));
}

}  // namespace
}  // namespace shardsim::cli_test
