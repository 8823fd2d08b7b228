// What each training framework runs, as one table of facts (framework_facts.cc, each fact with the
// file of the framework's repository it was read from): FrameworkGaps (planner/frameworks.h) and
// the exports (planner/export_*.cc) both read it, so a plan the search keeps for a framework is a
// plan its export expresses. Schedules' names per framework live with the schedules
// (strategies/schedule.h, FrameworkScheduleNames).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/mesh_axes.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "planner/frameworks.h"

namespace shardsim::planner {

// Whether a framework overlaps one kind of communication with compute.
enum class OverlapRule {
  kSwitch,  // a flag or key the export sets from the plan's overlap.<axis>
  kAlways,  // always: a plan that does not overlap it is not what the framework runs
  kNever,   // never: no setting of the framework's (config or launch) turns it on
};

// How a framework shards parameters, gradients and optimizer state over the data-parallel ranks.
// In shardsim terms (strategies/data_parallel.h): `fsdp` shards everything, and the replica axes
// (data, context, and expert for dense parameters) replicate it up to the ZeRO stage.
enum class ShardingFamily {
  // Megatron-core, DeepSpeed: ZeRO-1/2/3 over all data-parallel ranks x context together, or a
  // hybrid with `data` as the outer replicas (Megatron-FSDP HSDP, DeepSpeed MiCS).
  kZeroOverAll,
  // torchtitan: FSDP2 over data_parallel_shard x context, which holds the expert ranks;
  // data_parallel_replicate replicates.
  kFsdpOverShard,
  // MaxText: weights over fsdp, context and expert (logical rule `embed`); `data` replicates, its
  // optimizer state optionally sharded over it (shard_optimizer_over_data).
  kWeightsOverShardAxes,
};

// Which activation offloading (PlanSpec::offload_layers) a framework runs.
enum class OffloadRule {
  kNone,         // none
  kFirstLayers,  // fewer than all decoder layers, without pipeline stages or recomputation
                 // (Megatron-core's --cpu-offloading-num-layers)
  kEveryLayer,   // every layer's kept set, with the policies that have an offloaded variant
                 // (MaxText's minimal_offloaded, qkv_proj_offloaded)
};

// Whether sharded parameters may stay gathered from the first forward to the last backward
// (FSDP2's reshard_after_forward=False; PlanSpec::fsdp_reshard_after_forward).
enum class KeepGathered { kNever, kSwitch, kWithPipelineOnly };

// Which stage layouts a framework runs: any pipeline_layout; equal decoder layers per chunk
// only; or its own split of uneven layers, the first num_layers mod stages stages holding one
// more (DeepSpeed's, FrameworkPartLayers).
enum class LayoutRule { kAny, kEqual, kFrontLoaded };

// How a framework's gradient accumulation runs under pipeline parallelism (PlanSpec::
// pipeline_rounds): one schedule over every micro-batch of a step (rounds > 1 a gap), or one
// schedule per accumulation step whose last backward reduces the data-parallel gradients each time
// (shardsim reduces once per step, after the last round, as NeMo AutoModel's MoE models do: a gap
// where gradients are reduced over replicas at all).
enum class RoundsRule { kOneSchedule, kReducedEachRound };

// How a framework picks the dtype of its data-parallel gradient reductions (GradReduceDefault).
enum class GradReduceRule {
  kFp32,          // always fp32 (torchtitan)
  kMegatron,      // fp32 under bf16 with DDP or the distributed optimizer (--grad-reduce-in-bf16:
                  // bf16); under fp16 the compute dtype (--accumulate-allreduce-grads-in-fp32:
                  // fp32); under Megatron-FSDP the parameters' dtype (no switch modelled)
  kComputeDtype,  // the compute dtype, no setting (MaxText)
  kAnyByConfig,   // the compute dtype unless the config names one (DeepSpeed)
};

// The model FLOPs a framework's own MFU (or TFLOP/s) divides by, in shardsim's terms
// (sim::StepReport): both count 6 x matmul parameters x tokens and no recomputation; they differ
// in the attention scores' S x S products.
enum class FlopCount {
  kCausalAttention,  // half of them (the causal mask), every layer's full context
  kCausalWindows,    // half of them, local layers over their windows: StepReport::mfu
  kFullAttention,    // all of them (PaLM's count): StepReport::mfu_palm
  kNone,             // no model-FLOP count (a profiler of the ops it sees)
};

struct FrameworkFacts {
  Framework framework;
  std::string_view name;    // the plan JSON's `framework` value
  std::string_view source;  // the repository and the commit read
  // Rank layout, outermost first: where each used axis of the plan must sit (UsedMeshOrder).
  std::array<MeshAxis, kMeshAxisCount> mesh_order;
  std::string_view mesh_order_text;  // in the framework's words
  ShardingFamily sharding;
  KeepGathered keep_gathered;
  int64_t max_zero_with_pipeline;  // ZeRO stages above this do not run with pipeline parallelism
  bool fsdp_with_pipeline;         // parameter sharding with pipeline parallelism
  // Tensor parallelism: with Megatron's sequence parallelism (reduce-scatter / all-gather), without
  // it (all-reduce), and combined with pipeline parallelism.
  bool sequence_parallel_on, sequence_parallel_off, tensor_with_pipeline;
  bool ring_context, all_gather_context;  // context_kv values it runs
  bool experts_split_over_tensor;         // routed experts' MLPs split over tensor like dense MLPs
  bool expert_with_context;               // expert ranks and context ranks as separate axes
  bool expert_capacity;                   // a capacity factor above 1 (otherwise dropless only)
  std::array<bool, kRecomputes> recompute;  // per Recompute, in its order
  bool bf16, fp16, fp8, fp32;
  bool unfused_attention;  // flash_attention false
  bool repeated_kv;        // repeat_kv true on a grouped-query model
  OffloadRule offload;
  LayoutRule layout;
  bool microbatches_multiple_of_stages;  // pipeline micro-batches a multiple of the stages
  RoundsRule pipeline_rounds;
  // Overlap per axis in MeshAxis order; pipeline one chunk / interleaved and context ring /
  // all-gather have their own rules below, whatever overlap[kPipeline] / [kContext] say.
  std::array<OverlapRule, kMeshAxisCount> overlap;
  OverlapRule pipeline_overlap_one_chunk, pipeline_overlap_interleaved;
  OverlapRule context_overlap_ring, context_overlap_all_gather;
  bool one_switch_data_fsdp;  // one switch overlaps both data and fsdp reductions
  // With pipeline stages, gradients are reduced once the pipeline has drained, never under the
  // backward (data and fsdp overlap kNever whatever `overlap` says).
  bool reduces_after_pipeline_drains;
  bool tensor_overlap_needs_sequence_parallel;
  GradReduceRule grad_reduce;
  FlopCount flop_count;
  std::string_view flop_count_source;  // where the count is made, in the framework's code
  // The losses it computes (PlanSpec::cross_entropy), and the one a plan that sets none gets.
  bool fused_cross_entropy, eager_cross_entropy;
  std::string_view cross_entropy_default;
  // The elementwise kernels it runs (PlanSpec::elementwise_kernels), and the ones a plan that sets
  // none gets.
  bool fused_elementwise, eager_elementwise;
  std::string_view elementwise_default;
  // FP8 scaling recipes (PlanSpec::fp8_recipe) in Fp8RecipeNames' order (tensorwise, rowwise,
  // blockwise, mxfp8, nvfp4), and the one an fp8 plan that sets none gets ("" without fp8).
  std::array<bool, 5> fp8_recipes;
  std::string_view fp8_recipe_default;
  // The fp8 recipe under which it moves the expert all-to-alls toward the experts in FP8
  // (PlanSpec::ep_dispatch_dtype fp8); "" where it moves them at the activations' width only.
  std::string_view fp8_dispatch_recipe;
  // How its FP8 products keep their inputs for the backward (PlanSpec::saved_input_dtype), the
  // value an fp8 plan that sets none gets: "fp8" or "bf16"; "" without fp8 training.
  std::string_view saved_input_dtype;
  // How often its FP8 products cast their 16-bit weights (PlanSpec::fp8_weight_casts), the value
  // an fp8 plan that sets none gets; "" where the profile makes no claim (per-microbatch).
  std::string_view fp8_weight_casts;
  // Whether it gathers FP8 weights (PlanSpec::param_gather_dtype fp8).
  bool fp8_param_gather;
  // Whether, under each fp8 recipe it runs, its sequence-parallel all-gathers of FP8 products'
  // inputs move FP8 (PlanSpec::tensor_gather_dtype fp8, the value an fp8 plan that sets none gets;
  // else bf16).
  bool fp8_tensor_gather;
  // The setting that sends each token once per destination node and GPU (PlanSpec::ep_dispatcher
  // deepep); "" where its expert all-to-alls send every routed copy.
  std::string_view deepep_setting;
  // The setting that routes token t to experts t·k ... t·k + k - 1 whatever the scores
  // (PlanSpec::expert_routing round-robin); "" where its routers follow their scores.
  std::string_view round_robin_setting;
  // Whether it trains hybrid models with Mamba-2 mixers (ModelSpec::hybrid_pattern), and routed
  // experts in a latent width (MoeSpec::latent_size).
  bool mamba_layers, moe_latent;
  // Whether it folds expert parallelism over tensor x context x data ranks (PlanSpec::expert_axes
  // beyond the expert axis): Megatron-core's MoE parallel folding.
  bool moe_folding;
  // What a sequence-parallel region's backward reads of its gathered input
  // (PlanSpec::sequence_parallel_inputs), the value a plan that sets none gets; "" without
  // sequence parallelism or where the compiler decides.
  std::string_view sequence_parallel_inputs;
  // What its pipeline stages keep of the tensors they send and receive
  // (PlanSpec::pipeline_buffers), the value a pipelined plan that sets none gets; "" where the
  // profile makes no claim (the plan's own, else per-transfer).
  std::string_view pipeline_buffers;
  // Which tensor-parallel collectives its tensor overlap hides (PlanSpec::tensor_overlap_scope),
  // the value a plan that sets none gets; "" where the profile makes no claim (the plan's own,
  // else all).
  std::string_view tensor_overlap_scope;
  // The setting that trains multi-token-prediction modules (ModelSpec::mtp_layers); "" where its
  // configuration cannot.
  std::string_view mtp_setting;
  // The setting that runs one module's weights at every depth (ModelSpec::mtp_shared_weights); ""
  // where each module holds its own.
  std::string_view mtp_shared_setting;
  // The setting that runs PyTorch's FlexAttention (PlanSpec::attention_kernel flex); "" where it
  // runs its fused kernels only.
  std::string_view flex_attention_setting;
  // How it holds weights, gradients and Adam's state (PlanSpec::master_weights): "fp32-copy",
  // "fp32" or "bf16", the value a plan that sets none gets.
  std::string_view master_weights;
  // How its device memory is allocated (PlanSpec::memory_allocator): "caching" or "static", the
  // value a plan that sets none gets.
  std::string_view memory_allocator;
  // The fp8_recipe under which it runs the weight-gradient products at 16 bits
  // (PlanSpec::wgrad_dtype bf16); "" where it cannot.
  std::string_view wgrad_bf16_recipe;
  // The setting that keeps an fp8 plan's first and last decoder layers at 16 bits
  // (PlanSpec::sixteen_bit_first_layers, _last_layers); "" where none does.
  std::string_view sixteen_bit_layers_setting;
};

// The row of `framework`.
const FrameworkFacts& FactsOf(Framework framework);

// The plan's data-parallel sharding in CanonicalSharding's form, computed without copying it.
struct DataParallelSharding {
  int64_t data, fsdp, zero;
  bool replicas;  // a replica axis of dense parameters (data, context, expert) of size > 1
};
DataParallelSharding ShardingOf(const PlanSpec& plan);

// The plan with its data-parallel sharding in one normal form: ZeRO-3 over `data` folded into
// `fsdp` (the same ranks sharding the same state, when no used axis sits between the two in the
// mesh order), and zero_stage 0 when no replica axis is left (every stage then shards alike).
// Exports write this form and PlanFromExport reads it back.
PlanSpec CanonicalSharding(const PlanSpec& plan);

// The overlap rule for `axis` in `plan` (resolving the pipeline and context special cases).
OverlapRule OverlapRuleOf(const FrameworkFacts& facts, const PlanSpec& plan, MeshAxis axis);

// What `facts`' framework reduces `plan`'s gradients in where the plan sets no
// grad_reduce_dtype (asked of every candidate of a framework search: no allocation), and the
// values a plan may set (the default among them; asked only where a plan sets one).
std::string GradReduceDefault(const FrameworkFacts& facts, const PlanSpec& plan);
std::vector<std::string> GradReduceSettable(const FrameworkFacts& facts, const PlanSpec& plan);

// Whether overlap.<axis> changes anything in `plan`: the axis communicates at all.
bool OverlapMatters(const PlanSpec& plan, MeshAxis axis);

// Decoder layers per model chunk when every chunk holds the same number and the layout is the
// default (embedding and head beside the first and last chunks' layers); 0 otherwise.
int64_t EvenChunkLayers(const ModelSpec& model, const PlanSpec& plan);

// The decoder layers per stage a kFrontLoaded framework gives `plan`'s pipeline stages (one
// chunk each); empty for other frameworks and where the default layout is already even.
std::vector<int64_t> FrameworkPartLayers(const FrameworkFacts& facts, const ModelSpec& model, const PlanSpec& plan);

// Appends to `gaps` what of `plan` the framework cannot run (FrameworkGapsByField's body, in
// planner/framework_gaps.cc).
void AppendGaps(const FrameworkFacts& facts, const ModelSpec& model, const PlanSpec& plan,
                std::vector<FrameworkGap>& gaps);

}  // namespace shardsim::planner
