// Bad input, end to end: every case must exit with status 2 (never a crash, abort or hang) and
// print exactly one `shardsim: error: ` line that names the input and field, what is valid, and
// a hint. Each test checks a few key words of that line, not the whole line.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

// A small, valid LLaMA-style model JSON that tests break one field at a time.
json SmallModel() {
  return {{"name", "test-model"}, {"num_layers", 4},         {"hidden_size", 256}, {"num_heads", 8},
          {"num_kv_heads", 4},    {"ffn_hidden_size", 768}, {"vocab_size", 256},  {"max_seq_len", 1024}};
}

// A valid plan for 8 devices.
json SmallPlan() { return {{"mesh", {{"data", 8}}}, {"global_batch_size", 64}, {"seq_len", 4096}}; }

class CliErrorsTest : public CliTest {
 protected:
  CliResult DescribeModel(const json& model) { return RunShardsim({"describe", "--model", WriteJson("model.json", model)}); }

  CliResult DescribePlan(const std::string& model, const std::string& cluster, const json& plan) {
    return RunShardsim({"describe", "--model", model, "--cluster", cluster, "--plan", WriteJson("plan.json", plan)});
  }

  // The cluster JSON shardsim writes for `preset`.
  json WrittenCluster(const std::string& preset) {
    const std::string path = PathOf("written_cluster.json");
    const CliResult r = RunShardsim({"describe", "--cluster", preset, "--write-cluster", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(std::ifstream(path));
  }
};

// --- Malformed JSON: the message gives file:LINE:COL of the offending character. ---

TEST_F(CliErrorsTest, MalformedPlanJsonGivesLineAndColumn) {
  const std::string plan = Write("plan.json",
                                 "{\n"
                                 "  \"mesh\": {\"data\": 8},\n"
                                 "  \"global_batch_size\": 64 ]\n"  // ']' is column 27
                                 "}\n");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", plan}),
                           {plan + ":3:27", "malformed JSON"}));
}

TEST_F(CliErrorsTest, MalformedModelJsonGivesLineAndColumn) {
  const std::string model = Write("model.json",
                                  "{\n"
                                  "  \"name\": \"x\",\n"
                                  "  \"num_layers\": 32,,\n"  // second ',' is column 20
                                  "}\n");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", model}), {model + ":3:20", "malformed JSON"}));
}

TEST_F(CliErrorsTest, MalformedClusterJsonGivesLineAndColumn) {
  const std::string cluster = Write("cluster.json",
                                    "{\n"
                                    "  \"name\": \"mine\",\n"
                                    "  \"system\": = \"custom\"\n"  // '=' is column 13
                                    "}\n");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", cluster}), {cluster + ":3:13", "malformed JSON"}));
}

// --- Unknown keys: named, with the closest valid key suggested. ---

TEST_F(CliErrorsTest, UnknownModelKeySuggestsClosest) {
  json model = SmallModel();
  model["tied_embedding"] = true;
  EXPECT_TRUE(IsInputError(DescribeModel(model), {"/tied_embedding", "unknown key 'tied_embedding'", "'tied_embeddings'"}));
}

TEST_F(CliErrorsTest, MisspelledRequiredModelKeyIsNamed) {
  // The typo replaces a required key: the message must still name the unknown key `num_layer`
  // (not only report `num_layers` as missing) and suggest `num_layers`.
  json model = SmallModel();
  model.erase("num_layers");
  model["num_layer"] = 4;
  EXPECT_TRUE(IsInputError(DescribeModel(model), {"'num_layer'", "'num_layers'"}));
}

TEST_F(CliErrorsTest, UnknownClusterKeySuggestsClosest) {
  json cluster = WrittenCluster("dgx-h100:8");
  cluster["topology"]["fabrik"] = cluster["topology"]["fabric"];
  cluster["topology"].erase("fabric");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", WriteJson("cluster.json", cluster)}),
                           {"/topology/fabrik", "unknown key 'fabrik'", "'fabric'"}));
}

TEST_F(CliErrorsTest, UnknownPlanMeshAxisSuggestsClosest) {
  const json plan = {{"mesh", {{"data", 2}, {"tensr", 4}}}, {"global_batch_size", 64}, {"seq_len", 4096}};
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"/mesh/tensr", "unknown key 'tensr'", "'tensor'"}));
}

TEST_F(CliErrorsTest, UnknownPlanKeySuggestsClosest) {
  json plan = SmallPlan();
  plan["micro_batch"] = 2;
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"unknown key 'micro_batch'", "'micro_batch_size'"}));
}

// --- Wrong types. ---

TEST_F(CliErrorsTest, StringWhereIntegerExpected) {
  json model = SmallModel();
  model["num_layers"] = "4";
  EXPECT_TRUE(IsInputError(DescribeModel(model), {"/num_layers", "expected an integer", "string"}));
}

TEST_F(CliErrorsTest, IntegerWhereBoolExpected) {
  json model = SmallModel();
  model["tied_embeddings"] = 1;
  EXPECT_TRUE(IsInputError(DescribeModel(model), {"/tied_embeddings", "true", "false"}));
}

// --- Zero and negative sizes. ---

TEST_F(CliErrorsTest, ZeroNumLayers) {
  json model = SmallModel();
  model["num_layers"] = 0;
  EXPECT_TRUE(IsInputError(DescribeModel(model), {"/num_layers", "num_layers=0", "positive"}));
}

TEST_F(CliErrorsTest, NegativeHiddenSize) {
  json model = SmallModel();
  model["hidden_size"] = -5;
  EXPECT_TRUE(IsInputError(DescribeModel(model), {"/hidden_size", "hidden_size=-5", "positive"}));
}

TEST_F(CliErrorsTest, ZeroMeshAxis) {
  json plan = SmallPlan();
  plan["mesh"]["data"] = 0;
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"/mesh/data", "data=0", "positive"}));
}

// --- Absurd sizes and overflow. ---

TEST_F(CliErrorsTest, HugeFloatHiddenSize) {
  json model = SmallModel();
  model["hidden_size"] = 1e30;
  EXPECT_TRUE(IsInputError(DescribeModel(model), {"/hidden_size", "whole number"}));
}

TEST_F(CliErrorsTest, NumLayersBeyondUint64) {
  std::string text = SmallModel().dump();
  const std::string from = "\"num_layers\":4";
  text.replace(text.find(from), from.size(), "\"num_layers\":99999999999999999999");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", Write("model.json", text)}), {"/num_layers"}));
}

TEST_F(CliErrorsTest, ParamCountOverflowsInt64) {
  // Every field within its own limit, but layers x width^2 is far beyond 2^63.
  json model = SmallModel();
  model["num_layers"] = 100000;
  model["hidden_size"] = 16777216;
  model["num_heads"] = 65536;
  model["num_kv_heads"] = 65536;
  model["ffn_hidden_size"] = 16777216;
  model["vocab_size"] = 67108864;
  EXPECT_TRUE(IsInputError(DescribeModel(model), {PathOf("model.json"), "overflows 64 bits", "size field"}));
}

TEST_F(CliErrorsTest, HfConfigFieldBeyondLimitIsNamed) {
  const json config = {{"model_type", "llama"},   {"num_hidden_layers", 1 << 30}, {"hidden_size", 1 << 30},
                       {"num_attention_heads", 1}, {"intermediate_size", 1 << 30}, {"vocab_size", 1 << 30}};
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", WriteJson("huge/config.json", config)}),
                           {"num_hidden_layers", "too large", "100000"}));
}

// Every field within its limit, but layers x width x MLP width overflows 64 bits.
TEST_F(CliErrorsTest, HfConfigParamCountOverflowsInt64) {
  const json config = {{"model_type", "llama"},   {"num_hidden_layers", 100000}, {"hidden_size", 1 << 24},
                       {"num_attention_heads", 256}, {"intermediate_size", 1 << 24}, {"vocab_size", 1000}};
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", WriteJson("huge/config.json", config)}), {"overflows 64 bits"}));
}

// --- Unknown presets, with suggestions. ---

TEST_F(CliErrorsTest, UnknownModelPresetSuggestsClosest) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-7b"}), {"--model", "'llama3-7b'", "did you mean 'llama3-8b'"}));
}

TEST_F(CliErrorsTest, UnknownClusterPresetSuggestsClosest) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h10:8"}), {"--cluster", "'dgx-h10'", "did you mean 'dgx-h100'"}));
}

// --- Malformed cluster strings. ---

TEST_F(CliErrorsTest, ClusterNotWholeNodes) {
  // 999 GPUs is not a whole number of 8-GPU nodes; the nearest sizes are 992 and 1000.
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h100:999"}), {"whole", "nodes", "992", "1000"}));
}

TEST_F(CliErrorsTest, ClusterWithoutSize) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h100"}), {"--cluster dgx-h100", "GPU count", "dgx-h100:"}));
}

TEST_F(CliErrorsTest, TorusShapeOfWrongRank) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "tpu-v5p:8x8"}), {"3 axes", "AxBxC", "tpu-v5p:8x8x8"}));
}

TEST_F(CliErrorsTest, TorusShapeNotASlice) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "tpu-v5p:6x6x6"}), {"not a slice shape", "multiple of 4"}));
}

TEST_F(CliErrorsTest, TorusSliceTooLarge) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "tpu-v5e:32x32"}), {"1024 chips", "256", "slices="}));
}

TEST_F(CliErrorsTest, ClusterUnknownOptionSuggestsClosest) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h100:64,oversub=2"}),
                           {"unknown option 'oversub'", "'oversubscription'", "fabric"}));
}

TEST_F(CliErrorsTest, ClusterBadOptionValue) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h100:64,oversubscription=0.5"}),
                           {"oversubscription", "0.5", ">= 1"}));
}

TEST_F(CliErrorsTest, ClusterNonNumericSize) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h100:abc"}), {"--cluster dgx-h100:abc", "'abc'", "whole number"}));
}

// --- Plans that do not fit the model or the cluster. ---

TEST_F(CliErrorsTest, MeshProductDiffersFromDeviceCount) {
  const json plan = {{"mesh", {{"data", 8}, {"tensor", 4}}}, {"global_batch_size", 64}, {"seq_len", 4096}};
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:64", plan), {"/mesh", "32 devices", "dgx-h100:64 has 64"}));
}

TEST_F(CliErrorsTest, TensorMustDivideHeads) {
  const json plan = {{"mesh", {{"data", 8}, {"tensor", 3}}}, {"global_batch_size", 64}, {"seq_len", 4096}};
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:24", plan), {"/mesh/tensor", "tensor=3", "1, 2, 4, 8"}));
}

TEST_F(CliErrorsTest, PipelineMustNotExceedLayers) {
  const json plan = {{"mesh", {{"data", 8}, {"pipeline", 40}}}, {"global_batch_size", 64}, {"seq_len", 4096}};
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:320", plan), {"/mesh/pipeline", "pipeline=40", "num_layers=32", "1 to 32"}));
}

TEST_F(CliErrorsTest, InterleavedChunksMustEachHoldALayer) {
  const json plan = {{"mesh", {{"pipeline", 8}}}, {"global_batch_size", 64}, {"seq_len", 4096},
                     {"pipeline_schedule", "interleaved-1f1b"}, {"virtual_stages", 5}};
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"/virtual_stages", "40 model chunks", "32 layers"}));
}

TEST_F(CliErrorsTest, BadPipelineLayoutsNameTheProblem) {
  json plan = {{"mesh", {{"data", 2}, {"pipeline", 4}}}, {"global_batch_size", 64}, {"seq_len", 4096}, {"pipeline_layout", "Et*8|t*8|t*16L"}};
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"/pipeline_layout", "3 chunks", "4 model chunks"}));
  plan["pipeline_layout"] = "Et*8|t*8|t*8|t*7L";
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"/pipeline_layout", "31 decoder layers", "has 32"}));
  plan["pipeline_layout"] = "Et*8|t*8|t*8|t*7mL";
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"/pipeline_layout", "multi-token-prediction", "has none"}));
  plan["pipeline_layout"] = "Et*8|t*8|t*8|t*8L";
  plan["pipeline_schedule"] = "zb-v";
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"/pipeline_schedule", "unknown pipeline schedule", "zbv"}));
}

TEST_F(CliErrorsTest, ExpertMustDivideExperts) {
  const json plan = {{"mesh", {{"data", 8}, {"expert", 3}}}, {"global_batch_size", 48}, {"seq_len", 4096}};
  EXPECT_TRUE(IsInputError(DescribePlan("mixtral-8x7b", "dgx-h100:24", plan),
                           {"/mesh/expert", "expert=3", "num_experts=8", "1, 2, 4, 8"}));
}

TEST_F(CliErrorsTest, ExpertAxisOnDenseModel) {
  const json plan = {{"mesh", {{"data", 4}, {"expert", 2}}}, {"global_batch_size", 64}, {"seq_len", 4096}};
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"/mesh/expert", "mixture-of-experts", "dense"}));
}

TEST_F(CliErrorsTest, InterleavedScheduleNeedsVirtualStages) {
  const json plan = {{"mesh", {{"data", 2}, {"pipeline", 4}}}, {"global_batch_size", 16}, {"seq_len", 4096},
                     {"pipeline_schedule", "interleaved-1f1b"}, {"virtual_stages", 1}};
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"/virtual_stages", "interleaved-1f1b", ">= 2"}));
}

TEST_F(CliErrorsTest, GlobalBatchNotDivisibleByData) {
  json plan = SmallPlan();
  plan["global_batch_size"] = 12;
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan),
                           {"/global_batch_size", "global_batch_size=12", "multiple of 8"}));
}

TEST_F(CliErrorsTest, TokensPerStepOverflowIsRejected) {
  // Each field is within its own limit (batch <= 2^40, seq_len <= 2^30) but batch x seq_len
  // tokens per step is 2^70: that must be an input error, not a silently wrapped count.
  const json plan = {{"mesh", {{"data", 8}}}, {"global_batch_size", int64_t{1} << 40}, {"seq_len", int64_t{1} << 30}};
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", plan), {"plan.json", "global_batch_size", "absurdly large"}));
}

TEST_F(CliErrorsTest, PlanNotAnObject) {
  EXPECT_TRUE(IsInputError(DescribePlan("llama3-8b", "dgx-h100:8", json::array({1, 2})), {"plan.json", "object"}));
}

// --- --set overrides. ---

TEST_F(CliErrorsTest, SetUnknownKeySuggestsClosest) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.tensr=2"}),
                           {"--set mesh.tensr=2", "'mesh.tensr'", "did you mean 'mesh.tensor'"}));
}

TEST_F(CliErrorsTest, SetValueOfWrongType) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.tensor=abc",
                                        "--set", "global_batch_size=64", "--set", "seq_len=4096"}),
                           {"/mesh/tensor", "expected an integer", "abc"}));
}

TEST_F(CliErrorsTest, SetWithoutEquals) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.tensor"}),
                           {"--set mesh.tensor", "key=value"}));
}

// --- Missing companions and unwritable outputs. ---

TEST_F(CliErrorsTest, NothingToDescribe) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe"}), {"nothing to describe", "--model", "--cluster"}));
}

TEST_F(CliErrorsTest, PlanWithoutCluster) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--set", "mesh.data=8"}), {"--set", "--cluster"}));
}

TEST_F(CliErrorsTest, WriteModelIntoMissingFolder) {
  const std::string target = PathOf("no/such/folder/model.json");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--write-model", target}),
                           {"--write-model", target, "cannot be written"}));
}

// --- Numbers out of double range: one line naming the file, the field and its line. ---

// `text` with the first occurrence of `from` replaced by `to`.
std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST_F(CliErrorsTest, NumberOutOfRangeInModelNamesTheField) {
  const std::string model = Write("model.json", Replace(SmallModel().dump(2), "\"hidden_size\": 256", "\"hidden_size\": 1e999"));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", model}),
                           {model + ":/hidden_size", "number 1e999", "line ", "out of range", "finite"}));
}

TEST_F(CliErrorsTest, NumberOutOfRangeInPlanNamesTheField) {
  const std::string plan = Write("plan.json", Replace(SmallPlan().dump(2), "\"data\": 8", "\"data\": -1e999"));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", plan}),
                           {plan + ":/mesh/data", "number -1e999", "out of range"}));
  // plan reads the file through its own path (the search's constraints): the same error.
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", plan}),
                           {plan + ":/mesh/data", "number -1e999"}));
}

TEST_F(CliErrorsTest, NumberOutOfRangeInClusterNamesTheField) {
  std::string text = WrittenCluster("dgx-h100:8").dump(2);
  const size_t at = text.find("\"latency_s\": ");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, text.find(',', at) - at, "\"latency_s\": 1E+999");
  const std::string cluster = Write("cluster.json", text);
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", cluster}), {cluster + ":/links/", "/latency_s", "1E+999", "out of range"}));
}

TEST_F(CliErrorsTest, NumberOutOfRangeInHfConfigNamesTheField) {
  const std::string config = Write("llama/config.json", "{\"model_type\": \"llama\", \"rope_theta\": 1e999, \"hidden_size\": 4096}");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", config}), {config + ":/rope_theta", "1e999"}));
}

TEST_F(CliErrorsTest, DeeplyNestedAndDuplicatedJsonIsRefused) {
  const std::string deep = Write("deep.json", "{\"mesh\": " + std::string(10000, '[') + std::string(10000, ']') + "}");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", deep}),
                           {deep + ":1:", "nested deeper than"}));
  const std::string twice = Write("twice.json", "{\"mesh\": {\"data\": 8}, \"seq_len\": 4096, \"seq_len\": 2048}");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", twice}),
                           {twice + ":/seq_len", "appears twice"}));
}

// --- Outputs: every write checked, and a failed one leaves an existing file as it was. ---

std::string ReadFile(const std::string& path) {
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

bool IsCharacterDevice(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

TEST_F(CliErrorsTest, WriteModelToFullDeviceFails) {
  if (!IsCharacterDevice("/dev/full")) GTEST_SKIP() << "no /dev/full";
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--write-model", "/dev/full"}),
                           {"--write-model /dev/full", "cannot be written", "No space left on device"}));
  EXPECT_TRUE(IsCharacterDevice("/dev/full"));
}

TEST_F(CliErrorsTest, PlotToFullDeviceFails) {
  if (!IsCharacterDevice("/dev/full")) GTEST_SKIP() << "no /dev/full";
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "1M", "--seq-len",
                                        "4096", "--plot", "/dev/full"}),
                           {"--plot /dev/full", "No space left on device"}));
  EXPECT_TRUE(IsCharacterDevice("/dev/full"));
}

TEST_F(CliErrorsTest, PlotIntoMissingFolderFailsBeforeTheSearch) {
  const std::string target = PathOf("no/such/folder/pareto.svg");
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "1M", "--seq-len",
                                        "4096", "--plot", target}),
                           {"--plot " + target, "cannot be written"}));
}

TEST_F(CliErrorsTest, FailedWritesLeaveExistingFilesUntouched) {
  const std::string model_out = Write("model_out.json", "keep me\n");
  const std::string plan_out = Write("plan_out.json", "keep me too\n");
  const std::vector<std::string> plan_args = {"describe", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", WriteJson("plan.json", SmallPlan())};
  // One output cannot be written: none is, not even the one that could.
  std::vector<std::string> args = plan_args;
  args.insert(args.end(), {"--write-model", model_out, "--write-plan", PathOf("missing/plan.json")});
  EXPECT_TRUE(IsInputError(RunShardsim(args), {"--write-plan", "missing/plan.json", "cannot be written"}));
  EXPECT_EQ(ReadFile(model_out), "keep me\n");
  // A bad input: nothing is written.
  json bad = SmallModel();
  bad["num_layers"] = 0;
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", WriteJson("bad.json", bad), "--write-model", model_out}), {"/num_layers"}));
  EXPECT_EQ(ReadFile(model_out), "keep me\n");
  // A good write replaces the file whole, and leaves no temporary file beside it.
  args = plan_args;
  args.insert(args.end(), {"--write-plan", plan_out});
  const CliResult written = RunShardsim(args);
  EXPECT_EQ(written.exit_code, 0) << written.err;
  EXPECT_EQ(json::parse(ReadFile(plan_out))["seq_len"], 4096);
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().string().find(".json."), std::string::npos) << entry.path();
  }
}

// Runs shardsim with stdout on `device` (not a pipe: /dev/full) and stderr captured.
CliResult RunWithStdoutOn(const std::string& device, const std::vector<std::string>& args, const std::string& err_file) {
  CliResult result;
  result.command = std::string(SHARDSIM_BIN) + " ... > " + device;
  std::vector<std::string> argv_storage = {SHARDSIM_BIN};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int in = open("/dev/null", O_RDONLY), out = open(device.c_str(), O_WRONLY), err = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(127);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  result.exited = WIFEXITED(status);
  result.exit_code = result.exited ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  result.err = ReadFile(err_file);
  return result;
}

TEST_F(CliErrorsTest, JsonToFullStdoutFails) {
  if (!IsCharacterDevice("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string err = PathOf("stderr.txt");
  const std::vector<std::vector<std::string>> commands = {
      {"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "1M", "--seq-len", "4096", "--json"},
      {"describe", "--model", "llama3-8b", "--json"},  // short: still in stdio's buffer when the command returns
      {"presets"}};
  for (const auto& args : commands) {
    EXPECT_TRUE(IsInputError(RunWithStdoutOn("/dev/full", args, err), {"standard output: cannot be written: No space left on device"}))
        << args[0];
  }
}

// --- Hugging Face config.json import. ---

TEST_F(CliErrorsTest, HfConfigUnsupportedModelType) {
  const json config = {{"model_type", "bert"}, {"hidden_size", 768}, {"num_hidden_layers", 12}};
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", WriteJson("bert/config.json", config)}),
                           {"/model_type", "'bert'", "llama", "gpt_neox"}));
}

TEST_F(CliErrorsTest, HfConfigMissingRequiredKey) {
  const json config = {{"model_type", "llama"},        {"num_hidden_layers", 32}, {"num_attention_heads", 32},
                       {"intermediate_size", 14336}, {"vocab_size", 128256}};
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", WriteJson("llama/config.json", config)}),
                           {"/hidden_size", "missing", "'hidden_size'"}));
}

// --- Command-line parsing (CLI11). ---

TEST_F(CliErrorsTest, UnknownSubcommandFlag) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--bogus"}), {"--bogus", "--help"}));
}

TEST_F(CliErrorsTest, OptionValueOutOfRange) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--seq-len", "0"}), {"--seq-len"}));
}

// plan's flags are checked as they are parsed, before any search.
TEST_F(CliErrorsTest, PlanFlagsAreCheckedByName) {
  const std::vector<std::string> base = {"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "1M", "--seq-len", "4096"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(with({"--framework", "megatorn"}), {"--framework", "megatron-core"}));
  for (const char* bad : {"0", "1.5", "nan", "-0.5", "70XB", "0GiB"}) EXPECT_TRUE(IsInputError(with({"--max-memory", bad}), {"--max-memory"})) << bad;
  EXPECT_TRUE(IsInputError(with({"--train-tokens", "0"}), {"--train-tokens"}));
  EXPECT_TRUE(IsInputError(with({"--train-tokens", "15T", "--price-per-device-hour", "nan"}), {"--price-per-device-hour"}));
  EXPECT_TRUE(IsInputError(with({"--price-per-device-hour", "2"}), {"--price-per-device-hour", "--train-tokens"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "1Q"}),
                           {"--global-batch-tokens", "suffix"}));
}

TEST_F(CliErrorsTest, NoSubcommand) { EXPECT_TRUE(IsInputError(RunShardsim({}), {"subcommand"})); }

TEST_F(CliErrorsTest, DeviceFileIsRejected) {
  // /dev/zero never ends: reading it whole would hang or exhaust memory.
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", "/dev/zero"}),
                           {"/dev/zero", "not a regular file"}));
}

// --- Missing files, folders and empty files, for each of --model, --cluster and --plan. ---

enum class FileProblem { kMissing, kDirectory, kEmpty };

struct FileCase {
  std::string flag;  // "--model", "--cluster" or "--plan"
  FileProblem problem;
};

class CliFileErrorsTest : public CliTest, public ::testing::WithParamInterface<FileCase> {};

TEST_P(CliFileErrorsTest, ReportsTheFile) {
  const FileCase& c = GetParam();
  std::string path, words;
  switch (c.problem) {
    case FileProblem::kMissing:
      path = PathOf("missing.json");
      words = "not found";
      break;
    case FileProblem::kDirectory:
      Write("folder/inner.json", "{}");
      path = PathOf("folder");
      words = "directory";
      break;
    case FileProblem::kEmpty:
      path = Write("empty.json", "");
      words = "empty";
      break;
  }
  std::vector<std::string> args = {"describe"};
  if (c.flag != "--model") args.insert(args.end(), {"--model", "llama3-8b"});
  if (c.flag == "--plan") args.insert(args.end(), {"--cluster", "dgx-h100:8"});
  args.insert(args.end(), {c.flag, path});
  // A file that is missing or a folder is named with its flag, as the user typed it.
  EXPECT_TRUE(IsInputError(RunShardsim(args), {c.problem == FileProblem::kEmpty ? path : c.flag + " " + path, words}));
}

std::string FileCaseName(const ::testing::TestParamInfo<FileCase>& info) {
  const char* problems[] = {"Missing", "Directory", "Empty"};
  std::string flag = info.param.flag.substr(2);
  flag[0] = static_cast<char>(std::toupper(flag[0]));
  return problems[static_cast<int>(info.param.problem)] + flag;
}

INSTANTIATE_TEST_SUITE_P(AllInputs, CliFileErrorsTest,
                         ::testing::Values(FileCase{"--model", FileProblem::kMissing}, FileCase{"--model", FileProblem::kDirectory},
                                           FileCase{"--model", FileProblem::kEmpty}, FileCase{"--cluster", FileProblem::kMissing},
                                           FileCase{"--cluster", FileProblem::kDirectory}, FileCase{"--cluster", FileProblem::kEmpty},
                                           FileCase{"--plan", FileProblem::kMissing}, FileCase{"--plan", FileProblem::kDirectory},
                                           FileCase{"--plan", FileProblem::kEmpty}),
                         FileCaseName);

}  // namespace
}  // namespace shardsim::cli_test
