// Command-line mistakes a user makes first, each one line naming what is wrong: a mistyped
// option with the closest the subcommand has, a mistyped name before a missing plan, a dtype the
// chip cannot train in with the ones it can, token counts whose suffixes differ between flags.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

TEST(CommandLineErrorsTest, AMistypedOptionNamesTheClosest) {
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--modle", "llama3-8b", "--cluster", "dgx-h100:8"}),
                           {"estimate: unknown option '--modle'", "did you mean '--model'?", "valid: --help, --model, --cluster", "shardsim estimate --help"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--jsn"}),
                           {"plan: unknown option '--jsn'", "'--json'", "shardsim plan --help"}));
  // A stray word, not an option: CLI11's own words, with the subcommand's help.
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "foo", "--model", "llama3-8b"}), {"foo", "shardsim estimate --help"}));
  // A negative value is an option's value, not an unknown option: what is left over is named.
  const CliResult stray = RunShardsim({"run", "--model", "tiny-dense", "--lr", "-inf", "--steps", "3", "foo"});
  EXPECT_TRUE(IsInputError(stray, {"foo", "shardsim run --help"}));
  EXPECT_EQ(stray.err.find("-inf"), std::string::npos) << stray.err;
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--lr", "-1", "--stesp", "3"}), {"run: unknown option '--stesp'", "'--steps'"}));
}

TEST(CommandLineErrorsTest, AMistypedNameIsSaidBeforeAMissingPlan) {
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8B", "--cluster", "dgx-h100:8"}), {"--model", "did you mean 'llama3-8b'?"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"simulate", "--model", "llama3-8b", "--cluster", "dgxh100:8"}), {"--cluster", "dgx-h100"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8"}), {"needs a plan"}));
}

TEST(CommandLineErrorsTest, ADtypeTheChipLacksListsTheTrainingDtypesItHas) {
  const CliResult r = RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "tpu-v5p:2x2x2", "--set", "mesh.data=8", "--set",
                                   "global_batch_size=8", "--set", "seq_len=4096", "--set", "dtype=fp16"});
  EXPECT_TRUE(IsInputError(r, {"/dtype", "no peak on TPU v5p", "valid: bf16 (hint"}));
  EXPECT_EQ(r.err.find("int8"), std::string::npos) << "int8 is a peak of the chip's, not a plan dtype: " << r.err;
}

TEST(CommandLineErrorsTest, TooFewTrainingTokensAreCountedExactly) {
  // 1M as a budget is 10^6 tokens; 1M per step is 2^20: the message gives both counts whole.
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--set", "mesh.data=2", "--set", "mesh.tensor=8",
                                        "--global-batch-tokens", "1M", "--seq-len", "4096", "--train-tokens", "1M"}),
                           {"--train-tokens", "1000000 tokens is less than one step's 1048576", "10^6", "2^20"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--set", "global_batch_size=8",
                                        "--set", "seq_len=4096", "--train-tokens", "0.5"}),
                           {"0.5 tokens is less than one step's 32768"}));
}

}  // namespace
}  // namespace shardsim::cli_test
