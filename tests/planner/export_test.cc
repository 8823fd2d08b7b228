// Each export uses the flag and key names of its framework, with the plan's values.
#include "planner/export.h"

#include <gtest/gtest.h>

#include "core/cluster_presets.h"
#include "core/error.h"
#include "core/model_presets.h"
#include "planner/frameworks.h"

namespace shardsim::planner {
namespace {

PlanSpec SamplePlan() {
  PlanSpec p;
  p.mesh.data = 2;
  p.mesh.tensor = 8;
  p.mesh.pipeline = 4;
  p.mesh.context = 2;
  p.global_batch_size = 512;
  p.seq_len = 8192;
  p.micro_batch_size = 1;
  p.zero_stage = 1;
  p.sequence_parallel = true;
  p.pipeline_schedule = "interleaved-1f1b";
  p.virtual_stages = 5;
  p.recompute = Recompute::kSelective;
  return p;
}

std::string Text(ExportTarget target, const PlanSpec& plan = SamplePlan(),
                 const std::string& cluster = "dgx-h100:128") {
  return ExportPlan(FindModelPreset("llama3-70b")->spec, ParseClusterPreset(cluster, "--cluster"),
                    plan, target)
      .text;
}

TEST(ExportTest, MegatronFlags) {
  const std::string t = Text(ExportTarget::kMegatron);
  for (const char* flag :
       {"--tensor-model-parallel-size 8", "--pipeline-model-parallel-size 4",
        "--num-layers-per-virtual-pipeline-stage 4", "--sequence-parallel",
        "--context-parallel-size 2", "--recompute-granularity selective", "--micro-batch-size 1",
        "--global-batch-size 512", "--seq-length 8192", "--use-distributed-optimizer", "--bf16"}) {
    EXPECT_NE(t.find(flag), std::string::npos) << flag << " in\n" << t;
  }
  EXPECT_EQ(t.find("--expert-model-parallel-size"), std::string::npos);
  PlanSpec dual = SamplePlan();
  dual.pipeline_schedule = "dualpipe";
  dual.virtual_stages = 1;
  EXPECT_FALSE(ExportPlan(FindModelPreset("llama3-70b")->spec,
                          ParseClusterPreset("dgx-h100:128", "--cluster"), dual,
                          ExportTarget::kMegatron)
                   .not_expressed.empty());
}

TEST(ExportTest, MaxTextKeys) {
  PlanSpec p = SamplePlan();
  p.mesh.data = 4;  // 4 x 8 x 4 x 2 = 256 chips over 2 slices
  const std::string t = Text(ExportTarget::kMaxText, p, "tpu-v5e:16x16,slices=2");
  for (const char* key :
       {"dcn_data_parallelism: 2", "ici_data_parallelism: 2", "ici_fsdp_parallelism: 1",
        "ici_tensor_parallelism: 8", "ici_context_parallelism: 2", "ici_pipeline_parallelism: 4",
        "num_pipeline_microbatches: 128", "num_layers_per_pipeline_stage: 4",
        "remat_policy: minimal", "per_device_batch_size: 2", "max_target_length: 8192"}) {
    EXPECT_NE(t.find(key), std::string::npos) << key << " in\n" << t;
  }
  EXPECT_EQ(t.find("LIBTPU_INIT_ARGS"), std::string::npos) << "no tensor overlap, no flags";
  // Tensor overlap: XLA's continuation fusion, in the launch's environment (a comment).
  p.overlap.tensor = true;
  const std::string overlapped = Text(ExportTarget::kMaxText, p, "tpu-v5e:16x16,slices=2");
  EXPECT_NE(overlapped.find("# launch with: export LIBTPU_INIT_ARGS=\"--xla_tpu_enable_async_collective_fusion=true "), std::string::npos) << overlapped;
  EXPECT_NE(overlapped.find("--xla_tpu_overlap_compute_collective_tc=true"), std::string::npos) << overlapped;
  // Read back from the launch's flags: the v5p scripts' set (MaxText/configs/v5p/512b.sh at
  // 76bd53b0f4, without fuse_all_gather, with other flags between) turns it on; a later =false
  // of a needed flag turns it off; True counts as true.
  const ModelSpec model = FindModelPreset("llama3-70b")->spec;
  PlanSpec q;
  q.mesh.fsdp = 128, q.mesh.tensor = 4, q.global_batch_size = 1024, q.seq_len = 8192;
  q.sequence_parallel = true, q.recompute = Recompute::kFull, q.overlap.tensor = true;
  Export e = ExportPlan(model, ParseClusterPreset("tpu-v5p:8x8x8", "--cluster"), q, ExportTarget::kMaxText);
  auto read_with = [&](const std::string& flags) {
    for (Setting& s : e.settings) {
      if (s.name == "launch.LIBTPU_INIT_ARGS") s.value = flags;
    }
    return PlanFromExport(ExportTarget::kMaxText, e.settings, model).overlap.tensor;
  };
  const std::string v5p =
      "--xla_tpu_megacore_fusion_allow_ags=false --xla_enable_async_collective_permute=true --xla_tpu_enable_ag_backward_pipelining=true "
      "--xla_tpu_enable_data_parallel_all_reduce_opt=true --xla_tpu_data_parallel_opt_different_sized_ops=true "
      "--xla_tpu_enable_async_collective_fusion=true --xla_tpu_enable_async_collective_fusion_multiple_steps=true "
      "--xla_tpu_overlap_compute_collective_tc=true --xla_enable_async_all_gather=true";
  EXPECT_TRUE(read_with(v5p));
  EXPECT_FALSE(read_with(v5p + " --xla_tpu_overlap_compute_collective_tc=false"));
  EXPECT_TRUE(read_with("--xla_tpu_enable_async_collective_fusion=True --xla_tpu_overlap_compute_collective_tc=True"));
  EXPECT_FALSE(read_with("--xla_tpu_enable_async_collective_fusion=true"));
}

TEST(ExportTest, TorchtitanConfig) {
  const std::string t = Text(ExportTarget::kTorchtitan);
  for (const char* key : {"config.parallelism.data_parallel_replicate_degree = 2",
                          "config.parallelism.data_parallel_shard_degree = 1",
                          "config.parallelism.tensor_parallel_degree = 8",
                          "config.parallelism.enable_sequence_parallel = True",
                          "config.parallelism.context_parallel_degree = 2",
                          "config.parallelism.pipeline_parallel_degree = 4",
                          "config.parallelism.pipeline_parallel_schedule = \"Interleaved1F1B\"",
                          "config.parallelism.num_pp_microbatches = 256",
                          "config.parallelism.pipeline_parallel_layers_per_stage = 4",
                          "config.activation_checkpoint = SelectiveAC.Config()",
                          "config.training.max_context_length = 8192",
                          "config.training.num_tokens_per_train_step = 4194304", "# NGPU=128"}) {
    EXPECT_NE(t.find(key), std::string::npos) << key << " in\n" << t;
  }
  // FSDP under pipeline parallelism keeps its gathered parameters by default.
  PlanSpec fsdp;
  fsdp.mesh.fsdp = 8, fsdp.mesh.pipeline = 8;
  fsdp.global_batch_size = 512, fsdp.seq_len = 4096;
  const ModelSpec model = FindModelPreset("llama3-70b")->spec;
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:64", "--cluster");
  EXPECT_NE(ExportPlan(model, cluster, fsdp, ExportTarget::kTorchtitan)
                .text.find("fsdp_reshard_after_forward = \"never\""),
            std::string::npos);
  fsdp.fsdp_reshard_after_forward = true;
  EXPECT_NE(ExportPlan(model, cluster, fsdp, ExportTarget::kTorchtitan)
                .text.find("fsdp_reshard_after_forward = \"always\""),
            std::string::npos);
  PlanSpec plain;
  plain.mesh.data = 8, plain.mesh.tensor = 8;
  plain.global_batch_size = 512, plain.seq_len = 4096;
  EXPECT_EQ(ExportPlan(model, cluster, plain, ExportTarget::kTorchtitan)
                .text.find("fsdp_reshard_after_forward"),
            std::string::npos)
      << "nothing sharded";
}

// torchtitan: replicate x shard x context x tensor x pipeline = world size; expert parallelism
// borrows from the shard dimension.
TEST(ExportTest, TorchtitanExpertParallelism) {
  PlanSpec p;
  p.mesh.data = 16;
  p.mesh.expert = 4;
  p.global_batch_size = 1024;
  p.seq_len = 4096;
  const std::string t =
      ExportPlan(FindModelPreset("mixtral-8x7b")->spec,
                 ParseClusterPreset("dgx-h100:64", "--cluster"), p, ExportTarget::kTorchtitan)
          .text;
  EXPECT_NE(t.find("data_parallel_replicate_degree = 16"), std::string::npos) << t;
  EXPECT_NE(t.find("data_parallel_shard_degree = 4"), std::string::npos) << t;
  EXPECT_NE(t.find("expert_parallel_degree = 4"), std::string::npos) << t;
  EXPECT_NE(t.find("num_tokens_per_microbatch_per_dp_rank = 4096"), std::string::npos) << t;
}

// The demo: fsdp=8 used to leave Megatron as its distributed optimizer (ZeRO-1), a
// different memory; Megatron-FSDP runs it as planned.
TEST(ExportTest, MegatronRunsFsdpAsMegatronFsdp) {
  PlanSpec p;
  p.mesh.fsdp = 8, p.mesh.tensor = 8;
  p.global_batch_size = 512, p.seq_len = 8192;
  const Export e =
      ExportPlan(FindModelPreset("llama3-70b")->spec,
                 ParseClusterPreset("dgx-h100:64", "--cluster"), p, ExportTarget::kMegatron);
  EXPECT_EQ(e.text.find("--use-distributed-optimizer"), std::string::npos) << e.text;
  for (const char* flag :
       {"--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads_params",
        "--ckpt-format fsdp_dtensor", "--overlap-grad-reduce", "--overlap-param-gather"}) {
    EXPECT_NE(e.text.find(flag), std::string::npos) << flag << " in\n" << e.text;
  }
  EXPECT_TRUE(e.not_expressed.empty()) << e.not_expressed.front();
  // ZeRO-3 under a pipeline keeps gathered parameters by default, which Megatron-FSDP does not.
  PlanSpec zero3 = SamplePlan();
  zero3.zero_stage = 3;
  const Export z =
      ExportPlan(FindModelPreset("llama3-70b")->spec,
                 ParseClusterPreset("dgx-h100:128", "--cluster"), zero3, ExportTarget::kMegatron);
  EXPECT_NE(z.text.find("--use-megatron-fsdp"), std::string::npos) << z.text;
  EXPECT_EQ(z.text.find("--use-distributed-optimizer"), std::string::npos) << z.text;
  ASSERT_EQ(z.not_expressed.size(), 1u);
  EXPECT_NE(z.not_expressed.front().find("kept gathered"), std::string::npos)
      << z.not_expressed.front();
  zero3.fsdp_reshard_after_forward = true;
  EXPECT_TRUE(
      FrameworkGaps(Framework::kMegatronCore, FindModelPreset("llama3-70b")->spec, zero3).empty());
}

// Llama 3 405B's 16 stages of 7, 8 x 14, 7 layers: Megatron-LM's first/last-stage flags;
// MaxText and torchtitan take one layer count per stage and say so.
TEST(ExportTest, UnevenStages) {
  const ModelSpec model = FindModelPreset("llama3-405b")->spec;
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:16384", "--cluster");
  PlanSpec p;
  p.mesh.data = 128;
  p.mesh.tensor = 8;
  p.mesh.pipeline = 16;
  p.global_batch_size = 2048;
  p.seq_len = 8192;
  EXPECT_EQ(StageLayers(model, p), "7, 8 x 14, 7");
  // Megatron-core takes any layout in its own syntax.
  const Export megatron = ExportPlan(model, cluster, p, ExportTarget::kMegatron);
  EXPECT_NE(megatron.text.find("--pipeline-model-parallel-layout \"Et*7|(t*8|)*14t*7L\""),
            std::string::npos)
      << megatron.text;
  // MaxText and DeepSpeed split the layers evenly and say so; torchtitan names each chunk's
  // modules.
  for (ExportTarget target : {ExportTarget::kMaxText, ExportTarget::kDeepSpeed}) {
    const Export e = ExportPlan(model, cluster, p, target);
    bool said = false;
    for (const std::string& gap : e.not_expressed)
      said = said || gap.find("7, 8 x 14, 7") != std::string::npos;
    EXPECT_TRUE(said) << e.text;
  }
  const Export titan16 = ExportPlan(model, cluster, p, ExportTarget::kTorchtitan);
  EXPECT_NE(titan16.text.find("[[\"tok_embeddings\"] + [f\"layers.{i}\" for i in range(0, 7)], "
                              "[f\"layers.{i}\" for i in range(7, 15)]"),
            std::string::npos)
      << titan16.text;
  EXPECT_NE(
      titan16.text.find("[f\"layers.{i}\" for i in range(119, 126)] + [\"norm\", \"lm_head\"]]"),
      std::string::npos)
      << titan16.text;
  EXPECT_TRUE(titan16.not_expressed.empty()) << titan16.not_expressed.front();
  // DeepSeek-V3's 61 layers on 16 stages leave shorter middle stages: Megatron-core's layout
  // says so too.
  const ModelSpec deepseek = FindModelPreset("deepseek-v3")->spec;
  PlanSpec d = p;
  d.mesh = MeshShape{};
  d.mesh.pipeline = 16, d.mesh.expert = 64, d.mesh.data = 2;
  d.global_batch_size = 15360;
  const Export e = ExportPlan(deepseek, ParseClusterPreset("hgx-h800:2048", "--cluster"), d,
                              ExportTarget::kMegatron);
  EXPECT_NE(e.text.find("--pipeline-model-parallel-layout \"Et*3|t*3|(t*4|)*13t*3L\""),
            std::string::npos)
      << e.text;
  EXPECT_EQ(e.text.find("--mtp-num-layers"), std::string::npos) << e.text;
  // With its multi-token-prediction module (the released config.json's): m with the loss, and
  // the count.
  ModelSpec mtp = deepseek;
  mtp.mtp_layers = 1;
  const Export with_mtp = ExportPlan(mtp, ParseClusterPreset("hgx-h800:2048", "--cluster"), d, ExportTarget::kMegatron);
  EXPECT_NE(with_mtp.text.find("--pipeline-model-parallel-layout \"Et*3|t*3|(t*4|)*13t*3mL\""), std::string::npos) << with_mtp.text;
  EXPECT_NE(with_mtp.text.find("--mtp-num-layers 1"), std::string::npos) << with_mtp.text;
  EXPECT_EQ(with_mtp.text.find("--mtp-use-repeated-layer"), std::string::npos) << with_mtp.text;
  // A plan's own pipeline_layout passes through as written.
  PlanSpec own = p;
  own.pipeline_schedule = "interleaved-1f1b";
  own.virtual_stages = 8;
  own.pipeline_layout = "E|(t|)*126L";
  const Export layout = ExportPlan(model, cluster, own, ExportTarget::kMegatron);
  EXPECT_NE(layout.text.find("--pipeline-model-parallel-layout \"E|(t|)*126L\""), std::string::npos)
      << layout.text;
  EXPECT_EQ(layout.text.find("--num-layers-per-virtual-pipeline-stage"), std::string::npos)
      << layout.text;
  const Export titan = ExportPlan(model, cluster, own, ExportTarget::kTorchtitan);
  EXPECT_NE(titan.text.find("[[\"tok_embeddings\"], [f\"layers.{i}\" for i in range(0, 1)]"),
            std::string::npos)
      << titan.text;
}

// A layout other than the default is named where the framework fixes its own rank order.
TEST(ExportTest, NonDefaultLayoutIsNoted) {
  PlanSpec p = SamplePlan();
  p.mesh_order = {"pipeline", "data", "fsdp", "expert", "tensor", "context"};
  const Export e =
      ExportPlan(FindModelPreset("llama3-70b")->spec,
                 ParseClusterPreset("dgx-h100:128", "--cluster"), p, ExportTarget::kMegatron);
  bool said = false;
  for (const std::string& gap : e.not_expressed)
    said = said || gap.find("mesh_order pipeline,data,tensor,context") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_NE(ExportPlan(FindModelPreset("llama3-70b")->spec,
                       ParseClusterPreset("dgx-h100:128", "--cluster"), p, ExportTarget::kJax)
                .text.find("\"tensor\", \"context\")"),
            std::string::npos);
}

TEST(ExportTest, JaxMesh) {
  const std::string t = Text(ExportTarget::kJax);
  EXPECT_NE(
      t.find(
          "axis_names = (\"pipeline\", \"data\", \"fsdp\", \"expert\", \"context\", \"tensor\")"),
      std::string::npos)
      << t;
  EXPECT_NE(t.find("shape = (4, 2, 1, 1, 2, 8)"), std::string::npos) << t;
  EXPECT_NE(t.find("Mesh(devices, axis_names)"), std::string::npos);
}

TEST(ExportTest, UnknownTargetSuggests) {
  try {
    ParseExportTarget("megatrn", "--export");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("megatron"), std::string::npos);
  }
}

}  // namespace
}  // namespace shardsim::planner
