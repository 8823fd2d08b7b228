// A plan that names a framework the framework cannot run is refused at the plan field the first
// gap is about, with the framework's reason, the commit its profile reads and the other gaps'
// fields; a gap of the model's is refused at the framework field.
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
                            "hint: change fp8_recipe, drop the framework field"}));
  // A second gap: its field listed.
  EXPECT_TRUE(IsInputError(EstimateWith("llama3-8b", {"mesh.fsdp=8", "dtype=fp8", "fp8_recipe=tensorwise", "param_gather_dtype=fp8", "framework=torchtitan"}),
                           {":/fp8_recipe: torchtitan", "(and 1 more, at /param_gather_dtype)"}));
  // Megatron-core's --tp-comm-overlap needs sequence parallelism.
  EXPECT_TRUE(IsInputError(EstimateWith("llama3-8b", {"mesh.tensor=8", "overlap.tensor=true", "sequence_parallel=false", "framework=megatron-core"}),
                           {":/overlap/tensor: megatron-core (profiled at ", "--sequence-parallel", "hint: change overlap.tensor"}));
  // MaxText has no 1F1B schedule of its own: the schedule field.
  EXPECT_TRUE(IsInputError(EstimateWith("llama3-8b", {"mesh.pipeline=8", "pipeline_schedule=1f1b", "framework=maxtext"}),
                           {":/pipeline_schedule: maxtext (profiled at ", "pipeline schedule 1f1b"}));
  // A model the framework lacks (Mamba-2 layers): at the framework field.
  EXPECT_TRUE(IsInputError(EstimateWith("nemotron-3-nano-30b-a3b", {"mesh.data=8", "framework=maxtext"}),
                           {":/framework: maxtext (profiled at ", "cannot run this plan: Mamba-2 layers", "(hint: drop the framework field"}));
}

}  // namespace
}  // namespace shardsim::cli_test
