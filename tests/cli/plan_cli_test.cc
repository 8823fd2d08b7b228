// `shardsim plan` end to end: ranked plans in the report format, which feed back into estimate.
#include <fstream>
#include <iterator>

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

}  // namespace
}  // namespace shardsim::cli_test
