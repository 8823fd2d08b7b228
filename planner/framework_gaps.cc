// FrameworkGapsByField's body: each rule reads a fact of the framework's row
// (planner/framework_facts.cc) and says, in one phrase, what of the plan the framework does not
// run, at the plan field a user would change. Strings are built only for the gaps found: the
// search asks this of every candidate plan.
#include <algorithm>
#include <string>
#include <vector>

#include "core/suggest.h"
#include "planner/framework_facts.h"
#include "strategies/context_parallel.h"
#include "strategies/data_parallel.h"
#include "strategies/schedule.h"
#include "strategies/stage_layout.h"

namespace shardsim::planner {
namespace {

int Position(const FrameworkFacts& f, MeshAxis axis) {
  for (size_t i = 0; i < f.mesh_order.size(); ++i) {
    if (f.mesh_order[i] == axis) return static_cast<int>(i);
  }
  return -1;
}

// The plan's data-parallel sharding in CanonicalSharding's form, without copying the plan.
bool ParamsSharded(const DataParallelSharding& s) {
  return s.fsdp > 1 || (s.zero == 3 && s.replicas);
}

std::string N(int64_t n) { return std::to_string(n); }

// Decoder layers per chunk along the first path.
std::vector<int64_t> PartLayers(const strategies::StageLayout& layout) {
  std::vector<int64_t> layers;
  for (const auto& [stage, chunk] : layout.paths.front()) layers.push_back(layout.Chunk(stage, chunk).layers);
  return layers;
}

void ShardingGaps(const FrameworkFacts& f, const PlanSpec& p, const DataParallelSharding& s,
                  std::vector<FrameworkGap>& gaps) {
  const bool others = p.mesh.context > 1 || p.mesh.expert > 1;  // replica axes besides data
  const std::string zero = "ZeRO-" + N(s.zero);
  switch (f.sharding) {
    case ShardingFamily::kZeroOverAll:
      if (s.fsdp > 1 && s.replicas && s.zero < 3) {
        if (others) {
          gaps.push_back({"/zero_stage", "fsdp=" + N(s.fsdp) +
                         " beside context or expert replicas below ZeRO-3: " + std::string(f.name) +
                         " shards over all data-parallel ranks x context together"});
        } else if (f.framework == Framework::kMegatronCore && s.zero == 2) {
          gaps.push_back({"/zero_stage", 
              "ZeRO-2 over data with fsdp: Megatron-FSDP's outer replicas shard nothing or the "
              "optimizer (no_shard, optim)"});
        } else if (f.framework == Framework::kDeepSpeed && s.zero > 0) {
          gaps.push_back({"/zero_stage", zero +
                         " over data with fsdp: DeepSpeed's MiCS shards only within its groups"});
        }
      }
      break;
    case ShardingFamily::kFsdpOverShard:
    case ShardingFamily::kWeightsOverShardAxes:
      if (others && !(s.zero == 3 && s.data == 1)) {
        gaps.push_back({"/zero_stage", std::string(f.name) +
                       " shards parameters over context and expert ranks too (" +
                       (f.sharding == ShardingFamily::kFsdpOverShard ? "FSDP2 over dp_shard x cp"
                                                                     : "logical rule embed") +
                       "): only ZeRO-3 with data=1 is that"});
      } else if (!others && s.data > 1 &&
                 s.zero > (f.sharding == ShardingFamily::kWeightsOverShardAxes ? 1 : 0)) {
        gaps.push_back({"/zero_stage", zero + " over data: " + std::string(f.name) + " replicates over data" +
                       (f.sharding == ShardingFamily::kWeightsOverShardAxes
                            ? ", sharding at most the optimizer state (shard_optimizer_over_data)"
                            : " (data_parallel_replicate_degree); put the sharding on fsdp")});
      }
      break;
  }
  if (p.mesh.pipeline > 1 && s.zero > f.max_zero_with_pipeline) {
    gaps.push_back({"/zero_stage", zero + " with pipeline parallelism: " + std::string(f.name) +
                   " runs ZeRO up to " + N(f.max_zero_with_pipeline) + " with it"});
  }
  if (p.mesh.pipeline > 1 && s.fsdp > 1 && !f.fsdp_with_pipeline) {
    gaps.push_back({"/mesh/fsdp", "fsdp with pipeline parallelism: " + std::string(f.name) +
                   " does not shard parameters under its pipeline engine"});
  }
  if (!p.grad_reduce_dtype.empty()) {
    const std::vector<std::string> settable = GradReduceSettable(f, p);
    if (std::find(settable.begin(), settable.end(), p.grad_reduce_dtype) == settable.end()) {
      std::string can;
      for (const std::string& d : settable) can += (can.empty() ? "" : " or ") + d;
      gaps.push_back({"/grad_reduce_dtype", "grad_reduce_dtype " + p.grad_reduce_dtype + ": " + std::string(f.name) + " reduces this plan's gradients in " + can});
    }
  }
  if (p.elementwise_kernels == "eager-fused-norm") {
    // torchtitan's norm_type fused_rmsnorm, removed in #826 (2025-02); no profile runs it now.
    gaps.push_back({"/elementwise_kernels", "eager kernels beside a fused RMSNorm (elementwise_kernels eager-fused-norm): " + std::string(f.name) +
                   (f.framework == Framework::kTorchtitan ? " removed its fused_rmsnorm in #826 (2025-02)" : " has no such mode")});
  } else if ((p.elementwise_kernels == "fused" && !f.fused_elementwise) || (p.elementwise_kernels == "eager" && !f.eager_elementwise)) {
    gaps.push_back({"/elementwise_kernels", p.elementwise_kernels + " elementwise kernels: " + std::string(f.name) + " runs its norms, activations and rotary embeddings " +
                   (f.fused_elementwise ? "fused" : "eagerly")});
  } else if (f.framework == Framework::kTorchtitan && p.elementwise_kernels == "eager" && p.mesh.tensor > 1 && p.overlap.tensor) {
    // configs.py: enable_async_tensor_parallel requires compile.enable with "model" compiled.
    gaps.push_back({"/elementwise_kernels", "eager elementwise kernels beside async tensor parallelism (overlap.tensor): torchtitan compiles the model for it"});
  }
  if ((p.cross_entropy == "fused" && !f.fused_cross_entropy) || (p.cross_entropy == "eager" && !f.eager_cross_entropy)) {
    gaps.push_back({"/cross_entropy", p.cross_entropy + " cross-entropy: " + std::string(f.name) + " computes the loss " +
                   (f.fused_cross_entropy ? "fused" : "eagerly, over an fp32 copy of the logits")});
  }
  if (p.dtype == "fp8" && !p.fp8_recipe.empty()) {
    const std::vector<std::string>& recipes = Fp8RecipeNames();
    std::string runs;
    bool runs_it = false;
    for (size_t i = 0; i < recipes.size(); ++i) {
      if (!f.fp8_recipes[i]) continue;
      runs += (runs.empty() ? "" : ", ") + recipes[i];
      runs_it = runs_it || recipes[i] == p.fp8_recipe;
    }
    if (!runs_it && !runs.empty()) gaps.push_back({"/fp8_recipe", p.fp8_recipe + " fp8 scaling: " + std::string(f.name) + " scales " + runs});
  }
  if (p.ep_dispatch_dtype == "fp8" && Fp8RecipeOf(p) != f.fp8_dispatch_recipe) {
    gaps.push_back({"/ep_dispatch_dtype", f.fp8_dispatch_recipe.empty()
                       ? "fp8 expert dispatch (ep_dispatch_dtype): " + std::string(f.name) + " moves the expert all-to-alls at the activations' width"
                       : "fp8 expert dispatch under " + Fp8RecipeOf(p) + " scaling: " + std::string(f.name) + " quantises it under " +
                             std::string(f.fp8_dispatch_recipe) + " only"});
  }
  if (DeduplicatesDispatch(p) && f.deepep_setting.empty()) {
    gaps.push_back({"/ep_dispatcher", "deduplicated expert dispatch (ep_dispatcher deepep): " + std::string(f.name) + "'s expert all-to-alls send every routed copy"});
  } else if (DeduplicatesDispatch(p) && p.ep_dispatch_dtype == "fp8") {
    gaps.push_back({"/ep_dispatch_dtype", "fp8 expert dispatch with ep_dispatcher deepep: " + std::string(f.name) + " quantises the dispatch on another dispatcher only"});
  }
  if (p.expert_routing == "round-robin" && f.round_robin_setting.empty()) {
    gaps.push_back({"/expert_routing", "round-robin expert routing (expert_routing): " + std::string(f.name) + "'s routers follow their scores"});
  }
  // 16-bit weight-gradient products keep 16-bit inputs in any framework (wgrad_dtype's own gap).
  const bool sixteen_bit_inputs = SixteenBitWgrad(p) && p.saved_input_dtype == "bf16";
  if (p.dtype == "fp8" && !p.saved_input_dtype.empty() && !f.saved_input_dtype.empty() && p.saved_input_dtype != f.saved_input_dtype && !sixteen_bit_inputs) {
    gaps.push_back({"/saved_input_dtype", "saved_input_dtype " + p.saved_input_dtype + ": " + std::string(f.name) + " keeps its FP8 products' inputs for the backward in " +
                   std::string(f.saved_input_dtype == "fp8" ? "FP8" : "16 bits")});
  }
  if (GathersSequence(p) && !p.sequence_parallel_inputs.empty() && !f.sequence_parallel_inputs.empty() &&
      p.sequence_parallel_inputs != f.sequence_parallel_inputs) {
    gaps.push_back({"/sequence_parallel_inputs", "sequence_parallel_inputs " + p.sequence_parallel_inputs + ": " + std::string(f.name) + "'s sequence-parallel regions " +
                   (f.sequence_parallel_inputs == "regather" ? "keep the shard and gather it again in the backward" : "keep their gathered input")});
  }
  if (p.mesh.pipeline > 1 && !p.pipeline_buffers.empty() && !f.pipeline_buffers.empty() && p.pipeline_buffers != f.pipeline_buffers) {
    gaps.push_back({"/pipeline_buffers", "pipeline_buffers " + p.pipeline_buffers + ": " + std::string(f.name) + "'s pipeline stages " +
                   (f.pipeline_buffers == "per-transfer" ? "make each receive buffer per transfer and free each output once sent"
                                                         : "keep a receive buffer per micro-batch and each output to its backward")});
  }
  if (p.mesh.tensor > 1 && p.overlap.tensor && !p.tensor_overlap_scope.empty() && !f.tensor_overlap_scope.empty() &&
      p.tensor_overlap_scope != f.tensor_overlap_scope) {
    gaps.push_back({"/tensor_overlap_scope", "tensor_overlap_scope " + p.tensor_overlap_scope + ": " + std::string(f.name) + "'s tensor overlap " +
                   (f.tensor_overlap_scope == "all" ? "hides every region's collectives" : "leaves reductions of summed products blocking")});
  }
  if (AttentionKernelOf(p) == "triton") {
    gaps.push_back({"/attention_kernel", "attention_kernel triton: " + std::string(f.name) + " runs no Triton FlashAttention (LLM Foundry's attn_impl triton)"});
  } else if (AttentionKernelOf(p) == "flex" && f.flex_attention_setting.empty()) {
    gaps.push_back({"/attention_kernel", "attention_kernel flex: " + std::string(f.name) + " runs its fused attention kernels, not PyTorch's FlexAttention"});
  }
  if (p.dtype != "fp32" && !p.master_weights.empty() && p.master_weights != f.master_weights) {
    gaps.push_back({"/master_weights", "master_weights " + p.master_weights + ": " + std::string(f.name) + " holds " + MasterWeightsPhrase(f.master_weights)});
  }
  const std::string recipe = p.fp8_recipe.empty() ? std::string(f.fp8_recipe_default) : p.fp8_recipe;
  if (SixteenBitWgrad(p) && recipe != f.wgrad_bf16_recipe) {
    gaps.push_back({"/wgrad_dtype", "wgrad_dtype bf16: " + std::string(f.name) +
                                        (f.wgrad_bf16_recipe.empty() ? " runs its weight-gradient products in FP8 (no setting keeps them 16-bit)"
                                                                     : " keeps weight-gradient products 16-bit under fp8_recipe " + std::string(f.wgrad_bf16_recipe) + " only"),
                    f.wgrad_bf16_recipe.empty() ? "fp8" : "fp8, or fp8_recipe " + std::string(f.wgrad_bf16_recipe)});
  }
  if (HasSixteenBitLayers(p) && f.fp8 && f.sixteen_bit_layers_setting.empty()) {
    gaps.push_back({"/sixteen_bit_first_layers", "decoder layers kept at 16 bits (sixteen_bit_first_layers, sixteen_bit_last_layers): " + std::string(f.name) +
                                                     " runs every decoder layer at the plan's FP8 recipe (no setting keeps some at 16 bits)",
                    "0"});
  }
  if (!p.memory_allocator.empty() && p.memory_allocator != f.memory_allocator) {
    gaps.push_back({"/memory_allocator", "memory_allocator " + p.memory_allocator + ": " + std::string(f.name) + " allocates " +
                                             (f.memory_allocator == "static" ? "its buffers by liveness at compile time (XLA)" : "through PyTorch's caching allocator")});
  }
  if (p.dtype == "fp8" && GathersSequence(p) && !p.tensor_gather_dtype.empty() && (p.tensor_gather_dtype == "fp8") != f.fp8_tensor_gather) {
    gaps.push_back({"/tensor_gather_dtype", "tensor_gather_dtype " + p.tensor_gather_dtype + ": " + std::string(f.name) + " gathers its FP8 products' inputs over tensor in " +
                                                std::string(f.fp8_tensor_gather ? "FP8" : "16 bits")});
  }
  if (p.dtype == "fp8" && !p.fp8_weight_casts.empty() && !f.fp8_weight_casts.empty() && p.fp8_weight_casts != f.fp8_weight_casts) {
    gaps.push_back({"/fp8_weight_casts", "fp8_weight_casts " + p.fp8_weight_casts + ": " + std::string(f.name) + " casts its FP8 products' weights " +
                                             (f.fp8_weight_casts == "per-step" ? "once a step (a cached FP8 copy)" : "in every forward and backward"),
                    std::string(f.fp8_weight_casts)});
  }
  if (p.param_gather_dtype == "fp8" && !f.fp8_param_gather) {
    gaps.push_back({"/param_gather_dtype", "FP8 parameter gathers (param_gather_dtype fp8): " + std::string(f.name) + " gathers 16-bit weights"});
  }
  const bool keeps = ParamsSharded(s) && !ReshardAfterForward(p);
  if (keeps && (f.keep_gathered == KeepGathered::kNever ||
                (f.keep_gathered == KeepGathered::kWithPipelineOnly && p.mesh.pipeline == 1))) {
    gaps.push_back({"/fsdp_reshard_after_forward", 
        "sharded parameters kept gathered for the whole step (fsdp_reshard_after_forward false): " +
        std::string(f.name) + " frees them after each forward" +
        (f.keep_gathered == KeepGathered::kWithPipelineOnly ? " outside pipelines" : "")});
  }
}

void PipelineGaps(const FrameworkFacts& f, const ModelSpec& m, const PlanSpec& p,
                  std::vector<FrameworkGap>& gaps) {
  if (p.mesh.pipeline == 1) return;  // a single stage is gradient accumulation everywhere
  const strategies::Schedule& schedule = strategies::ScheduleOf(p);
  const strategies::FrameworkScheduleNames names = schedule.framework_names();
  const std::string_view name = f.framework == Framework::kMegatronCore ? names.megatron_core
                                : f.framework == Framework::kTorchtitan ? names.torchtitan
                                : f.framework == Framework::kMaxText    ? names.maxtext
                                                                        : names.deepspeed;
  const int64_t chunks = schedule.Chunks(p.mesh.pipeline, p.virtual_stages);
  // Per schedule: a round's, where the framework runs rounds; all of them where it runs one.
  const PlanShape shape = DerivePlanShape(p);
  const int64_t microbatches = f.pipeline_rounds == RoundsRule::kOneSchedule ? shape.num_microbatches : shape.round_microbatches;
  if (p.pipeline_rounds > 1 && f.pipeline_rounds == RoundsRule::kOneSchedule) {
    gaps.push_back({"/pipeline_rounds", N(p.pipeline_rounds) + " pipeline schedules per step (pipeline_rounds): " + std::string(f.name) +
                   " runs every micro-batch of a step in one schedule", "pipeline_rounds 1"});
  } else if (p.pipeline_rounds > 1 && (!strategies::ReplicaAxes(p, strategies::ParamKind::kDense).empty() ||
                                        !strategies::GradShardAxes(p, strategies::ParamKind::kDense).empty())) {
    gaps.push_back({"/pipeline_rounds", N(p.pipeline_rounds) + " pipeline schedules per step (pipeline_rounds) with gradients reduced once, after the last: " +
                   std::string(f.name) + " reduces them after each schedule" +
                   (f.framework == Framework::kTorchtitan ? " (FSDP resharding, to gather its parameters again for the next)" : ""), "pipeline_rounds 1"});
  }
  if (name.empty()) {
    gaps.push_back({"/pipeline_schedule", "pipeline schedule " + p.pipeline_schedule + ": " + std::string(f.name) +
                   " has no such schedule"});
  } else if (f.framework == Framework::kTorchtitan && name != "1F1B" && name != "GPipe" &&
             chunks < 2) {
    // torchtitan/distributed/pipeline_parallel.py: multi-stage schedules need 2 stages per rank.
    gaps.push_back({"/virtual_stages", "pipeline schedule " + p.pipeline_schedule +
                   " with one chunk per stage: torchtitan's " + std::string(name) +
                   " needs at least 2 stages per rank"});
  } else if (f.framework == Framework::kMegatronCore && chunks > 1 &&
             microbatches % p.mesh.pipeline != 0) {
    // megatron/core/pipeline_parallel/schedules.py: micro-batches in groups of pipeline size.
    gaps.push_back({"/micro_batch_size", N(microbatches) + " micro-batches on " + N(p.mesh.pipeline) +
                   " interleaved stages: Megatron-core needs a multiple of the stages"});
  }
  if (f.microbatches_multiple_of_stages && microbatches % p.mesh.pipeline != 0) {
    gaps.push_back({"/micro_batch_size", N(microbatches) + " micro-batches on " + N(p.mesh.pipeline) +
                   " stages: " + std::string(f.name) + " needs a multiple of the stages"});
  }
  if (f.layout == LayoutRule::kEqual && EvenChunkLayers(m, p) == 0) {
    gaps.push_back({p.pipeline_layout.empty() ? "/mesh/pipeline" : "/pipeline_layout", "stage layout " + strategies::DescribePartLayers(strategies::LayOut(m, p)) +
                   " (decoder layers per chunk): " + std::string(f.name) +
                   " splits the decoder layers evenly"});
  }
  // A framework with its own split of uneven layers runs that, whatever the plan's layout (a
  // layout that does not fit the model is a plan rule's to report). AsFrameworkRuns sets it.
  if (f.layout == LayoutRule::kFrontLoaded && p.mesh.pipeline > 1 && !strategies::CheckLayout(m, p)) {
    PlanSpec own = p;
    own.pipeline_layout.clear();
    const std::vector<int64_t> layers = FrameworkPartLayers(f, m, own);
    if (!layers.empty()) own.pipeline_layout = strategies::PartLayersText(layers, m.mtp_layers);
    if (!strategies::CheckLayout(m, own)) {
      const strategies::StageLayout asked = strategies::LayOut(m, p), runs = strategies::LayOut(m, own);
      if (PartLayers(asked) != PartLayers(runs)) {
        gaps.push_back({"/pipeline_layout",
                        "stage layout " + strategies::DescribePartLayers(asked) + " (decoder layers per chunk): " + std::string(f.name) + " splits them " +
                            strategies::DescribePartLayers(runs) + " (partition_method 'type:DecoderLayer')",
                        own.pipeline_layout.empty() ? "pipeline_layout unset (the even split)" : "pipeline_layout " + own.pipeline_layout + ", or unset"});
      }
    }
  }
}

// Activation offloading (PlanSpec::offload_layers) as the framework runs it (OffloadRule).
void OffloadGaps(const FrameworkFacts& f, const ModelSpec& m, const PlanSpec& p, std::vector<FrameworkGap>& gaps) {
  if (p.offload_layers == 0) return;
  const std::string name(f.name);
  switch (f.offload) {
    case OffloadRule::kNone:
      gaps.push_back({"/offload_layers", "activation offloading: " + name + " has no setting that offloads activations", "0"});
      break;
    case OffloadRule::kFirstLayers:
      if (p.offload_layers >= m.num_layers) {
        gaps.push_back({"/offload_layers", "offload_layers " + std::to_string(p.offload_layers) + ": " + name + " offloads fewer layers than the model's " +
                                               std::to_string(m.num_layers) + " (--cpu-offloading-num-layers)",
                        "1 to " + std::to_string(m.num_layers - 1)});
      }
      if (p.mesh.pipeline > 1) gaps.push_back({"/mesh/pipeline", "activation offloading with pipeline stages: " + name + " offloads without them only", "1"});
      if (p.recompute != Recompute::kNone) {
        gaps.push_back({"/recompute", "activation offloading with recomputation: " + name + " offloads without it only", "none"});
      }
      break;
    case OffloadRule::kEveryLayer:
      if (p.offload_layers < m.num_layers) {
        gaps.push_back({"/offload_layers", "offload_layers " + std::to_string(p.offload_layers) + ": " + name + " offloads every layer's kept set or none",
                        "0 or " + std::to_string(m.num_layers)});
      }
      if (p.recompute != Recompute::kMinimal && p.recompute != Recompute::kSaveQkvProj) {
        gaps.push_back({"/recompute", "activation offloading with recompute " + ToString(p.recompute) + ": " + name +
                                          "'s offloaded policies are minimal_offloaded and qkv_proj_offloaded",
                        "minimal or save-qkv-proj"});
      }
      break;
  }
}

void MeshGaps(const FrameworkFacts& f, const ModelSpec& m, const PlanSpec& p,
              std::vector<FrameworkGap>& gaps) {
  int last = -1;
  for (const std::string& name : p.mesh_order) {
    const MeshAxisFacts* axis = FindMeshAxis(name);
    if (axis == nullptr || p.mesh.Size(axis->axis) == 1) continue;
    const int at = Position(f, axis->axis);
    if (at < last) {
      std::string order;
      for (const std::string& used : UsedMeshOrder(p)) order += (order.empty() ? "" : ",") + used;
      gaps.push_back({"/mesh_order", "mesh_order " + order +
                     " (outermost first): " + std::string(f.mesh_order_text)});
      break;
    }
    last = at;
  }
  const bool moe = m.moe.has_value();
  if (p.mesh.tensor > 1) {
    if (p.sequence_parallel ? !f.sequence_parallel_on : !f.sequence_parallel_off) {
      gaps.push_back({"/sequence_parallel", std::string("tensor parallelism ") +
                     (p.sequence_parallel ? "with" : "without") +
                     " sequence parallelism: " + std::string(f.name) + " runs it " +
                     (p.sequence_parallel ? "without" : "with")});
    }
    if (p.mesh.pipeline > 1 && !f.tensor_with_pipeline)
      gaps.push_back({"/mesh/pipeline", "tensor with pipeline parallelism: " + std::string(f.name) +
                     " runs one or the other"});
    if (moe && !f.experts_split_over_tensor && ExpertTensorDegree(p) > 1)
      gaps.push_back({"/expert_axes", "experts split over tensor: " + std::string(f.name) +
                     " keeps each expert whole"});
  }
  if (p.mesh.context > 1) {
    const bool ring = p.context_kv == "ring";
    if (ring ? !f.ring_context : !f.all_gather_context) {
      gaps.push_back({f.ring_context || f.all_gather_context ? "/context_kv" : "/mesh/context", "context parallelism by " + p.context_kv + ": " + std::string(f.name) +
                     (f.ring_context || f.all_gather_context
                          ? " exchanges K/V the other way"
                          : " splits sequences only by Ulysses all-to-all")});
    }
    // Expert ranks beyond the tensor fold that leave the context ranks out, where the
    // framework's experts take them first.
    const std::vector<std::string> axes = ExpertAxes(p);
    const int64_t beyond_tensor = ExpertDegree(p) / (ExpertTensorDegree(p) == 1 ? p.mesh.tensor : 1);
    if (beyond_tensor > 1 && !f.expert_with_context && std::find(axes.begin(), axes.end(), "context") == axes.end())
      gaps.push_back({f.moe_folding ? "/expert_axes" : "/mesh/expert", "expert with context parallelism: " + std::string(f.name) + "'s experts take the context ranks" +
                     (f.moe_folding ? " first (list context in expert_axes)" : "")});
  }
  if (moe && p.ep_capacity_factor > 1.0 && !f.expert_capacity)
    gaps.push_back({"/ep_capacity_factor", "expert capacity factor: " + std::string(f.name) + " routes dropless"});
  if (!f.recompute[static_cast<size_t>(p.recompute)]) {
    std::string runs;
    for (size_t r = 0; r < kRecomputes; ++r) {
      if (f.recompute[r]) runs += (runs.empty() ? "" : ", ") + ToString(static_cast<Recompute>(r));
    }
    gaps.push_back({"/recompute", ToString(p.recompute) + " recomputation: " + std::string(f.name) + " has no such policy (it runs " + runs + ")"});
  }
  const bool dtype = p.dtype == "bf16"   ? f.bf16
                     : p.dtype == "fp16" ? f.fp16
                     : p.dtype == "fp8"  ? f.fp8
                                         : f.fp32;
  if (!dtype) gaps.push_back({"/dtype", p.dtype + ": not a dtype " + std::string(f.name) + " trains in"});
  if (!p.flash_attention && !f.unfused_attention)
    gaps.push_back({"/flash_attention", "unfused attention: " + std::string(f.name) + "'s attention is a fused kernel"});
  if (!f.repeated_kv && strategies::RepeatsKv(m, p))
    gaps.push_back({"/repeat_kv", "K/V repeated to every query head: " + std::string(f.name) + "'s attention reads the shared K/V heads"});
  OffloadGaps(f, m, p, gaps);
}

void OverlapGaps(const FrameworkFacts& f, const PlanSpec& p, std::vector<FrameworkGap>& gaps) {
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (!OverlapMatters(p, axis.axis)) continue;
    const bool on = p.overlap.Overlaps(axis.axis);
    const OverlapRule rule = OverlapRuleOf(f, p, axis.axis);
    if ((rule == OverlapRule::kAlways && !on) || (rule == OverlapRule::kNever && on)) {
      gaps.push_back({"/overlap/" + std::string(axis.name), "overlap." + std::string(axis.name) + " " + (on ? "on" : "off") + ": " +
                     std::string(f.name) + (on ? " never overlaps" : " always overlaps") +
                     " it here"});
    }
  }
  if (f.one_switch_data_fsdp && OverlapMatters(p, MeshAxis::kData) &&
      OverlapMatters(p, MeshAxis::kFsdp) && p.overlap.data != p.overlap.fsdp) {
    gaps.push_back({"/overlap/fsdp", "overlap.data and overlap.fsdp differ: " + std::string(f.name) +
                   " overlaps both reductions with one switch"});
  }
  if (f.tensor_overlap_needs_sequence_parallel && p.mesh.tensor > 1 && p.overlap.tensor &&
      !p.sequence_parallel) {
    gaps.push_back({"/overlap/tensor", "overlap.tensor without sequence parallelism: " + std::string(f.name) +
                   "'s --tp-comm-overlap needs --sequence-parallel"});
  }
}

}  // namespace

void AppendGaps(const FrameworkFacts& f, const ModelSpec& m, const PlanSpec& p,
                std::vector<FrameworkGap>& gaps) {
  const DataParallelSharding s = ShardingOf(p);
  if (NumHybridLayers(m, kHybridMamba) > 0 && !f.mamba_layers) {
    gaps.push_back({"", "Mamba-2 layers of '" + m.name + "': " + std::string(f.name) + " trains no state-space layers"});
  }
  // Megatron-core bounds each count by a pipeline stage's layers under FP8, not FP4
  // (transformer_config.py __post_init__, within `if self.fp8`: num_layers //
  // pipeline_model_parallel_size).
  const int64_t per_stage = m.num_layers / p.mesh.pipeline;
  if (f.framework == Framework::kMegatronCore && HasSixteenBitLayers(p) && Fp8RecipeOf(p) != "nvfp4" && std::max(p.sixteen_bit_first_layers, p.sixteen_bit_last_layers) > per_stage) {
    gaps.push_back({p.sixteen_bit_first_layers > per_stage ? "/sixteen_bit_first_layers" : "/sixteen_bit_last_layers",
                    "more decoder layers kept at 16 bits at one end than a pipeline stage's " + std::to_string(per_stage) + ": megatron-core refuses it",
                    "0 to " + std::to_string(per_stage) + " at each end"});
  }
  // torchtitan's FP8 routed experts (components/quantization: float8.py, mx.py): the
  // grouped-experts converters take no recipe_name, swap the token dispatcher for a padded one
  // that DeepEP's is not (utils.py swap_token_dispatcher), and none is NVFP4.
  if (m.moe && f.framework == Framework::kTorchtitan && p.dtype == "fp8") {
    if (SixteenBitWgrad(p)) {
      gaps.push_back({"/wgrad_dtype", "wgrad_dtype bf16 beside routed experts: torchtitan's grouped-experts converter runs their weight gradients in FP8 whatever the recipe", "fp8"});
    }
    if (HasSixteenBitLayers(p)) {
      gaps.push_back({"/sixteen_bit_first_layers", "decoder layers kept at 16 bits beside routed experts: torchtitan's grouped-experts converters convert every layer's experts", "0"});
    }
    if (p.fp8_recipe == "nvfp4") {
      gaps.push_back({"/fp8_recipe", "fp8_recipe nvfp4 beside routed experts: torchtitan has no NVFP4 grouped-experts converter (its experts would run at 16 bits)", "rowwise or mxfp8"});
    } else if (DeduplicatesDispatch(p)) {
      gaps.push_back({"/ep_dispatcher", "ep_dispatcher deepep beside FP8 routed experts: torchtitan's grouped-experts converters refuse the DeepEP dispatcher", "alltoall"});
    }
  }
  const std::vector<std::string> expert_axes = ExpertAxes(p);
  if (m.moe && !f.moe_folding && expert_axes.size() > (p.mesh.expert > 1 ? 1u : 0u)) {
    gaps.push_back({"/expert_axes", "experts folded over " + JoinNames(expert_axes) + " (expert_axes): shardsim does not profile " + std::string(f.name) +
                   "'s MoE parallel folding (docs/frameworks.md)"});
  } else if (m.moe && f.moe_folding && p.mesh.fsdp > 1 && std::find(expert_axes.begin(), expert_axes.end(), "data") != expert_axes.end()) {
    gaps.push_back({"/expert_axes", "experts folded over data beside fsdp=" + std::to_string(p.mesh.fsdp) + " (expert_axes): " + std::string(f.name) +
                   "'s expert grid takes the inner data-parallel ranks (fsdp) first"});
  }
  if (m.moe && m.moe->latent_size > 0 && !f.moe_latent) {
    gaps.push_back({"", "routed experts in a latent width (moe latent_size " + std::to_string(m.moe->latent_size) + "): " + std::string(f.name) +
                   "'s experts read the hidden size"});
  } else if (m.moe && m.moe->latent_size > 0 && ExpertDegree(p) > 1 && p.overlap.expert && m.moe->num_shared_experts > 0) {
    // moe_layer.py: "Shared expert overlap not supported when MoE latent projections are used".
    gaps.push_back({"/overlap/expert", "shared experts overlapped with the dispatch (overlap.expert) beside latent experts: " + std::string(f.name) + " refuses it"});
  }
  if (m.mtp_layers > 0 && f.mtp_setting.empty()) {
    gaps.push_back({"", "multi-token prediction (" + std::to_string(m.mtp_layers) + " module" + (m.mtp_layers > 1 ? "s" : "") + " of '" + m.name +
                   "'): " + std::string(f.name) + "'s configuration trains none (a model JSON with mtp_layers 0 estimates what it runs)"});
  } else if (m.mtp_shared_weights && f.mtp_shared_setting.empty()) {
    gaps.push_back({"", "multi-token-prediction modules sharing one module's weights (mtp_shared_weights): " + std::string(f.name) +
                   "'s modules each hold their own"});
  }
  ShardingGaps(f, p, s, gaps);
  PipelineGaps(f, m, p, gaps);
  MeshGaps(f, m, p, gaps);
  OverlapGaps(f, p, gaps);
}

}  // namespace shardsim::planner
