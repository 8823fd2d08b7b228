// Export, then read the settings back: for plans each framework runs (FrameworkGaps empty), the
// plan read back equals the exported one in every field the step depends on, and sim::Estimate
// gives both the same step time.
#include <gtest/gtest.h>

#include "core/error.h"

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "planner/export.h"
#include "planner/export_settings.h"
#include "planner/framework_facts.h"
#include "planner/frameworks.h"
#include "sim/estimate.h"
#include "strategies/build_step.h"
#include "strategies/plan_rules.h"
#include "strategies/schedule.h"
#include "topologies/cluster.h"

namespace shardsim::planner {
namespace {

struct Case {
  std::string name, model, cluster;
  PlanSpec plan;
  int64_t mtp_layers = 0;  // the preset with that many multi-token-prediction modules
};

PlanSpec Plan(std::initializer_list<std::pair<const char*, int64_t>> axes, int64_t global_batch,
              int64_t seq_len) {
  PlanSpec p;
  for (const auto& [axis, size] : axes) p.mesh.Size(axis) = size;
  p.global_batch_size = global_batch;
  p.seq_len = seq_len;
  return p;
}

// A field-by-field comparison of what the step program reads; `why` names the first difference.
bool SameStep(const ModelSpec& m, const PlanSpec& a, const PlanSpec& b, std::string& why) {
  auto differ = [&](const std::string& field) {
    why = field;
    return false;
  };
  if (!(a.mesh == b.mesh))
    return differ("mesh " + DescribeMesh(a.mesh) + " vs " + DescribeMesh(b.mesh));
  if (UsedMeshOrder(a) != UsedMeshOrder(b)) return differ("mesh_order");
  if (a.global_batch_size != b.global_batch_size || a.seq_len != b.seq_len ||
      a.micro_batch_size != b.micro_batch_size)
    return differ("batch");
  if (a.zero_stage != b.zero_stage)
    return differ("zero_stage " + std::to_string(a.zero_stage) + " vs " +
                  std::to_string(b.zero_stage));
  if (a.mesh.tensor > 1 && a.sequence_parallel != b.sequence_parallel)
    return differ("sequence_parallel");
  if (KeepsGatheredSequence(a) != KeepsGatheredSequence(b)) return differ("sequence_parallel_inputs");
  if (ParamGatherBytes(a) != ParamGatherBytes(b)) return differ("param_gather_dtype");
  if (SixteenBitWgrad(a) != SixteenBitWgrad(b)) return differ("wgrad_dtype");
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    if (SixteenBitLayer(a, m.num_layers, layer) != SixteenBitLayer(b, m.num_layers, layer)) return differ("16-bit layer " + std::to_string(layer));
  }
  if (a.mesh.tensor > 1 && a.sequence_parallel && TensorGatherBytes(a, m.hidden_size) != TensorGatherBytes(b, m.hidden_size)) {
    return differ("tensor_gather_dtype");
  }
  if (ExpertAxes(a) != ExpertAxes(b)) return differ("expert_axes");
  if (a.mesh.tensor > 1 && HidesRegionReduceScatter(a, true) != HidesRegionReduceScatter(b, true)) return differ("tensor_overlap_scope");
  if (a.mesh.pipeline > 1 && PipelineBuffersOf(a) != PipelineBuffersOf(b)) return differ("pipeline_buffers");
  if (a.mesh.pipeline > 1) {
    const strategies::Schedule &sa = strategies::ScheduleOf(a), &sb = strategies::ScheduleOf(b);
    if (sa.name() != sb.name())
      return differ("pipeline_schedule " + a.pipeline_schedule + " vs " + b.pipeline_schedule);
    if (sa.Chunks(a.mesh.pipeline, a.virtual_stages) !=
        sb.Chunks(b.mesh.pipeline, b.virtual_stages))
      return differ("chunks");
    const std::vector<ChunkParts> pa = PathParts(m, a), pb = PathParts(m, b);
    if (pa.size() != pb.size()) return differ("layout");
    for (size_t i = 0; i < pa.size(); ++i) {
      if (pa[i].layers != pb[i].layers || pa[i].embedding != pb[i].embedding ||
          pa[i].head != pb[i].head)
        return differ("layout chunk " + std::to_string(i));
    }
  }
  if (a.mesh.pipeline > 1 && a.pipeline_rounds != b.pipeline_rounds) return differ("pipeline_rounds");
  if ((a.mesh.fsdp > 1 || a.zero_stage == 3) && ReshardAfterForward(a) != ReshardAfterForward(b))
    return differ("fsdp_reshard_after_forward");
  if (a.recompute != b.recompute) return differ("recompute");
  if (a.cross_entropy != b.cross_entropy) return differ("cross_entropy " + a.cross_entropy + " vs " + b.cross_entropy);
  if (a.dtype == "fp8" && a.fp8_recipe != b.fp8_recipe) return differ("fp8_recipe " + a.fp8_recipe + " vs " + b.fp8_recipe);
  if (GradReduceBytes(a) != GradReduceBytes(b))
    return differ("grad_reduce_dtype " + a.grad_reduce_dtype + " vs " + b.grad_reduce_dtype);
  if (a.dtype != b.dtype) return differ("dtype " + a.dtype + " vs " + b.dtype);
  if (a.flash_attention != b.flash_attention) return differ("flash_attention");
  if (AttentionKernelOf(a) != AttentionKernelOf(b)) return differ("attention_kernel " + AttentionKernelOf(a) + " vs " + AttentionKernelOf(b));
  if (MasterWeightsOf(a) != MasterWeightsOf(b)) return differ("master_weights " + MasterWeightsOf(a) + " vs " + MasterWeightsOf(b));
  if (a.mesh.context > 1 && a.context_kv != b.context_kv) return differ("context_kv");
  if (m.moe && a.ep_capacity_factor != b.ep_capacity_factor) return differ("ep_capacity_factor");
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (OverlapMatters(a, axis.axis) &&
        a.overlap.Overlaps(axis.axis) != b.overlap.Overlaps(axis.axis))
      return differ("overlap." + std::string(axis.name));
  }
  return true;
}

double StepTime(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p) {
  const topologies::Cluster graph(c);
  sim::AxisCollectives collectives(graph, p, 3);
  return sim::Estimate(strategies::BuildStep(m, p), c, collectives).step_time_s;
}

void RoundTrip(Framework framework, const std::vector<Case>& cases) {
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(FrameworkName(framework)) + ": " + k.name);
    ModelSpec model = FindModelPreset(k.model)->spec;
    model.mtp_layers = k.mtp_layers;
    const ClusterSpec cluster = ParseClusterPreset(k.cluster, "--cluster");
    const PlanSpec plan = AsFrameworkRuns(framework, model, k.plan);
    ASSERT_FALSE(strategies::CheckPlan(plan, model, DeviceCount(cluster), k.cluster))
        << strategies::CheckPlan(plan, model, DeviceCount(cluster), k.cluster)->what;
    const std::vector<std::string> gaps = FrameworkGaps(framework, model, plan);
    ASSERT_TRUE(gaps.empty()) << gaps.front();
    const ExportTarget target =
        ParseExportTarget(std::string(FrameworkName(framework)), "--export");
    const Export e = ExportPlan(model, cluster, plan, target);
    EXPECT_TRUE(e.not_expressed.empty()) << e.not_expressed.front();
    const PlanSpec back = PlanFromExport(target, e.settings, model);
    ASSERT_FALSE(strategies::CheckPlan(back, model, DeviceCount(cluster), k.cluster)) << e.text;
    std::string why;
    EXPECT_TRUE(SameStep(model, CanonicalSharding(plan), back, why)) << why << "\n" << e.text;
    EXPECT_TRUE(FrameworkGaps(framework, model, back).empty()) << e.text;
    const double exported = StepTime(model, cluster, plan),
                 read_back = StepTime(model, cluster, back);
    EXPECT_NEAR(read_back, exported, 1e-9 * exported) << e.text;
  }
}

TEST(ExportRoundTripTest, MegatronCore) {
  std::vector<Case> cases;
  PlanSpec p = Plan({{"data", 2}, {"tensor", 8}, {"pipeline", 4}}, 512, 8192);
  p.sequence_parallel = true, p.pipeline_schedule = "interleaved-1f1b", p.virtual_stages = 5,
  p.zero_stage = 1, p.recompute = Recompute::kSelective;
  cases.push_back({"tp-pp interleaved, distributed optimizer", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"fsdp", 8}, {"tensor", 8}}, 512, 8192);
  p.sequence_parallel = true, p.recompute = Recompute::kFull;
  cases.push_back({"the demo's fsdp=8 as Megatron-FSDP", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 8}, {"tensor", 8}}, 512, 8192);
  p.zero_stage = 1, p.grad_reduce_dtype = "bf16";
  cases.push_back({"distributed optimizer, gradients reduced in bf16", "llama3-70b", "dgx-h100:64", p});
  p.dtype = "fp16", p.grad_reduce_dtype = "fp32";
  cases.push_back({"fp16, gradients accumulated and reduced in fp32", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 2}, {"fsdp", 4}, {"tensor", 8}}, 512, 8192);
  p.zero_stage = 1, p.dtype = "fp8", p.overlap.tensor = true, p.sequence_parallel = true;
  cases.push_back({"HSDP, optimizer over the outer replicas, fp8", "llama3-70b", "dgx-h100:64", p});
  p.fp8_recipe = "blockwise";
  cases.push_back({"the same, block-wise FP8 scaling", "llama3-70b", "dgx-h100:64", p});
  p.fp8_recipe = "mxfp8";
  cases.push_back({"the same, MXFP8", "llama3-70b", "dgx-b200:64", p});
  p.fp8_recipe = "nvfp4";  // --fp4-format e2m1 --fp4-recipe nvfp4
  cases.push_back({"the same, NVFP4", "llama3-70b", "dgx-b200:64", p});
  p.sixteen_bit_first_layers = 2, p.sixteen_bit_last_layers = 1;  // --first-last-layers-bf16
  cases.push_back({"the same, two first layers and the last in 16 bits", "llama3-70b", "dgx-b200:64", p});
  p.fp8_recipe = "tensorwise", p.sixteen_bit_first_layers = 1;
  cases.push_back({"the same at per-tensor current scaling, NeMo's 1 and 1", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"tensor", 4}, {"context", 2}, {"pipeline", 8}}, 256, 16384);
  p.zero_stage = 2, p.context_kv = "all-gather", p.fsdp_reshard_after_forward = true;
  cases.push_back(
      {"context all-gather, ZeRO-2 as optim_grads, 1F1B", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 2}, {"fsdp", 4}, {"tensor", 8}}, 512, 8192);
  p.zero_stage = 3, p.flash_attention = false, p.dtype = "fp16";
  cases.push_back({"ZeRO-3 over data folded into fsdp", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 2}, {"tensor", 8}, {"pipeline", 4}}, 512, 8192);
  p.pipeline_schedule = "interleaved-1f1b", p.virtual_stages = 5,
  p.pipeline_layout = "Et*3|(t*4|)*18t*5L", p.overlap.pipeline = false;
  cases.push_back({"own layout, no p2p overlap", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 2}, {"pipeline", 16}, {"expert", 64}}, 15360, 4096);
  p.zero_stage = 1, p.ep_capacity_factor = 1.25, p.overlap.expert = true;
  cases.push_back({"DeepSeek-V3's 61 layers on 16 stages", "deepseek-v3", "hgx-h800:2048", p});
  p.dtype = "fp8", p.fp8_recipe = "mxfp8", p.ep_dispatch_dtype = "fp8";
  cases.push_back({"the same, MXFP8 with the dispatch in MXFP8", "deepseek-v3", "dgx-b200:2048", p});
  p.param_gather_dtype = "fp8";
  cases.push_back({"the same, its weights gathered in MXFP8", "deepseek-v3", "dgx-b200:2048", p});
  p.fp8_recipe = "nvfp4", p.ep_dispatch_dtype = "bf16";  // --fp4-param-gather
  cases.push_back({"the same in NVFP4, its weights gathered in NVFP4", "deepseek-v3", "dgx-b200:2048", p});
  // With its multi-token-prediction module, on stages the search balances (planner/balanced_layout.h):
  // the module travels as the layout's `m` and --mtp-num-layers.
  p = Plan({{"data", 2}, {"pipeline", 16}, {"expert", 64}}, 15360, 4096);
  p.zero_stage = 1, p.pipeline_layout = "Et*4|(t*4|)*14tmL";
  cases.push_back({"DeepSeek-V3 with its MTP module on balanced stages", "deepseek-v3", "hgx-h800:2048", p, 1});
  p = Plan({{"data", 2}, {"pipeline", 16}, {"expert", 64}}, 15360, 4096);
  p.zero_stage = 1, p.ep_dispatcher = "deepep";
  cases.push_back({"DeepSeek-V3 with DeepEP's flex dispatcher", "deepseek-v3", "hgx-h800:2048", p});
  // MoE parallel folding: expert parallelism beyond the data-parallel ranks, over context (the
  // NeMo Mixtral 8x22B runs) and over tensor with --expert-tensor-parallel-size 1.
  p = Plan({{"data", 4}, {"tensor", 2}, {"context", 8}, {"pipeline", 4}}, 64, 65536);
  p.sequence_parallel = true, p.zero_stage = 1, p.pipeline_schedule = "interleaved-1f1b", p.virtual_stages = 14;
  p.expert_axes = {"context"};
  cases.push_back({"Mixtral 8x22B, experts folded over context", "mixtral-8x22b", "dgx-b200:256", p});
  p = Plan({{"data", 8}, {"tensor", 2}, {"context", 2}, {"pipeline", 4}}, 64, 16384);
  p.sequence_parallel = true, p.zero_stage = 1;
  p.expert_axes = {"tensor", "context"};
  cases.push_back({"Mixtral 8x22B, whole experts folded over tensor and context", "mixtral-8x22b", "dgx-b200:128", p});
  p.expert_axes = {"tensor", "context", "expert"};
  p.mesh.expert = 2, p.mesh.data = 4;
  cases.push_back({"the same, and over 2 data ranks", "mixtral-8x22b", "dgx-b200:128", p});
  // A hybrid model's chunks travel as '|' segments of --hybrid-layer-pattern.
  p = Plan({{"data", 8}, {"tensor", 2}, {"pipeline", 4}}, 256, 4096);
  p.sequence_parallel = true, p.zero_stage = 1;
  cases.push_back({"Nemotron 3 Nano on 4 stages", "nemotron-3-nano-30b-a3b", "dgx-h100:64", p});
  p.pipeline_schedule = "interleaved-1f1b", p.virtual_stages = 2;
  cases.push_back({"the same, 2 chunks per stage (uneven: 52 layers in 8 chunks)", "nemotron-3-nano-30b-a3b", "dgx-h100:64", p});
  p.pipeline_schedule = "1f1b", p.virtual_stages = 1, p.pipeline_layout = "Et*10|t*14|t*14|t*14L";
  cases.push_back({"the same, its own layout on 4 stages", "nemotron-3-nano-30b-a3b", "dgx-h100:64", p});
  // Activation offloading: --cpu-offloading with the first layers' count.
  p = Plan({{"fsdp", 64}, {"tensor", 2}}, 64, 8192);
  p.sequence_parallel = true, p.zero_stage = 3, p.offload_layers = 95;
  cases.push_back({"Llama 3.1 405B with 95 layers offloaded", "llama3-405b", "gb200-nvl72:128,domain=64", p});
  RoundTrip(Framework::kMegatronCore, cases);
}

TEST(ExportRoundTripTest, Torchtitan) {
  std::vector<Case> cases;
  PlanSpec p = Plan({{"fsdp", 8}, {"tensor", 8}}, 512, 8192);
  p.sequence_parallel = true, p.overlap.tensor = true, p.recompute = Recompute::kFull;
  cases.push_back({"FSDP2 x async TP", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 2}, {"fsdp", 4}, {"tensor", 8}}, 512, 8192);
  p.recompute = Recompute::kSelectiveOp;
  cases.push_back({"HSDP, per-op selective recomputation", "llama3-70b", "dgx-h100:64", p});
  p.cross_entropy = "fused";
  cases.push_back({"HSDP, compiled loss", "llama3-70b", "dgx-h100:64", p});
  p.elementwise_kernels = "fused";
  cases.push_back({"HSDP, compiled model and loss", "llama3-70b", "dgx-h100:64", p});
  p.attention_kernel = "flex";
  cases.push_back({"HSDP, FlexAttention", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"fsdp", 8}, {"tensor", 8}}, 512, 8192);
  p.sequence_parallel = true, p.overlap.tensor = true, p.cross_entropy = "fused";
  cases.push_back({"async TP with a compiled loss", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"fsdp", 2}, {"tensor", 8}, {"pipeline", 4}}, 512, 8192);
  p.pipeline_schedule = "interleaved-1f1b", p.virtual_stages = 5, p.dtype = "fp8";
  cases.push_back({"FSDP under Interleaved1F1B, float8 row-wise", "llama3-70b", "dgx-h100:64", p});
  p.wgrad_dtype = "bf16";  // recipe_name="rowwise_with_gw_hp"
  cases.push_back({"the same, its weight gradients in 16 bits", "llama3-70b", "dgx-h100:64", p});
  p.wgrad_dtype = "";
  p.sixteen_bit_first_layers = 1, p.sixteen_bit_last_layers = 2;  // filter_fqns + layers.N.
  cases.push_back({"the same, its first layer and last two in 16 bits", "llama3-70b", "dgx-h100:64", p});
  p.sixteen_bit_first_layers = 0, p.sixteen_bit_last_layers = 0;
  p.fp8_recipe = "mxfp8";
  cases.push_back({"FSDP under Interleaved1F1B, MXFP8", "llama3-70b", "dgx-b200:64", p});
  p.fp8_recipe = "nvfp4";
  cases.push_back({"FSDP under Interleaved1F1B, NVFP4", "llama3-70b", "dgx-b200:64", p});
  p.sixteen_bit_last_layers = 12;  // fqns: the converted layers (nvfp4_bf16_tail_fqns' 15%)
  cases.push_back({"the same, a 16-bit tail", "llama3-70b", "dgx-b200:64", p});
  p.sixteen_bit_last_layers = 0;
  p = Plan({{"fsdp", 4}, {"context", 2}, {"tensor", 8}}, 256, 32768);
  p.zero_stage = 3, p.context_kv = "all-gather", p.fsdp_reshard_after_forward = false;
  cases.push_back({"context parallel, sharded over dp_shard x cp", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"fsdp", 8}, {"pipeline", 8}}, 512, 8192);
  p.pipeline_schedule = "zbv";
  cases.push_back({"ZBVZeroBubble", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"fsdp", 8}, {"pipeline", 8}}, 512, 8192);
  p.pipeline_layout = "Et*9|(t*10|)*6t*11L";
  cases.push_back({"uneven stages by module_fqns_per_model_part", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"tensor", 8}, {"pipeline", 8}}, 64, 8192);  // nothing reduced over replicas
  p.pipeline_rounds = 4;  // 64 micro-batches a step: 4 accumulation steps of 16 (num_pp_microbatches)
  cases.push_back({"gradient accumulation steps, a schedule each", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"fsdp", 8}, {"expert", 8}}, 512, 4096);
  p.zero_stage = 3;
  cases.push_back({"experts over dp_shard", "mixtral-8x7b", "dgx-h100:64", p});
  p.ep_dispatcher = "deepep";
  cases.push_back({"the same, DeepEP's dispatcher", "mixtral-8x7b", "dgx-h100:64", p});
  p.expert_routing = "round-robin";
  cases.push_back({"the same, routed round-robin (debug.moe_force_load_balance)", "mixtral-8x7b", "dgx-h100:64", p});
  RoundTrip(Framework::kTorchtitan, cases);
}

TEST(ExportRoundTripTest, MaxText) {
  std::vector<Case> cases;
  PlanSpec p = Plan({{"fsdp", 128}, {"tensor", 4}}, 1024, 8192);
  p.sequence_parallel = true, p.recompute = Recompute::kFull;
  cases.push_back({"fsdp x tensor", "llama3-70b", "tpu-v5p:8x8x8", p});
  p.overlap.tensor = true;
  cases.push_back({"fsdp x tensor, collectives fused with compute (LIBTPU_INIT_ARGS)", "llama3-70b", "tpu-v5p:8x8x8", p});
  p.overlap.tensor = false;
  p = Plan({{"data", 4}, {"fsdp", 32}, {"tensor", 4}}, 1024, 8192);
  p.sequence_parallel = true, p.zero_stage = 1, p.recompute = Recompute::kMinimal;
  cases.push_back({"optimizer over data", "llama3-70b", "tpu-v5p:8x8x8", p});
  for (Recompute named : {Recompute::kSaveQkvProj, Recompute::kSaveDotExceptMlp, Recompute::kSaveDotWithContextExceptMlp, Recompute::kSaveOutProj}) {
    p.recompute = named;
    cases.push_back({"remat " + ToString(named), "llama3-70b", "tpu-v5p:8x8x8", p});
  }
  p = Plan({{"pipeline", 4}, {"fsdp", 32}, {"tensor", 4}}, 1024, 8192);
  p.sequence_parallel = true, p.pipeline_schedule = "gpipe", p.micro_batch_size = 2;
  cases.push_back({"GPipe-ordered pipeline, fsdp gathered once", "llama3-70b", "tpu-v5p:8x8x8", p});
  PlanSpec rounds = Plan({{"pipeline", 4}, {"tensor", 4}}, 32, 8192);  // nothing reduced over replicas
  rounds.sequence_parallel = true, rounds.pipeline_schedule = "gpipe", rounds.pipeline_rounds = 2;
  cases.push_back({"a pipeline run twice a step (gradient_accumulation_steps)", "llama3-70b", "tpu-v5p:2x2x4", rounds});
  p = Plan({{"fsdp", 32}, {"context", 4}, {"tensor", 4}}, 256, 65536);
  p.sequence_parallel = true, p.zero_stage = 3, p.fsdp_reshard_after_forward = true;
  cases.push_back({"ring context parallel", "llama3-70b", "tpu-v5p:8x8x8", p});
  p = Plan({{"data", 2}, {"fsdp", 128}, {"tensor", 4}}, 2048, 8192);
  p.sequence_parallel = true,
  p.mesh_order = {"data", "pipeline", "fsdp", "context", "tensor", "expert"};
  cases.push_back({"two slices over data", "llama3-70b", "tpu-v5p:8x8x8,slices=2", p});
  p = Plan({{"fsdp", 16}, {"tensor", 4}, {"expert", 8}}, 1024, 4096);
  p.sequence_parallel = true, p.zero_stage = 3, p.ep_capacity_factor = 1.5,
  p.mesh_order = {"data", "pipeline", "fsdp", "context", "tensor", "expert"};
  cases.push_back({"experts innermost", "mixtral-8x7b", "tpu-v5p:8x8x8", p});
  // The offloaded policies: every layer's kept set in host memory.
  p = Plan({{"fsdp", 64}}, 256, 8192);
  p.recompute = Recompute::kSaveQkvProj, p.offload_layers = 80;
  cases.push_back({"qkv_proj_offloaded", "llama3-70b", "dgx-h100:64", p});
  p.recompute = Recompute::kMinimal;
  cases.push_back({"minimal_offloaded", "llama3-70b", "dgx-h100:64", p});
  RoundTrip(Framework::kMaxText, cases);
}

// MaxText's other names for the same sets import as them ("none" leaves nn.remat without a
// policy: full; save_dot_except_mlpwi names the down projection too, which no backward reads);
// the offloaded policies import as their set with every layer offloaded; a policy with no set
// (custom) is refused naming the key.
TEST(ExportRoundTripTest, MaxTextRematAliasesAndUnknownPolicies) {
  const ModelSpec model = FindModelPreset("llama3-70b")->spec;
  const ClusterSpec cluster = ParseClusterPreset("tpu-v5p:8x8x8", "--cluster");
  PlanSpec p = Plan({{"fsdp", 128}, {"tensor", 4}}, 1024, 8192);
  p.sequence_parallel = true, p.recompute = Recompute::kFull;
  const ExportTarget target = ParseExportTarget("maxtext", "--export");
  const Export e = ExportPlan(model, cluster, AsFrameworkRuns(Framework::kMaxText, model, p), target);
  auto with_remat = [&](const std::string& policy) {
    std::vector<Setting> settings = e.settings;
    for (Setting& s : settings) {
      if (s.name == "remat_policy") s.value = policy;
    }
    return settings;
  };
  EXPECT_EQ(PlanFromExport(target, with_remat("none"), model).recompute, Recompute::kFull);
  EXPECT_EQ(PlanFromExport(target, with_remat("save_dot_except_mlpwi"), model).recompute, Recompute::kSaveDotExceptMlp);
  EXPECT_EQ(PlanFromExport(target, with_remat("minimal_with_context"), model).recompute, Recompute::kNone);
  const PlanSpec offloaded = PlanFromExport(target, with_remat("qkv_proj_offloaded"), model);
  EXPECT_EQ(offloaded.recompute, Recompute::kSaveQkvProj);
  EXPECT_EQ(offloaded.offload_layers, model.num_layers);
  EXPECT_EQ(PlanFromExport(target, with_remat("minimal_offloaded"), model).recompute, Recompute::kMinimal);
  EXPECT_EQ(PlanFromExport(target, with_remat("minimal"), model).offload_layers, 0);
  try {
    PlanFromExport(target, with_remat("custom"), model);
    ADD_FAILURE() << "a custom policy was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("remat_policy"), std::string::npos) << error.what();
  }
}

// Settings read back that shardsim does not model, or that contradict the model, are refused
// naming the setting: Megatron's hybridep backend or one it does not have, a hybrid pattern other than the model's or
// split into a number of segments the stages do not share, torchtitan's other comm backends.
TEST(ExportRoundTripTest, DispatchersAndHybridSegmentsThatDoNotReadBack) {
  auto refused = [](ExportTarget target, const Export& e, const std::string& name, const std::string& value, const ModelSpec& model) {
    std::vector<Setting> settings = e.settings;
    bool found = false;
    for (Setting& s : settings) {
      if (s.name == name) s.value = value, found = true;
    }
    if (!found) settings.push_back({name, value});
    try {
      PlanFromExport(target, settings, model);
    } catch (const InputError& error) {
      return std::string(error.what()).find(name) != std::string::npos;
    }
    return false;
  };
  const ModelSpec mixtral = FindModelPreset("mixtral-8x7b")->spec;
  const ClusterSpec h100 = ParseClusterPreset("dgx-h100:64", "--cluster");
  PlanSpec moe = Plan({{"fsdp", 8}, {"expert", 8}}, 512, 4096);
  moe.zero_stage = 3, moe.ep_dispatcher = "deepep";
  const ExportTarget megatron = ParseExportTarget("megatron-core", "--export"), torchtitan = ParseExportTarget("torchtitan", "--export");
  const Export m = ExportPlan(mixtral, h100, AsFrameworkRuns(Framework::kMegatronCore, mixtral, moe), megatron);
  EXPECT_TRUE(refused(megatron, m, "--moe-flex-dispatcher-backend", "hybridep", mixtral));
  EXPECT_TRUE(refused(megatron, m, "--moe-flex-dispatcher-backend", "deep-ep", mixtral)) << "an unknown backend, not read as every copy";
  const Export t = ExportPlan(mixtral, h100, AsFrameworkRuns(Framework::kTorchtitan, mixtral, moe), torchtitan);
  EXPECT_TRUE(refused(torchtitan, t, "launch.moe_comm_backend", "\"hybridep\"", mixtral));
  const ModelSpec nano = FindModelPreset("nemotron-3-nano-30b-a3b")->spec;
  PlanSpec piped = Plan({{"data", 8}, {"tensor", 2}, {"pipeline", 4}}, 256, 4096);
  piped.sequence_parallel = true, piped.zero_stage = 1;
  const Export h = ExportPlan(nano, h100, AsFrameworkRuns(Framework::kMegatronCore, nano, piped), megatron);
  std::string reordered = nano.hybrid_pattern;
  std::swap(reordered[0], reordered[1]);
  EXPECT_TRUE(refused(megatron, h, "--hybrid-layer-pattern", "\"" + reordered.substr(0, 26) + "|" + reordered.substr(26) + "\"", nano));
  EXPECT_TRUE(refused(megatron, h, "--hybrid-layer-pattern", "\"" + nano.hybrid_pattern.substr(0, 20) + "|" + nano.hybrid_pattern.substr(20, 20) + "|" +
                                                                 nano.hybrid_pattern.substr(40) + "\"", nano));
  // A hybrid model's modules: their layers and the repeated layer travel, and read back only onto
  // the model that has them.
  ModelSpec mtp = nano;
  mtp.mtp_layers = 2, mtp.mtp_pattern = "*E", mtp.mtp_shared_weights = true;
  const Export with_mtp = ExportPlan(mtp, h100, AsFrameworkRuns(Framework::kMegatronCore, mtp, piped), megatron);
  EXPECT_NE(with_mtp.text.find("--mtp-hybrid-override-pattern \"*E\""), std::string::npos) << with_mtp.text;
  EXPECT_NE(with_mtp.text.find("--mtp-use-repeated-layer"), std::string::npos) << with_mtp.text;
  EXPECT_NO_THROW(PlanFromExport(megatron, with_mtp.settings, mtp));
  EXPECT_TRUE(refused(megatron, with_mtp, "--mtp-hybrid-override-pattern", "\"*-\"", mtp));
  ModelSpec own_weights = mtp;
  own_weights.mtp_shared_weights = false;
  EXPECT_TRUE(refused(megatron, with_mtp, "--mtp-use-repeated-layer", "", own_weights));
  // 16-bit first and last layers under delayed scaling, Megatron-core's default recipe, which
  // refuses them; torchtitan's 16-bit layers named where they are neither first nor last.
  const ModelSpec llama = FindModelPreset("llama3-70b")->spec;
  PlanSpec fp8 = Plan({{"data", 8}, {"tensor", 8}}, 512, 8192);
  fp8.zero_stage = 1, fp8.dtype = "fp8", fp8.sixteen_bit_first_layers = 1;
  const Export kept = ExportPlan(llama, h100, AsFrameworkRuns(Framework::kMegatronCore, llama, fp8), megatron);
  EXPECT_NO_THROW(PlanFromExport(megatron, kept.settings, llama));
  std::vector<Setting> delayed = kept.settings;
  for (Setting& s : delayed) {
    if (s.name == "--fp8-recipe") s.value = "delayed";
  }
  try {
    PlanFromExport(megatron, delayed, llama);
    ADD_FAILURE() << "read back under delayed scaling";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("--first-last-layers-bf16"), std::string::npos) << error.what();
  }
  const Export t16 = ExportPlan(llama, h100, AsFrameworkRuns(Framework::kTorchtitan, llama, fp8), torchtitan);
  EXPECT_TRUE(refused(torchtitan, t16, "launch.model_converters",
                      "[Float8LinearConverter.Config(filter_fqns=[\"lm_head\"] + [f\"layers.{i}.\" for i in range(3, 5)])]", llama));
}

TEST(ExportRoundTripTest, DeepSpeed) {
  std::vector<Case> cases;
  PlanSpec p = Plan({{"data", 64}}, 512, 4096);
  p.zero_stage = 1;
  cases.push_back({"ZeRO-1", "llama3-8b", "dgx-h100:64", p});
  p = Plan({{"fsdp", 64}}, 512, 4096);
  p.recompute = Recompute::kFull, p.fsdp_reshard_after_forward = true;
  cases.push_back({"ZeRO-3", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 8}, {"fsdp", 8}}, 512, 4096);
  cases.push_back({"MiCS", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 8}, {"pipeline", 8}}, 512, 4096);
  p.zero_stage = 1, p.recompute = Recompute::kFull;
  cases.push_back({"PipelineModule, 1F1B", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 8}, {"tensor", 8}}, 512, 4096);
  p.zero_stage = 2, p.dtype = "fp16", p.overlap.tensor = true;
  cases.push_back({"AutoTP with ZeRO-2", "llama3-70b", "dgx-h100:64", p});
  p = Plan({{"data", 8}, {"expert", 8}}, 512, 4096);
  p.zero_stage = 2;
  cases.push_back({"AutoEP", "mixtral-8x7b", "dgx-h100:64", p});
  p = Plan({{"fsdp", 8}, {"data", 8}}, 512, 4096);
  p.grad_reduce_dtype = "fp32";
  cases.push_back({"MiCS, gradients reduced in fp32", "llama3-70b", "dgx-h100:64", p});
  RoundTrip(Framework::kDeepSpeed, cases);
}

}  // namespace
}  // namespace shardsim::planner
