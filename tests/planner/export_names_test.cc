// The exports' setting names and values against the frameworks' own sources, DeepSpeed's JSON,
// and the export target names.
#include <algorithm>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "planner/export.h"
#include "planner/frameworks.h"

namespace shardsim::planner {
namespace {

// export_test.cc's sample: tensor, context, interleaved pipeline and data with ZeRO-1.
PlanSpec SamplePlan() {
  PlanSpec p;
  p.mesh.data = 2, p.mesh.tensor = 8, p.mesh.pipeline = 4, p.mesh.context = 2;
  p.global_batch_size = 512, p.seq_len = 8192;
  p.zero_stage = 1, p.sequence_parallel = true;
  p.pipeline_schedule = "interleaved-1f1b", p.virtual_stages = 5;
  p.recompute = Recompute::kSelective;
  return p;
}

// Every setting an export writes is one its framework reads, spelled as the framework's own
// source spells it (lists copied from the files named, at the commits docs/frameworks.md gives).
TEST(ExportTest, SettingNamesAreTheFrameworks) {
  const std::map<ExportTarget, std::set<std::string>> known = {
      // megatron/training/arguments.py and the dataclasses it generates flags from
      // (core/model_parallel_config.py, core/transformer/transformer_config.py,
      // training/config/common_config.py, training/config/training_config.py).
      {ExportTarget::kMegatron,
       {"--tensor-model-parallel-size",
        "--pipeline-model-parallel-size",
        "--num-layers-per-virtual-pipeline-stage",
        "--pipeline-model-parallel-layout",
        "--mtp-num-layers",
        "--sequence-parallel",
        "--grad-reduce-in-bf16",
        "--accumulate-allreduce-grads-in-fp32",
        "--context-parallel-size",
        "--cp-comm-type",
        "--expert-model-parallel-size",
        "--moe-token-dispatcher-type",
        "--moe-flex-dispatcher-backend",
        "--moe-grouped-gemm",
        "--use-transformer-engine-op-fuser",
        "--moe-dispatch-fwd-dtype",
        "--moe-combine-bwd-dtype",
        "--moe-expert-capacity-factor",
        "--recompute-granularity",
        "--recompute-method",
        "--recompute-num-layers",
        "--use-distributed-optimizer",
        "--use-megatron-fsdp",
        "--data-parallel-sharding-strategy",
        "--num-distributed-optimizer-instances",
        "--outer-dp-sharding-strategy",
        "--ckpt-format",
        "--overlap-grad-reduce",
        "--overlap-param-gather",
        "--tp-comm-overlap",
        "--no-overlap-p2p-communication",
        "--moe-shared-expert-overlap",
        "--attention-backend",
        "--micro-batch-size",
        "--global-batch-size",
        "--seq-length",
        "--fp16",
        "--bf16",
        "--fp8-format",
        "--fp8-recipe"}},
      // torchtitan/config/configs.py (ParallelismConfig, TrainingConfig, CompileConfig),
      // trainer.py.
      {ExportTarget::kTorchtitan,
       {"parallelism.data_parallel_replicate_degree",
        "parallelism.data_parallel_shard_degree",
        "parallelism.tensor_parallel_degree",
        "parallelism.enable_sequence_parallel",
        "parallelism.context_parallel_degree",
        "parallelism.expert_parallel_degree",
        "parallelism.pipeline_parallel_degree",
        "parallelism.pipeline_parallel_schedule",
        "parallelism.num_pp_microbatches",
        "parallelism.pipeline_parallel_layers_per_stage",
        "parallelism.pipeline_parallel_first_stage_less_layers",
        "parallelism.pipeline_parallel_last_stage_less_layers",
        "parallelism.module_fqns_per_model_part",
        "parallelism.fsdp_reshard_after_forward",
        "compile.enable",
        "compile.components",
        "compile.enable_async_tensor_parallel",
        "activation_checkpoint",
        "training.num_tokens_per_microbatch_per_dp_rank",
        "training.num_tokens_per_train_step",
        "training.max_context_length",
        "training.mixed_precision_param"}},
      // src/maxtext/configs/base.yml.
      {ExportTarget::kMaxText,
       {"dcn_data_parallelism",
        "dcn_pipeline_parallelism",
        "dcn_fsdp_parallelism",
        "dcn_context_parallelism",
        "dcn_tensor_parallelism",
        "dcn_expert_parallelism",
        "ici_data_parallelism",
        "ici_pipeline_parallelism",
        "ici_fsdp_parallelism",
        "ici_context_parallelism",
        "ici_tensor_parallelism",
        "ici_expert_parallelism",
        "shard_optimizer_over_data",
        "num_layers_per_pipeline_stage",
        "num_pipeline_repeats",
        "num_pipeline_microbatches",
        "pipeline_fsdp_ag_once",
        "gradient_accumulation_steps",
        "per_device_batch_size",
        "max_target_length",
        "mtp_num_layers",
        "remat_policy",
        "attention",
        "context_parallel_strategy",
        "capacity_factor",
        "dtype",
        "quantization"}},
      // deepspeed/runtime/constants.py, runtime/zero/config.py, runtime/tensor_parallel/config.py,
      // module_inject/auto_ep_config.py.
      {ExportTarget::kDeepSpeed,
       {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
        "zero_optimization.stage", "zero_optimization.mics_shard_size",
        "zero_optimization.overlap_comm", "bf16.enabled", "fp16.enabled", "communication_data_type",
        "tensor_parallel.autotp_size", "tensor_parallel.tp_overlap_comm", "expert_parallel.enabled",
        "expert_parallel.autoep_size"}},
  };
  // Values with a fixed set of choices in the framework's source.
  const std::map<std::string, std::set<std::string>> choices = {
      {"--cp-comm-type", {"p2p", "all_gather", "a2a", "a2a+p2p"}},
      {"--data-parallel-sharding-strategy",
       {"no_shard", "optim", "optim_grads", "optim_grads_params"}},
      {"--outer-dp-sharding-strategy", {"no_shard", "optim"}},
      {"--recompute-granularity", {"full", "selective"}},
      {"--moe-token-dispatcher-type", {"allgather", "alltoall", "flex"}},
      {"--attention-backend", {"flash", "fused", "unfused", "local", "auto"}},
      {"--fp8-format", {"e4m3", "hybrid"}},
      {"parallelism.pipeline_parallel_schedule",
       {"\"1F1B\"", "\"Interleaved1F1B\"", "\"GPipe\"", "\"LoopedBFS\"",
        "\"InterleavedZeroBubble\"", "\"ZBVZeroBubble\"", "\"DualPipeV\""}},
      {"parallelism.fsdp_reshard_after_forward", {"\"default\"", "\"always\"", "\"never\""}},
      {"activation_checkpoint", {"None", "FullAC.Config()", "SelectiveAC.Config()"}},
      {"remat_policy",
       {"full", "minimal", "minimal_with_context", "save_dot_with_context_except_mlp",
        "save_dot_except_mlpwi", "save_dot_except_mlp", "save_qkv_proj", "qkv_proj_offloaded",
        "custom", "minimal_offloaded", "save_out_proj"}},
      {"attention", {"autoselected", "dot_product", "flash", "cudnn_flash_te"}},
      {"context_parallel_strategy", {"all_gather", "ring", "ulysses", "usp"}},
      {"zero_optimization.stage", {"0", "1", "2", "3"}},
  };
  const ModelSpec llama = FindModelPreset("llama3-70b")->spec,
                  mixtral = FindModelPreset("mixtral-8x7b")->spec;
  PlanSpec fsdp;
  fsdp.mesh.fsdp = 8, fsdp.mesh.data = 2, fsdp.mesh.tensor = 8;
  fsdp.global_batch_size = 512, fsdp.seq_len = 8192, fsdp.recompute = Recompute::kFull,
  fsdp.dtype = "fp8";
  PlanSpec moe;
  moe.mesh.expert = 8, moe.mesh.data = 4, moe.mesh.context = 2, moe.mesh.pipeline = 4;
  moe.global_batch_size = 256, moe.seq_len = 8192, moe.zero_stage = 2,
  moe.ep_capacity_factor = 1.25, moe.context_kv = "all-gather";
  PlanSpec uneven = SamplePlan();
  uneven.pipeline_layout = "Et*3|(t*4|)*18t*5L";
  const std::vector<std::pair<const ModelSpec*, PlanSpec>> plans = {
      {&llama, SamplePlan()}, {&llama, fsdp}, {&mixtral, moe}, {&llama, uneven}};
  for (const auto& [target, names] : known) {
    for (const auto& [model, plan] : plans) {
      for (const Setting& s :
           ExportPlan(*model, ParseClusterPreset("dgx-h100:256", "--cluster"), plan, target)
               .settings) {
        if (s.name.rfind("launch.", 0) == 0) continue;
        EXPECT_TRUE(names.count(s.name)) << s.name;
        if (const auto c = choices.find(s.name); c != choices.end()) {
          EXPECT_TRUE(c->second.count(s.value)) << s.name << " " << s.value;
        }
      }
    }
  }
}

// DeepSpeed's export is a JSON config, strict JSON as DeepSpeed reads it, with the launch facts
// beside it.
TEST(ExportTest, DeepSpeedConfig) {
  PlanSpec p;
  p.mesh.data = 4, p.mesh.fsdp = 8, p.mesh.tensor = 2;
  p.global_batch_size = 256, p.seq_len = 4096, p.micro_batch_size = 2;
  const Export e =
      ExportPlan(FindModelPreset("llama3-70b")->spec,
                 ParseClusterPreset("dgx-h100:64", "--cluster"), p, ExportTarget::kDeepSpeed);
  const nlohmann::json j = nlohmann::json::parse(e.text);
  EXPECT_EQ(j["train_batch_size"], 256);
  EXPECT_EQ(j["train_micro_batch_size_per_gpu"], 2);
  EXPECT_EQ(j["gradient_accumulation_steps"], 4);
  EXPECT_EQ(j["zero_optimization"]["stage"], 3);
  EXPECT_EQ(j["zero_optimization"]["mics_shard_size"], 8);  // fsdp inside, data replicas across
  EXPECT_EQ(j["bf16"]["enabled"], true);
  EXPECT_EQ(j["tensor_parallel"]["autotp_size"], 2);
  EXPECT_EQ(e.text.find('#'), std::string::npos) << e.text;
  ASSERT_FALSE(e.beside.empty());
  EXPECT_EQ(e.beside.front(), (Setting{"world_size", "64"}));
  // Estimated with the default (fused) loss: DeepSpeed's is eager, which the export says.
  ASSERT_EQ(e.not_expressed.size(), 1u);
  EXPECT_NE(e.not_expressed.front().find("fused cross-entropy"), std::string::npos) << e.not_expressed.front();
  p.cross_entropy = "eager";
  const Export eager = ExportPlan(FindModelPreset("llama3-70b")->spec, ParseClusterPreset("dgx-h100:64", "--cluster"), p, ExportTarget::kDeepSpeed);
  EXPECT_TRUE(eager.not_expressed.empty()) << eager.not_expressed.front();
  // A context axis DeepSpeed does not run joins its data-parallel world (every rank not tensor or
  // pipeline, expert ranks included): the batch fields pass its check, train_batch_size =
  // micro x accumulation x that world, or the export says why they cannot or what they changed.
  auto deepspeed = [](const std::string& model, MeshShape mesh, int64_t batch, int64_t micro) {
    PlanSpec plan;
    plan.mesh = mesh;
    plan.global_batch_size = batch, plan.seq_len = 8192, plan.micro_batch_size = micro;
    const ModelSpec m = FindModelPreset(model)->spec;  // a copy: the preset lookup returns a temporary
    const Export e = ExportPlan(m, ParseClusterPreset("dgx-h100:" + std::to_string(mesh.Product()), "--cluster"), plan, ExportTarget::kDeepSpeed);
    return std::make_pair(e, nlohmann::json::parse(e.text));
  };
  auto check = [](const nlohmann::json& c, int64_t world) {
    return c["train_batch_size"].get<int64_t>() ==
           c["train_micro_batch_size_per_gpu"].get<int64_t>() * c["gradient_accumulation_steps"].get<int64_t>() * world;
  };
  auto says = [](const Export& e, const std::string& words) {
    return std::any_of(e.not_expressed.begin(), e.not_expressed.end(), [&](const std::string& g) { return g.find(words) != std::string::npos; });
  };
  MeshShape cft;
  cft.context = 2, cft.fsdp = 16, cft.tensor = 2;
  const auto [folded, c] = deepspeed("llama3-70b", cft, 512, 1);
  EXPECT_TRUE(check(c, 32)) << c;
  MeshShape cfe;
  cfe.context = 2, cfe.fsdp = 8, cfe.expert = 2;
  const auto [experts, ce] = deepspeed("mixtral-8x7b", cfe, 128, 1);
  EXPECT_TRUE(check(ce, 32)) << ce;
  const auto [changed, cc] = deepspeed("llama3-70b", cft, 64, 4);  // 2 sequences a rank: micro-batch 2
  EXPECT_TRUE(check(cc, 32)) << cc;
  EXPECT_EQ(cc["train_micro_batch_size_per_gpu"], 2);
  EXPECT_TRUE(says(changed, "micro-batch 2 per rank, not the plan's 4")) << changed.not_expressed.size();
  const auto [uneven, cu] = deepspeed("llama3-70b", cft, 48, 1);  // 48 over 32 ranks
  EXPECT_TRUE(says(uneven, "48 sequences do not split over DeepSpeed's data-parallel world of 32 ranks")) << uneven.not_expressed.size();
}

TEST(ExportTest, TargetNames) {
  EXPECT_EQ(ParseExportTarget("megatron-core", "--export"), ExportTarget::kMegatron);
  EXPECT_EQ(ParseExportTarget("megatron", "--export"), ExportTarget::kMegatron);
  EXPECT_EQ(ParseExportTarget("deepspeed", "--export"), ExportTarget::kDeepSpeed);
  for (Framework f : {Framework::kMegatronCore, Framework::kTorchtitan, Framework::kMaxText,
                      Framework::kDeepSpeed}) {
    EXPECT_EQ(FrameworkOf(ParseExportTarget(std::string(FrameworkName(f)), "--framework")), f);
  }
}

}  // namespace
}  // namespace shardsim::planner
