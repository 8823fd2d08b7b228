// What estimate's report says beside its numbers: a sequence beyond the model's length, the
// exposed collectives named by the axes they ran over, in the text and the JSON alike.
#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

// A sequence beyond the model's max_seq_len (rotary positions) is costed as given and said so.
TEST(CliEstimateTest, SequenceBeyondTheModelsLengthIsSaid) {
  const std::vector<std::string> base = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.data=8",
                                         "--set", "global_batch_size=8", "--set"};
  std::vector<std::string> args = base;
  args.push_back("seq_len=32768");
  CliResult r = RunShardsim(args);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.err;
  EXPECT_NE(r.out.find("seq_len 32768 is beyond the model's max_seq_len 8192: costed as given"), std::string::npos) << r.out;
  args.push_back("--json");
  r = RunShardsim(args);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.err;
  const json beyond = json::parse(r.out);
  EXPECT_EQ(beyond["context_extension"], (json{{"seq_len", 32768}, {"max_seq_len", 8192}})) << r.out;
  args = base;
  args.push_back("seq_len=8192");
  r = RunShardsim(args);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.err;
  EXPECT_EQ(r.out.find("max_seq_len"), std::string::npos) << r.out;
  args.push_back("--json");
  r = RunShardsim(args);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.err;
  EXPECT_FALSE(json::parse(r.out).contains("context_extension")) << r.out;
}

// Context parallelism with data 1: the gradients' all-reduce (the data stream's) runs over the
// context ranks alone, which the text names it by; the JSON keys it by stream and gives that name.
TEST(CliEstimateTest, ExposedCollectivesAreNamedAlikeInTextAndJson) {
  const std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:64", "--set", "mesh.tensor=8", "--set", "mesh.context=8",
                                         "--set", "global_batch_size=8", "--set", "seq_len=131072"};
  const CliResult text = RunShardsim(args);
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.err;
  std::vector<std::string> with_json = args;
  with_json.push_back("--json");
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(with_json), &report));
  const json& labels = report["breakdown"]["exposed_comm_labels"];
  ASSERT_EQ(labels.size(), report["breakdown"]["exposed_comm_s"].size());
  ASSERT_TRUE(labels.contains("data all-reduce")) << labels;
  EXPECT_EQ(labels["data all-reduce"], "context all-reduce");
  for (const auto& [key, label] : labels.items()) EXPECT_NE(text.out.find("exposed " + label.get<std::string>() + " "), std::string::npos) << label << "\n" << text.out;
}

}  // namespace
}  // namespace shardsim::cli_test
