// `shardsim estimate` end to end: the report JSON of the CLI docs, and its input errors.
#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

TEST(CliEstimateTest, ReportHasTheDocumentedFields) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-70b", "--cluster", "dgx-h100:64", "--plan",
                                         std::string(SHARDSIM_EXAMPLES_DIR) + "/llama3-70b-dgx-h100-64.plan.json", "--json"}),
                            &out));
  for (const char* key : {"step_time_s", "tokens_per_s", "mfu", "hfu", "model_flops_per_step", "fits", "memory", "breakdown", "plan", "why"}) {
    EXPECT_TRUE(out.contains(key)) << key;
  }
  const json& memory = out["memory"];
  double parts = 0;
  for (const char* key : {"params", "grads", "optimizer", "activations", "buffers"}) parts += memory[key].get<double>();
  EXPECT_NEAR(parts, memory["peak_bytes_per_device"].get<double>(), 1.0);
  EXPECT_TRUE(out["breakdown"].contains("compute_s"));
  EXPECT_TRUE(out["breakdown"].contains("bubble_s"));
  EXPECT_TRUE(out["breakdown"]["exposed_comm_s"].is_object());
  // tokens/s and step time agree with the plan's batch.
  EXPECT_NEAR(out["tokens_per_s"].get<double>() * out["step_time_s"].get<double>(), 512.0 * 8192, 1.0);
  EXPECT_GT(out["mfu"].get<double>(), 0.05);
  EXPECT_LT(out["mfu"].get<double>(), 1.0);
  EXPECT_GE(out["hfu"].get<double>(), out["mfu"].get<double>());
  EXPECT_TRUE(out["fits"].get<bool>());
}

TEST(CliEstimateTest, DumpProgramIsDeterministic) {
  const std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--set", "mesh.data=2", "--set",
                                         "mesh.tensor=4", "--set", "mesh.pipeline=2", "--set", "global_batch_size=16", "--set",
                                         "seq_len=2048", "--dump-program"};
  const CliResult a = RunShardsim(args), b = RunShardsim(args);
  ASSERT_TRUE(a.exited && a.exit_code == 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out.find("tp_exit_attention"), std::string::npos);
}

TEST(CliEstimateTest, InvalidPlansGiveThePreciseReason) {
  auto run = [](std::vector<std::string> sets) {
    std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16"};
    for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(run({"mesh.data=16", "mesh.tensor=3", "global_batch_size=16", "seq_len=2048"}), {"mesh", "48 devices", "16"}));
  EXPECT_TRUE(IsInputError(run({"mesh.data=2", "mesh.pipeline=8", "global_batch_size=6", "seq_len=2048", "pipeline_schedule=interleaved-1f1b",
                                "virtual_stages=2"}),
                           {"interleaved-1f1b", "micro-batches", "multiple of pipeline=8"}));
  EXPECT_TRUE(IsInputError(run({"mesh.data=4", "mesh.pipeline=4", "global_batch_size=16", "seq_len=2048", "pipeline_schedule=dualpipe"}),
                           {"dualpipe", "even number of micro-batches >= 2 x pipeline"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-a100:16", "--set", "mesh.data=16", "--set",
                                        "global_batch_size=16", "--set", "seq_len=2048", "--set", "dtype=fp8"}),
                           {"dtype", "'fp8' has no peak on A100"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16"}), {"needs a plan"}));
}

TEST(CliEstimateTest, PlansThatDoNotFitSaySo) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-70b", "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--set",
                                         "global_batch_size=8", "--set", "seq_len=4096", "--json"}),
                            &out));
  EXPECT_FALSE(out["fits"].get<bool>());
  EXPECT_NE(out["why"].get<std::string>().find("does not fit"), std::string::npos);
}

}  // namespace
}  // namespace shardsim::cli_test
