// Command-line mistakes a user makes first, each one line naming what is wrong: a mistyped
// option with the closest the subcommand has, a mistyped name before a missing plan, a dtype the
// chip cannot train in with the ones it can, token counts whose suffixes differ between flags.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// What CLI11 refuses is said in the project's form: the flag, what is wrong, what is valid.
TEST(CommandLineErrorsTest, CommandLineRefusalsSayWhatIsValid) {
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8b", "--seq-len", "4k"}), {"--seq-len: '4k' is not a whole number", "valid: 1 to 1073741824"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--top", "0"}), {"--top: '0' is out of range", "valid: 1 to"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--global-batch-tokens", "1M", "--global-batch-tokens", "2M"}),
                           {"--global-batch-tokens: given 2 times", "valid: once"}));
  EXPECT_TRUE(IsInputError(RunShardsim({}), {"no subcommand given", "valid: presets, describe", "shardsim --help"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"presets", "extra"}), {"presets: unexpected argument 'extra'", "valid: the options --help, --json"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--seq-len"}), {"--seq-len: needs a value", "valid: a whole number from 1 to 1073741824"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--device", "cud"}), {"--device: 'cud' is not one of them", "'cuda'", "valid: cpu, cuda"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--checkpoint-every", "1"}), {"--checkpoint-every: needs --checkpoint", "valid:"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--dump-program", "--train-tokens", "1T"}), {"--dump-program: not with --train-tokens", "valid:"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--plot", "p.png"}), {"--plot", "'p.png' is named .png but is written as svg", "valid: a path ending in .svg"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--seq-len", "1e3"}), {"--seq-len: '1e3' is not a whole number", "valid: 1 to"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--steps", "abc"}), {"--steps: 'abc' is not a whole number"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--checkpoint", "x", "--checkpoint-every", "-1"}), {"--checkpoint-every", "valid: 0 to 2147483647"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"--bogus", "estimate"}), {"unknown option '--bogus'", "valid: a subcommand first"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "-m", "x"}), {"estimate: unknown option '-m'", "valid: --help, --model"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model"}), {"--model: needs a value", "valid: model: a preset"}));
  // validate takes run's two launch overrides its refusals name.
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--skip-memory-check", "--many-ranks"}), {"validate: needs"}));
}

TEST_F(CliTest, FilesThatAreNotWhatTheFlagTakesAreNamedAsSuch) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", PathOf("none/config.json")}), {"file not found", "valid: a preset (", "Hugging Face config.json"}));
  const std::string hf = WriteJson("config.json", {{"num_hidden_layers", 2}, {"hidden_size", 64}});
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", hf}), {"/model_type: missing", "valid: llama, mistral"}));
  const std::string model = PathOf("model.json");
  ASSERT_EQ(RunShardsim({"describe", "--model", "tiny-dense", "--write-model", model}).exit_code, 0);
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", model}), {"/chip: missing required key 'chip': this is a model file", "valid: a cluster JSON"}));
  // A preset's name on a topology edited to another size.
  const std::string cluster = PathOf("cluster.json");
  ASSERT_EQ(RunShardsim({"describe", "--cluster", "dgx-h100:64", "--write-cluster", cluster}).exit_code, 0);
  nlohmann::json edited = nlohmann::json::parse(std::ifstream(cluster));
  edited["topology"]["devices_per_node"] = 3;
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", WriteJson("edited.json", edited)}),
                           {"/name: 'dgx-h100:64' names 64 devices but the file's topology holds 24", "rename"}));
  EXPECT_EQ(RunShardsim({"describe", "--cluster", cluster}).exit_code, 0);
  const std::string hosts = Write("hosts.txt", "localhost slots=2 max_slots=1\n");
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--set", "mesh.data=2", "--set", "global_batch_size=8", "--set", "seq_len=256",
                                        "--hostfile", hosts}),
                           {"hosts.txt:1: max_slots=1 is below slots=2", "valid: max_slots at least slots"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--set", "mesh.data=2", "--set", "global_batch_size=8", "--set", "seq_len=256",
                                        "--corpus", dir_.path().string()}),
                           {"--corpus", "is a directory", "valid: a text file"}));
}

// A dump of every pipeline task is bounded (docs/cli.md, Limits); the estimate itself is not.
TEST(CommandLineErrorsTest, AStepProgramDumpIsBoundedBeforeItIsMade) {
  const std::vector<std::string> plan = {"--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.pipeline=2", "--set", "mesh.data=4",
                                         "--set", "global_batch_size=4000000", "--set", "seq_len=1"};
  std::vector<std::string> dump = {"estimate", "--dump-program", "--json"};
  dump.insert(dump.end(), plan.begin(), plan.end());
  EXPECT_TRUE(IsInputError(RunShardsim(dump), {"--dump-program: the program has 6 M pipeline tasks", "2 stage(s) x 1000000 micro-batches", "valid: at most 1.049 M"}));
  std::vector<std::string> estimate = {"estimate"};
  estimate.insert(estimate.end(), plan.begin(), plan.end());
  const CliResult r = RunShardsim(estimate);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace shardsim::cli_test
