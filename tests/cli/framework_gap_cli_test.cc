// A plan that names a framework the framework cannot run is refused at the plan field the first
// gap is about, with the framework's reason, the commit its profile reads, the values of that
// field it runs and the other gaps' fields; a gap of the model's is refused at the framework field.
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

CliResult EstimateWith(const std::string& model, std::vector<std::string> sets) {
  std::vector<std::string> args = {"estimate", "--model", model, "--cluster", "dgx-h100:8", "--set", "global_batch_size=16", "--set", "seq_len=4096"};
  for (const std::string& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return RunShardsim(args);
}

TEST(CliFrameworkGapTest, RefusedAtTheFieldTheGapIsAbout) {
  // torchtitan's float8 converter scales row-wise or MXFP8, not per tensor.
  EXPECT_TRUE(IsInputError(EstimateWith("llama3-8b", {"mesh.fsdp=8", "dtype=fp8", "fp8_recipe=tensorwise", "framework=torchtitan"}),
                           {"plan (from --set):/fp8_recipe: torchtitan (profiled at pytorch/torchtitan ", ") cannot run this plan: tensorwise fp8 scaling",
                            "valid: fp8_recipe rowwise (with the rest of this plan)", "hint: change fp8_recipe, drop the framework field"}));
  // Only values the cluster takes too (no MXFP8 on an H100) and that open no other gap.
  EXPECT_TRUE(IsInputError(EstimateWith("llama3-8b", {"mesh.data=4", "mesh.pipeline=2", "zero_stage=2", "framework=deepspeed"}),
                           {":/zero_stage: deepspeed", "valid: zero_stage 0, 1 (with the rest of this plan)"}));
  EXPECT_TRUE(IsInputError(EstimateWith("llama3-8b", {"mesh.pipeline=8", "pipeline_schedule=1f1b", "framework=maxtext"}),
                           {":/pipeline_schedule: maxtext", "valid: pipeline_schedule gpipe"}));
  // A second gap: its field listed.
  EXPECT_TRUE(IsInputError(EstimateWith("llama3-8b", {"mesh.fsdp=8", "dtype=fp8", "fp8_recipe=tensorwise", "param_gather_dtype=fp8", "framework=torchtitan"}),
                           {":/fp8_recipe: torchtitan", "(and 1 more, at /param_gather_dtype)", "valid: a plan the framework runs"}));
  // Megatron-core's --tp-comm-overlap needs sequence parallelism.
  EXPECT_TRUE(IsInputError(EstimateWith("llama3-8b", {"mesh.tensor=8", "overlap.tensor=true", "sequence_parallel=false", "framework=megatron-core"}),
                           {":/overlap/tensor: megatron-core (profiled at ", "--sequence-parallel", "valid: overlap.tensor false", "hint: change overlap.tensor"}));
  // MaxText has no 1F1B schedule of its own: the schedule field.
  EXPECT_TRUE(IsInputError(EstimateWith("llama3-8b", {"mesh.pipeline=8", "pipeline_schedule=1f1b", "framework=maxtext"}),
                           {":/pipeline_schedule: maxtext (profiled at ", "pipeline schedule 1f1b"}));
  // A model the framework lacks (Mamba-2 layers): at the framework field.
  EXPECT_TRUE(IsInputError(EstimateWith("nemotron-3-nano-30b-a3b", {"mesh.data=8", "framework=maxtext"}),
                           {":/framework: maxtext (profiled at ", "cannot run this plan: Mamba-2 layers", "(hint: drop the framework field"}));
}

// DeepSpeed cuts Llama 3 70B's 80 layers on 6 stages its own way: an unset layout is estimated
// as that split and says whose it is; a layout DeepSpeed does not make is refused at its field,
// naming the one it makes. Overlap switches the plan does not write are DeepSpeed's.
TEST(CliFrameworkGapTest, DeepSpeedsOwnSplit) {
  auto estimate = [](std::vector<std::string> more) {
    std::vector<std::string> args = {"estimate", "--model", "llama3-70b", "--cluster", "dgx-h100:48", "--set", "global_batch_size=48", "--set", "seq_len=4096",
                                     "--set", "mesh.data=8", "--set", "mesh.pipeline=6", "--set", "recompute=full", "--set", "framework=deepspeed"};
    for (const std::string& s : more) args.insert(args.end(), {"--set", s});
    return RunShardsim(args);
  };
  const CliResult split = estimate({});
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_NE(split.out.find("layout      Et*14|t*14|(t*13|)*3t*13L (decoder layers per chunk in pipeline order: 14 x 2, 13 x 4; deepspeed's split"),
            std::string::npos)
      << split.out;
  EXPECT_TRUE(IsInputError(estimate({"pipeline_layout=Et*13|t*13|(t*14|)*2t*13|t*13L"}),
                           {":/pipeline_layout: deepspeed (profiled at ", "deepspeed splits them 14 x 2, 13 x 4",
                            "valid: pipeline_layout Et*14|t*14|(t*13|)*3t*13L, or unset"}));
  // An overlap the plan does write, and DeepSpeed never runs, is refused.
  EXPECT_TRUE(IsInputError(estimate({"overlap.pipeline=true"}), {":/overlap/pipeline: deepspeed", "valid: overlap.pipeline false"}));
  // Without a pipeline the header names no schedule, in estimate as in simulate.
  const CliResult flat = EstimateWith("llama3-8b", {"mesh.data=8"});
  ASSERT_EQ(flat.exit_code, 0) << flat.err;
  EXPECT_NE(flat.out.find("data=8, ZeRO 0"), std::string::npos) << flat.out;
  // (With its report page and trace, which run under the sanitizers here: cli.report_page_chromium
  // draws the page in Chromium in the release build only.)
  const TempDir dir;
  const CliResult simulated = RunShardsim({"simulate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "global_batch_size=16", "--set", "seq_len=2048",
                                           "--set", "mesh.data=8", "--report", dir.PathOf("step.html"), "--trace", dir.PathOf("step.trace.json")});
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_NE(simulated.out.find("data=8, ZeRO 0"), std::string::npos) << simulated.out;
  std::ifstream page(dir.PathOf("step.html")), trace(dir.PathOf("step.trace.json"));
  const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(trace, nullptr, false).is_discarded());
  // A context-parallel torchtitan plan that does not write its K/V exchange runs torchtitan's.
  EXPECT_EQ(EstimateWith("llama3-8b", {"mesh.fsdp=2", "mesh.context=4", "zero_stage=3", "framework=torchtitan"}).exit_code, 0);
}

}  // namespace
}  // namespace shardsim::cli_test
