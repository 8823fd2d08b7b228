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
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-70b", "--cluster", "tpu-v5p:16x16x24", "--global-batch-tokens", "16M",
                                        "--seq-len", "8192"}),
                           {"no mesh", "2048 sequences"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1M", "--seq-len",
                                        "4096", "--set", "mesh.data=2"}),
                           {"not expected", "--set"}));
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
