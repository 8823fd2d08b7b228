// --global-batch-tokens and --seq-len on the subcommands that read a plan (estimate, simulate,
// run, validate): the same plan as the equivalent --set, winning over the plan file, and one-line
// errors for batches that are not whole sequences or that contradict an explicit --set.
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

class BatchFlagsCliTest : public CliTest {
 protected:
  // `estimate` of llama3-8b on 16 H100s (data 2, tensor 8) with `extra` arguments, as JSON.
  static std::vector<std::string> Estimate(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--set", "mesh.data=2", "--set", "mesh.tensor=8"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
};

TEST_F(BatchFlagsCliTest, EstimateEqualsTheEquivalentSet) {
  json by_flags, by_set;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(Estimate({"--global-batch-tokens", "1M", "--seq-len", "4096", "--json"})), &by_flags));
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(Estimate({"--set", "global_batch_size=256", "--set", "seq_len=4096", "--json"})), &by_set));
  EXPECT_EQ(by_flags, by_set);
  EXPECT_EQ(by_flags["plan"]["global_batch_size"], 256);  // 1M = 1024^2 tokens of 4096
  // Decimal suffixes as plan's: 4MB = 4,000,000 tokens = 500 sequences of 8000.
  json decimal;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(Estimate({"--global-batch-tokens", "4MB", "--seq-len", "8000", "--json"})), &decimal));
  EXPECT_EQ(decimal["plan"]["global_batch_size"], 500);
  EXPECT_EQ(decimal["plan"]["seq_len"], 8000);
  // An --set that agrees with the flags is no conflict.
  json agreeing;
  ASSERT_TRUE(IsJsonSuccess(
      RunShardsim(Estimate({"--set", "seq_len=4096", "--set", "global_batch_size=256", "--global-batch-tokens", "1M", "--seq-len", "4096", "--json"})),
      &agreeing));
  EXPECT_EQ(agreeing, by_set);
}

TEST_F(BatchFlagsCliTest, FlagsWinOverThePlanFile) {
  const std::string plan = WriteJson("p.json", {{"mesh", {{"data", 2}, {"tensor", 8}}}, {"global_batch_size", 64}, {"seq_len", 2048}});
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--plan", plan, "--global-batch-tokens",
                                         "512K", "--seq-len", "4096", "--json"}),
                            &out));
  EXPECT_EQ(out["plan"]["seq_len"], 4096);
  EXPECT_EQ(out["plan"]["global_batch_size"], 128);
  // --global-batch-tokens alone counts sequences of the plan's seq_len; --seq-len alone keeps its batch.
  ASSERT_TRUE(IsJsonSuccess(
      RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--plan", plan, "--global-batch-tokens", "256K", "--json"}), &out));
  EXPECT_EQ(out["plan"]["seq_len"], 2048);
  EXPECT_EQ(out["plan"]["global_batch_size"], 128);
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--plan", plan, "--seq-len", "1024", "--json"}),
                            &out));
  EXPECT_EQ(out["plan"]["seq_len"], 1024);
  EXPECT_EQ(out["plan"]["global_batch_size"], 64);
}

TEST_F(BatchFlagsCliTest, BatchesThatAreNotWholeSequencesAreOneLine) {
  EXPECT_TRUE(IsInputError(RunShardsim(Estimate({"--global-batch-tokens", "1000000", "--seq-len", "4096"})),
                           {"--global-batch-tokens", "not a whole number of 4096-token sequences", "999424", "1003520"}));
  EXPECT_TRUE(IsInputError(RunShardsim(Estimate({"--global-batch-tokens", "1000", "--seq-len", "4096"})), {"--global-batch-tokens", "4096"}));
  EXPECT_TRUE(IsInputError(RunShardsim(Estimate({"--global-batch-tokens", "1M"})), {"--global-batch-tokens", "--seq-len"}));
  for (const char* bad : {"4X", "0", "-1", "1.5M", "nan", "2000T"}) {
    EXPECT_TRUE(IsInputError(RunShardsim(Estimate({"--global-batch-tokens", bad, "--seq-len", "4096"})), {"--global-batch-tokens"})) << bad;
  }
  for (const char* bad : {"0", "-5", "abc", "2147483648"}) {
    EXPECT_TRUE(IsInputError(RunShardsim(Estimate({"--seq-len", bad, "--set", "global_batch_size=256"})), {"--seq-len"})) << bad;
  }
}

TEST_F(BatchFlagsCliTest, ConflictWithAnExplicitSetIsOneLine) {
  EXPECT_TRUE(IsInputError(RunShardsim(Estimate({"--set", "seq_len=2048", "--set", "global_batch_size=256", "--seq-len", "4096"})),
                           {"--seq-len", "4096 conflicts with --set seq_len=2048"}));
  EXPECT_TRUE(IsInputError(RunShardsim(Estimate({"--set", "global_batch_size=64", "--global-batch-tokens", "1M", "--seq-len", "4096"})),
                           {"--global-batch-tokens", "256 sequences", "--set global_batch_size=64"}));
}

TEST_F(BatchFlagsCliTest, SimulateAndValidateTakeTheSameFlags) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"simulate", "--model", "tiny-dense", "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--global-batch-tokens",
                                         "4K", "--seq-len", "256", "--json"}),
                            &out));
  EXPECT_EQ(out["plan"]["global_batch_size"], 16);
  EXPECT_EQ(out["plan"]["seq_len"], 256);
  EXPECT_TRUE(IsInputError(RunShardsim({"simulate", "--model", "tiny-dense", "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--global-batch-tokens",
                                        "4000", "--seq-len", "256"}),
                           {"--global-batch-tokens", "256-token sequences"}));
  // validate checks the flags before it calibrates or launches anything.
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-dense", "--set", "seq_len=128", "--seq-len", "256", "--global-batch-tokens", "1K"}),
                           {"--seq-len", "conflicts"}));
}

// run hands the flags to shardsim-runtime as the plan fields they fix.
TEST_F(BatchFlagsCliTest, RunTrainsTheBatchTheFlagsGive) {
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"run", "--model", "tiny-dense", "--set", "mesh.data=2", "--global-batch-tokens", "256", "--seq-len", "64",
                                         "--steps", "1", "--timeout", "120", "--json"}),
                            &report));
  EXPECT_EQ(report["plan"]["global_batch_size"], 4);
  EXPECT_EQ(report["plan"]["seq_len"], 64);
  EXPECT_EQ(report["tokens_per_step"], 256);
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--set", "mesh.data=2", "--global-batch-tokens", "250", "--seq-len", "64"}),
                           {"--global-batch-tokens", "64-token sequences"}));
}

}  // namespace
}  // namespace shardsim::cli_test
