// What estimate's report says beside its numbers: a sequence beyond the model's length, the
// exposed collectives named by the axes they ran over, in the text and the JSON alike, and the
// heaviest stage where the critical one waits for it (estimate's and simulate's), and the memory
// a static allocator lets the loss and a recomputed layer share.
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

// DeepSeek-V3 on 16 stages of 1F1B: stage 0 (the embedding and dense layers) ends last, idle most
// of the step while the MoE stages run their expert all-to-alls. The report names the heaviest
// stage, its parts and how much more it works, in the text and the JSON; a step without stages
// names none.
TEST(CliEstimateTest, ABubbleThatIsWaitingForABusierStageNamesIt) {
  std::vector<std::string> args = {"estimate", "--model", "deepseek-v3", "--cluster", "hgx-h800:2048", "--set", "mesh.pipeline=16", "--set", "mesh.expert=64",
                                   "--set", "mesh.data=2", "--set", "zero_stage=1", "--set", "pipeline_schedule=1f1b", "--set", "recompute=full",
                                   "--global-batch-tokens", "60M", "--seq-len", "4096"};
  const CliResult text = RunShardsim(args);
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.err;
  args.push_back("--json");
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(args), &report));
  const json& heaviest = report["breakdown"]["heaviest_stage"];
  ASSERT_TRUE(heaviest.is_object()) << report["breakdown"];
  const int64_t stage = heaviest["stage"].get<int64_t>();
  EXPECT_NE(stage, report["breakdown"]["critical_stage"].get<int64_t>());
  ASSERT_TRUE(heaviest["exposed_comm_s"].contains("expert all-to-all")) << heaviest;
  EXPECT_GT(heaviest["exposed_comm_s"]["expert all-to-all"].get<double>(), 0.1 * report["step_time_s"].get<double>()) << heaviest;
  // Stages 2 to 14 hold the same MoE layers: one is named, the others counted.
  EXPECT_EQ(heaviest["as_heavy"].get<int64_t>(), 12) << heaviest;
  EXPECT_NE(text.out.find("  heaviest    stage " + std::to_string(stage) + " (and 12 others as heavy): compute "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" more than stage 0, the critical one, which waits for it in its bubble\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("limited by  pipeline bubble (the step's largest part: "), std::string::npos) << text.out;
  json dense;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--set",
                                         "global_batch_size=64", "--set", "seq_len=4096", "--json"}),
                            &dense));
  EXPECT_TRUE(dense["breakdown"]["heaviest_stage"].is_null()) << dense["breakdown"];
}

// simulate names the heaviest stage from the simulated devices as estimate does from its own:
// 8 stages of Llama 3 8B, the last holding the output head and the loss, stage 0 ending last.
TEST(CliEstimateTest, SimulateNamesTheHeaviestStageAsEstimateDoes) {
  std::vector<std::string> args = {"simulate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.pipeline=8", "--set",
                                   "global_batch_size=64", "--set", "seq_len=4096"};
  const CliResult text = RunShardsim(args);
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.err;
  args.push_back("--json");
  json simulated;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(args), &simulated));
  args[0] = "estimate";
  json estimated;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(args), &estimated));
  for (const json* report : {&simulated, &estimated}) {
    const json& b = (*report)["breakdown"];
    ASSERT_TRUE(b["heaviest_stage"].is_object()) << b;
    EXPECT_EQ(b["heaviest_stage"]["stage"], 7) << b;
    EXPECT_EQ(b["critical_stage"], 0) << b;
    EXPECT_GT(b["heaviest_stage"]["compute_s"].get<double>(), b["compute_s"].get<double>()) << b;
  }
  EXPECT_NE(text.out.find("  heaviest    stage 7: compute "), std::string::npos) << text.out;
}

// memory_allocator static (MaxText's default, XLA's buffer assignment) counts the loss's buffers
// and a recomputed layer's once: a line says how much, the JSON gives it, the peak drops by it; an
// unknown value names the field and its values.
TEST(CliEstimateTest, StaticAllocatorSharesTheLossWithARecomputedLayer) {
  const std::vector<std::string> base = {"estimate", "--model", "llama3-8b", "--cluster", "tpu-v5p:2x2x2", "--set", "mesh.fsdp=8", "--set", "global_batch_size=8",
                                         "--set", "seq_len=8192", "--set", "recompute=full"};
  auto with = [&](const std::vector<std::string>& extra) { return RunShardsimWith(base, extra); };
  EXPECT_TRUE(IsInputError(with({"--set", "memory_allocator=pooled"}), {"memory_allocator", "caching", "static"}));
  json caching, shared;
  ASSERT_TRUE(IsJsonSuccess(with({"--json"}), &caching));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "framework=maxtext", "--json"}), &shared));
  EXPECT_EQ(caching["memory"]["loss_shared"], 0);
  const double loss_shared = shared["memory"]["loss_shared"].get<double>();
  EXPECT_GT(loss_shared, 1e9);  // a recomputed layer of llama3-8b over 8192 tokens: over a GB
  EXPECT_EQ(shared["plan"]["memory_allocator"], "static");
  EXPECT_NEAR(caching["memory"]["peak_bytes_per_device"].get<double>() - shared["memory"]["peak_bytes_per_device"].get<double>(), loss_shared, 1.0);
  const CliResult text = with({"--set", "memory_allocator=static"});
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.err;
  EXPECT_NE(text.out.find("the loss's buffers and a layer's backward working set share"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(memory_allocator static)"), std::string::npos) << text.out;
  const CliResult cached = with({});
  EXPECT_EQ(cached.out.find("memory_allocator"), std::string::npos) << cached.out;
}

}  // namespace
}  // namespace shardsim::cli_test
