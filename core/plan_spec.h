// The plan spec: how one training step is sharded (the plan JSON of the CLI docs), its checks
// against a model and a device count, and `--set key=value` overrides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mesh_axes.h"
#include "core/model_spec.h"

namespace shardsim {

// Activation recomputation policies, each a set of the tensors a layer keeps for its backward
// (strategies/saved_tensors.h holds the sets): none keeps all; selective is Megatron-core's
// (--recompute-granularity selective: the attention core); full keeps the layer input only;
// selective-op is torchtitan's per-op SelectiveAC (every second matmul recomputed);
// selective-layer is torchtitan's older per-layer option (every second layer fully); minimal is
// MaxText's remat_policy minimal (projections kept, attention core and elementwise recomputed);
// the save-* ones are MaxText's named-save policies (save_qkv_proj, save_dot_except_mlp,
// save_dot_with_context_except_mlp, save_out_proj: those projections kept, all else rebuilt).
enum class Recompute {
  kNone, kSelective, kFull, kSelectiveOp, kSelectiveLayer, kMinimal,
  kSaveQkvProj, kSaveDotExceptMlp, kSaveDotWithContextExceptMlp, kSaveOutProj
};
inline constexpr size_t kRecomputes = static_cast<size_t>(Recompute::kSaveOutProj) + 1;

// Mesh axes are words (core/mesh_axes.h holds what each one is); `expert` shards the experts of
// MoE layers and acts as data parallelism for everything else; `context` is ring attention's axis
// (not Megatron's sequence parallelism, which lives inside `tensor`).
struct MeshShape {
  int64_t data = 1;
  int64_t fsdp = 1;
  int64_t tensor = 1;
  int64_t context = 1;
  int64_t pipeline = 1;
  int64_t expert = 1;

  // REQUIRES: axis is one of MeshAxisNames().
  int64_t Size(std::string_view axis) const;
  int64_t& Size(std::string_view axis);
  int64_t Size(MeshAxis axis) const;
  int64_t& Size(MeshAxis axis);
  int64_t Product() const;
  bool operator==(const MeshShape&) const = default;
};

// The table's names in its order: data, fsdp, tensor, context, pipeline, expert.
const std::vector<std::string>& MeshAxisNames();
// Outermost (slowest links) to innermost (fastest), by the table's default_order: pipeline, data,
// fsdp, expert, context, tensor.
std::vector<std::string> DefaultMeshOrder();

// Product of the batch replica axes' sizes (data x fsdp x expert): groups that each read their own
// sequences.
int64_t BatchReplicas(const MeshShape& mesh);

// Whether each kind of communication is overlapped with compute (framework switches); what each
// hides and its default are the table's (core/mesh_axes.h).
struct OverlapSpec {
  bool data = AxisFacts(MeshAxis::kData).default_overlap;
  bool fsdp = AxisFacts(MeshAxis::kFsdp).default_overlap;
  bool tensor = AxisFacts(MeshAxis::kTensor).default_overlap;
  bool context = AxisFacts(MeshAxis::kContext).default_overlap;
  bool pipeline = AxisFacts(MeshAxis::kPipeline).default_overlap;
  bool expert = AxisFacts(MeshAxis::kExpert).default_overlap;

  bool Overlaps(MeshAxis axis) const;
  bool& Overlaps(MeshAxis axis);
  bool operator==(const OverlapSpec&) const = default;
};

struct PlanSpec {
  MeshShape mesh;
  std::vector<std::string> mesh_order = DefaultMeshOrder();
  int64_t global_batch_size = 0;  // sequences per step
  int64_t seq_len = 0;            // tokens per sequence
  int64_t micro_batch_size = 1;   // sequences per micro-batch per data-parallel replica
  int64_t zero_stage = 0;         // 0-3 over the data-parallel group
  bool sequence_parallel = false;
  // A schedule's name (strategies/schedule.h lists them; CheckPlan rejects others).
  std::string pipeline_schedule = "1f1b";
  int64_t virtual_stages = 1;     // model chunks per pipeline stage (interleaved 1F1B)
  // Pipeline schedules run one after another in a step, each over an equal share of the
  // micro-batches: each stage runs a round's tasks after the previous round's, a round's forwards
  // waiting only for their inputs (GPipe and 1F1B drain in between; V-shaped and bidirectional
  // schedules overlap one round's drain with the next one's fill). Gradients are reduced and the
  // optimizer steps once, after the last. 1: one schedule over all micro-batches (Megatron-core,
  // DeepSpeed). Gradient accumulation in torchtitan, MaxText and NeMo AutoModel calls the schedule
  // once per accumulation step (docs/cli.md, docs/frameworks.md).
  int64_t pipeline_rounds = 1;
  // Which layers each chunk holds, in Megatron-core's syntax (strategies/stage_layout.h); empty:
  // consecutive layers as even as possible.
  std::string pipeline_layout;
  // FSDP2's name: free gathered parameters after each forward and gather them again for backward
  // (true), or keep them until the last micro-batch's backward (false). Unset: true without
  // pipeline parallelism, false with it (torchtitan's default). See ReshardAfterForward.
  std::optional<bool> fsdp_reshard_after_forward;
  Recompute recompute = Recompute::kNone;
  std::string dtype = "bf16";     // compute dtype; names a key of the chip's peak_flop_per_s
  // The dtype data-parallel gradient reductions move: "bf16", "fp16" or "fp32". Empty: the
  // gradients' own width (the compute dtype's, 2 bytes below fp32), unless a framework profile
  // sets its default (planner::AsFrameworkRuns). See GradReduceBytes.
  std::string grad_reduce_dtype;
  // How the loss is computed, which sets its memory: "fused" (Megatron-core's vocab-parallel
  // cross-entropy, or a compiled loss: the fp32 softmax made in place) or "eager" (PyTorch's
  // F.cross_entropy over an fp32 copy of the logits). Empty: fused unless a framework profile sets
  // its default (planner::AsFrameworkRuns). See CrossEntropyNames.
  std::string cross_entropy;
  // How the norms, gated activations and rotary embeddings run: "fused" (one kernel each:
  // Transformer Engine's, XLA's, or a torch.compile'd model) or "eager" (PyTorch primitives as
  // torchtitan's uncompiled llama writes them: RMSNorm as float/pow/mean/rsqrt/mul/type_as/mul,
  // SwiGLU as silu then mul, RoPE through complex views; strategies/elementwise_kernels.h) or
  // "eager-fused-norm" (the same with one Triton kernel per RMSNorm: torchtitan's norm_type
  // fused_rmsnorm until #826 of 2025-02). Empty: fused unless a framework profile sets its
  // default (planner::AsFrameworkRuns).
  std::string elementwise_kernels;
  // An fp8 plan's scaling recipe: "tensorwise" (one scale per tensor: Transformer Engine's delayed
  // or current scaling, torchao's default), "rowwise" (torchao), "blockwise" (1x128 / 128x128
  // tiles, DeepSeek-V3; Transformer Engine's Float8BlockScaling), "mxfp8" (32-element blocks,
  // Blackwell) or "nvfp4" (4-bit E2M1 elements with an E4M3 scale per 16 and one fp32 scale per
  // tensor, weights in 16 x 16 blocks: Transformer Engine's NVFP4BlockScaling, Megatron-core's
  // --fp4-format e2m1, torchtitan's NVFP4LinearConverter; its products run at the chip's fp4
  // peak, MatmulPeakDtype). Each runs its GEMMs at its own efficiency (EfficiencySpec::Fp8Matmul).
  // Empty: tensorwise. See Fp8RecipeNames.
  std::string fp8_recipe;
  // The width of the expert all-to-alls that carry rows to the experts (the forward dispatch and
  // the combine's backward): "bf16" (the activations', the default) or "fp8" (fp8 plans: each
  // row quantised with its recipe's scales before it leaves, as DeepSeek-V3 section 3.3 and
  // Megatron-core's moe_dispatch_fwd_dtype / moe_combine_bwd_dtype mxfp8 do). Rows coming back
  // from the experts stay 16-bit. Empty: bf16. See EpDispatchBytes.
  std::string ep_dispatch_dtype;
  // How the expert all-to-alls move a token routed to several experts: "alltoall" (one row per
  // routed copy, each to its expert's rank: Megatron-core's alltoall dispatcher, torchtitan's
  // standard backend) or "deepep" (one row per destination node over the scale-out network, to
  // the same-position GPU there, which forwards it over NVLink once per destination GPU; within a
  // node one row per destination GPU: DeepEP's normal kernels, DeepSeek-V3 section 3.2.2;
  // Megatron-core's flex dispatcher, torchtitan's deepep backend). Empty: alltoall. See
  // DeduplicatesDispatch and sim/routed_all_to_all.h.
  std::string ep_dispatcher;
  // Which experts the router picks, as far as the expert all-to-alls care: "uniform" (a balanced
  // router's expectation: a token's top_k experts a uniform draw, within the model's group limit)
  // or "round-robin" (token t's experts t·k ... t·k + k - 1 mod E, whatever the scores: the
  // benchmarking routers NeMo AutoModel's FakeBalancedGate and torchtitan's
  // debug.moe_force_load_balance, which keep a token's experts on a few neighbouring GPUs).
  // Only a deduplicating dispatcher (ep_dispatcher deepep) sends fewer rows for it. Empty: uniform.
  // See DispatchRouting.
  std::string expert_routing;
  // How an fp8 plan stores the inputs its FP8 products keep for their backward: "fp8" (quantised
  // with the recipe's scales, as Transformer Engine's modules do: the QKV and MLP inputs after
  // their norms, one copy per product reading them, the MLP's and the experts' down-projection
  // inputs, the experts' dispatched rows; the attention's output and an MoE layer's normed input
  // stay 16-bit, kept by the attention and the router, as Megatron-core's set_save_original_input
  // leaves them) or "bf16" (the 16-bit originals, as torchao's Float8Linear keeps them). Empty:
  // bf16 unless a framework profile sets its own (planner::AsFrameworkRuns). See SavedInputBytes
  // and strategies/saved_tensors.cc.
  std::string saved_input_dtype;
  // The dtype of an fp8 plan's weight-gradient products: "fp8" (the default: Transformer Engine's
  // recipes, torchao's tensorwise and rowwise) or "bf16" (they read the 16-bit inputs and output
  // gradients and run at the 16-bit peak: Transformer Engine's override_linear_precision wgrad,
  // which Megatron-core's --no-fp8-wgrad reached before Transformer Engine 2.0 removed it;
  // torchao's rowwise_with_gw_hp recipe). The products then keep their inputs
  // at 16 bits (saved_input_dtype bf16, which planner::AsFrameworkRuns sets where unset). Empty:
  // fp8. See SixteenBitWgrad.
  std::string wgrad_dtype;
  // The width data-parallel parameter all-gathers move (ZeRO >= 1: the distributed optimizer's
  // gather of updated shards, FSDP's gathers before use): "bf16" (the weights' own 16 bits, the
  // default) or "fp8" (fp8 plans: each shard quantised with its recipe's scales before it leaves,
  // as Megatron-core's --fp8-param-gather keeps FP8 weights, which NeMo 2.0's FP8 recipes set;
  // not with rowwise scaling). The gathered weights are held at this width. Empty: bf16. See
  // ParamGatherBytes.
  std::string param_gather_dtype;
  // How often an fp8 plan's products cast their 16-bit weights to FP8 (read 16 bits, write 8 and
  // the scales), where the weights are not gathered in FP8 already: "per-microbatch" (each
  // forward casts them, and each backward again, as torchao's Float8Linear does: it saves the
  // 16-bit weight) or "per-step" (the first micro-batch casts them and its FP8 copy, with its
  // transpose, serves the step's other micro-batches: Transformer Engine's modules under
  // is_first_microbatch, which Megatron-core's schedules set). Weights gathered in FP8
  // (param_gather_dtype fp8) are cast on this device's shard before each gather. Empty:
  // per-microbatch unless a framework profile sets its own (planner::AsFrameworkRuns). See
  // strategies::WeightCastShares.
  std::string fp8_weight_casts;
  // The width the sequence-parallel all-gathers of an FP8 product's input move (tensor > 1 with
  // sequence_parallel): the forward's gather of the attention's, the MLP's and the Mamba mixer's
  // normed input, its backward regather, and the backward's gather of the output gradient. "fp8":
  // quantised with the recipe's scales before the gather, as Transformer Engine's LayerNormLinear
  // and Linear do and torchao's Float8ColwiseParallel / Float8RowwiseParallel do with per-tensor
  // scaling; "bf16": the activations' 16 bits. The reduce-scatters, the output head's and the MTP
  // projection's gathers stay 16-bit. Empty: bf16 unless a framework profile sets its own
  // (planner::AsFrameworkRuns). See TensorGatherBytes.
  std::string tensor_gather_dtype;
  // What the backward of a sequence-parallel region reads of its gathered input (tensor > 1 with
  // sequence_parallel): "regather" (keep the sequence shard, all-gather it again in the backward,
  // as Megatron-core's linear layers do: tensor_parallel/layers.py) or "keep-gathered" (the
  // products keep the all-gathered input itself, as DTensor's tensor parallel styles let autograd
  // do in torchtitan: more memory, no gather in the backward). Empty: regather unless a framework
  // profile sets its own (planner::AsFrameworkRuns). See KeepsGatheredSequence.
  std::string sequence_parallel_inputs;
  // What a pipeline stage keeps of the tensors it sends and receives (pipeline > 1):
  // "per-transfer" (a receive buffer made for each transfer, each output freed once sent:
  // Megatron-core's p2p_communication.py and deallocate_pipeline_outputs, which Megatron-LM's
  // training sets), "per-microbatch" (a receive buffer for every micro-batch's input and output
  // gradient, made at the first step and kept, and each micro-batch's output kept to its backward:
  // torch.distributed.pipelining's stage.py, which torchtitan runs) or "keep-outputs" (the same,
  // and every micro-batch's output kept to the end of the step: torch.distributed.pipelining
  // before pytorch/pytorch#153383 of 2025-05, as torchtitan ran in 2024; the last stage keeps
  // every micro-batch's logits; and each input buffer's gradient left in its .grad to the next
  // step, as before pytorch/pytorch#164329 of 2025-10). Empty: per-transfer unless a framework profile sets its own
  // (planner::AsFrameworkRuns). See PipelineBuffersOf.
  std::string pipeline_buffers;
  // Which tensor-parallel collectives overlap.tensor hides under their products: "all" (each
  // region's, as Megatron-core's tp-comm-overlap does: Transformer Engine's userbuffers, its QKV
  // and fc1 one product each) or "single-product" (a reduce-scatter only where one product makes
  // what it reduces: torch's micro-pipeline TP pass, torchtitan's async TP, fuses a reduce-scatter
  // only with a matmul's own output, and torchtitan's separate wq / wk / wv and w1 / w3 make the
  // backward input gradients of the attention and of a gated MLP sums of products, reduced
  // blocking; nor does it fuse an all-gather into a row-wise scaled FP8 product). Empty: all
  // unless a framework profile sets its own (planner::AsFrameworkRuns). See
  // HidesRegionReduceScatter and HidesRegionAllGather.
  std::string tensor_overlap_scope;
  // How parameters and Adam's state are held: "fp32-copy" (16-bit weights with an fp32 master copy,
  // fp32 Adam m and v, gradients at grad_reduce_dtype's width: Megatron-core's distributed
  // optimizer, DeepSpeed's ZeRO, the accounting of Rajbhandari et al. 2020, section 3.1), "fp32"
  // (fp32 weights that are themselves the master, fp32 gradients and Adam state; 16-bit weights
  // only as the copies cast or gathered for compute: FSDP2's MixedPrecisionPolicy, which torchtitan
  // runs, torch.autocast, MaxText's weight_dtype float32) or "bf16" (bf16 weights, gradients and
  // Adam state, no fp32 copy: a model made in bf16, NeMo AutoModel's default torch_dtype). Empty:
  // fp32-copy (fp32 for fp32 plans) unless a framework profile sets its own
  // (planner::AsFrameworkRuns). See StateBytesOf (strategies/state_bytes.h).
  std::string master_weights;
  // How the framework's device memory is allocated, which sets what may share it: "caching" (a
  // PyTorch caching allocator's reserved memory, the peak torchtitan reports: the loss's buffers
  // and a recomputed layer's counted side by side, as the published torchtitan peaks show) or
  // "static" (a compiled program's buffer assignment by liveness, as XLA's is: the loss's buffers,
  // dead after the output head's backward, and a layer's backward working set (its recomputation,
  // the context ranks' K/V), alive only in that backward, share memory). Empty: caching unless a framework profile sets its own
  // (planner::AsFrameworkRuns). See MemoryAllocatorOf and strategies::EstimateMemory.
  std::string memory_allocator;
  // The mesh axes the routed experts of MoE layers are split over, the expert all-to-alls' group:
  // "expert" (an axis data parallel for the rest, the default), or folded over ranks the dense
  // layers use otherwise, as Megatron-core's MoE parallel folding lays expert parallelism over
  // tensor x context x data (--expert-model-parallel-size beyond the data-parallel ranks):
  // "tensor" (each tensor rank holds its experts whole: --expert-tensor-parallel-size 1; needs
  // sequence parallelism, each tensor rank routing its own tokens), "context", "data". Empty:
  // {"expert"} where the mesh has an expert axis. See ExpertAxes.
  std::vector<std::string> expert_axes;
  OverlapSpec overlap;
  double ep_capacity_factor = 1.0;  // expert capacity as a multiple of the balanced load
  bool flash_attention = true;      // blockwise attention: the S x S scores are never stored
  // Which blockwise attention kernel runs, for its own share of peak (EfficiencySpec::
  // attention_kernels): "flash" (the fused kernels of the chip's generation: FlashAttention-2/3,
  // cuDNN's and Transformer Engine's, Pallas on TPU; the cluster's `attention`), "triton" (the
  // Triton FlashAttention of 2022-23, LLM Foundry's attn_impl triton) or "flex" (PyTorch's
  // FlexAttention, compiled from a score or mask function). Empty: flash. See AttentionKernelOf.
  std::string attention_kernel;
  std::string context_kv = "ring";  // context parallel K/V exchange: "ring" or "all-gather"
  // Whether the model code repeats each K/V head to its query heads before the attention kernel
  // (torchtitan's repeat_kv until #2259 of 2026-01; Hugging Face's eager attention): the
  // attention then reads, saves and exchanges over context ranks K/V as wide as the queries.
  // Off: a grouped-query kernel reads the shared heads. No effect on MLA or without GQA.
  bool repeat_kv = false;
  // Activation offloading: what the recomputation set keeps of this many decoder layers of each
  // model chunk (the first ones; every layer when as many as the chunk holds) lives in host
  // memory from the layer's forward to its backward, copied out under the forward and back under
  // the backward over the device's host link (the cluster's "host" link class): Megatron-core's
  // --cpu-offloading-num-layers (NeMo's activation_offload_layers), MaxText's *_offloaded
  // remat policies. 0: none.
  int64_t offload_layers = 0;
  // An fp8 plan's decoder layers kept at 16 bits: this many at the model's start and at its end
  // (global layer numbers, whatever the pipeline layout) run every product, cast and collective of
  // theirs at 16 bits and keep no FP8 weights, as Megatron-core's --first-last-layers-bf16 with
  // --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16 does (NeMo 2.0's current-scaling
  // recipes set 1 and 1, its Nemotron-H ones 2 and 2; its performance scripts turn it off), and
  // torchtitan's NVFP4 configurations' bf16 tail (their last 15% of layers). 0: none. See
  // SixteenBitLayer.
  int64_t sixteen_bit_first_layers = 0;
  int64_t sixteen_bit_last_layers = 0;
  // The training framework that must run this plan exactly (one of PlanFrameworkNames(), which
  // planner/frameworks.h turns into its planner::Framework); empty: any framework.
  std::string framework;
  bool operator==(const PlanSpec&) const = default;
};

// What follows from a plan: replicas, micro-batches and tokens per step.
struct PlanShape {
  int64_t devices = 0;
  int64_t batch_replicas = 0;     // data x fsdp x expert: groups that each see their own sequences
  int64_t sequences_per_replica = 0;
  int64_t num_microbatches = 0;   // per replica per step
  int64_t round_microbatches = 0; // per replica per pipeline schedule (pipeline_rounds of a step)
  int64_t tokens_per_step = 0;
};
PlanShape DerivePlanShape(const PlanSpec& plan);
// " in R pipeline schedules of M" (pipeline_rounds and a round's micro-batches per replica), or ""
// for one schedule: what every text that counts a step's micro-batches appends.
std::string RoundsPhrase(const PlanSpec& plan);

// Bytes per element of what data-parallel collectives move: parameters are gathered at the
// compute width (4 bytes for fp32 plans, else 2), or Fp8ElementBytes under param_gather_dtype
// fp8; gradients reduced at grad_reduce_dtype's width, else at the compute width. The one home of
// both for the step program, the memory model and the exports.
double ParamGatherBytes(const PlanSpec& plan);
// param_gather_dtype's values: "bf16", "fp8".
const std::vector<std::string>& ParamGatherDtypeNames();
// fp8_weight_casts' values: "per-microbatch", "per-step".
const std::vector<std::string>& Fp8WeightCastsNames();
// Whether a sequence-parallel region's products keep its all-gathered input for the backward
// (sequence_parallel_inputs keep-gathered, with tensor > 1 and sequence parallelism), instead of
// the sequence shard they gather again.
bool KeepsGatheredSequence(const PlanSpec& plan);
// sequence_parallel_inputs' values: "regather", "keep-gathered".
const std::vector<std::string>& SequenceParallelInputsNames();
// The axes (of size > 1) MoE layers split their routed experts over: expert_axes, or {"expert"}
// where it is empty and the mesh has an expert axis. The one home of expert parallelism's group
// for the step program, the memory model, the collectives and the exports.
std::vector<std::string> ExpertAxes(const PlanSpec& plan);
// ", experts over context x expert (expert_axes)" for a plan that sets expert_axes, else "": the
// one phrase the summaries print.
std::string ExpertAxesNote(const PlanSpec& plan);
// Expert parallelism's degree: the product of ExpertAxes (1 without).
int64_t ExpertDegree(const PlanSpec& plan);
// The tensor split of each routed expert: mesh.tensor, or 1 where the experts are folded over
// tensor (Megatron-core's --expert-tensor-parallel-size).
int64_t ExpertTensorDegree(const PlanSpec& plan);
// expert_axes' values: "tensor", "context", "data", "expert".
const std::vector<std::string>& ExpertAxisNames();
// attention_kernel's values: "flash", "triton", "flex".
const std::vector<std::string>& AttentionKernelNames();
// The attention kernel in effect: the plan's, else "flash"; "unfused" (kUnfusedAttention) where
// flash_attention is off.
std::string AttentionKernelOf(const PlanSpec& plan);
// master_weights' values: "fp32-copy", "fp32", "bf16".
const std::vector<std::string>& MasterWeightsNames();
// The master_weights in effect: the plan's, else fp32 for fp32 plans and fp32-copy for others.
std::string MasterWeightsOf(const PlanSpec& plan);
// What a master_weights value holds, in words ("fp32 weights, their own master, with fp32
// gradients and Adam state"): the one phrase the estimate and the framework gaps print.
std::string MasterWeightsPhrase(std::string_view master_weights);
// tensor_overlap_scope's values: "all", "single-product".
const std::vector<std::string>& TensorOverlapScopeNames();
// Whether the backward reduce-scatter (or all-reduce) of a tensor-parallel region's input
// gradient hides under the products that make it: overlap.tensor, except under
// tensor_overlap_scope single-product where `several_products` (products reading the region's
// input, their gradients summed before the reduction, or grouped expert products, which torch's
// pass fuses with no collective at all) run in the framework's modules. Unfused, a collective is
// still issued asynchronously; with nothing independent to run beside it, it is costed blocking.
bool HidesRegionReduceScatter(const PlanSpec& plan, bool several_products);
// Whether the all-gather of a sequence-parallel region's input (forward) or output gradient
// (backward) hides under the product it feeds: overlap.tensor, except under tensor_overlap_scope
// single-product (torch's pass) where `fp8_products` run with row-wise scales (fp8_recipe rowwise):
// the pass does not fuse an all-gather into a row-wise scaled product (pytorch/pytorch#149990,
// open since 2025-03; its reduce-scatter side fuses since #149247), so the gather runs blocking.
bool HidesRegionAllGather(const PlanSpec& plan, bool fp8_products);
// pipeline_buffers' values: "per-transfer", "per-microbatch", "keep-outputs".
const std::vector<std::string>& PipelineBuffersNames();
// The pipeline_buffers in effect: the plan's, or "per-transfer" where it sets none.
std::string PipelineBuffersOf(const PlanSpec& plan);
// memory_allocator's values: "caching", "static"; and the one in effect ("caching" where unset).
const std::vector<std::string>& MemoryAllocatorNames();
std::string MemoryAllocatorOf(const PlanSpec& plan);
// The width of activations and of what moves them (4 bytes for fp32 plans, else 2: FP8 recipes
// keep 16-bit activations); parameters are gathered at it too unless param_gather_dtype is fp8.
// ActivationBytes is the same by the dtype's name: the one home of the width.
double ComputeElementBytes(const PlanSpec& plan);
double ActivationBytes(std::string_view dtype);
// The dtype parameters and gradients have before any reduction choice: the compute dtype, bf16
// for fp8 plans (FP8 recipes keep 16-bit weights).
std::string WeightDtype(const PlanSpec& plan);
double GradReduceBytes(const PlanSpec& plan);
// grad_reduce_dtype's values.
const std::vector<std::string>& GradReduceDtypeNames();
// cross_entropy's values: "fused", "eager".
const std::vector<std::string>& CrossEntropyNames();
// elementwise_kernels' values: "fused", "eager", "eager-fused-norm".
const std::vector<std::string>& ElementwiseKernelsNames();
// fp8_recipe's values: "tensorwise", "rowwise", "blockwise", "mxfp8", "nvfp4".
const std::vector<std::string>& Fp8RecipeNames();
// The peak_flop_per_s key a plan's layer products run at: the chip's fp4 peak under fp8_recipe
// nvfp4, else the dtype's. The one home of that choice (the roofline, MFU, the checks).
std::string MatmulPeakDtype(std::string_view dtype, std::string_view fp8_recipe);

// The values in effect where a plan leaves them unset (a framework profile sets its own first,
// planner::AsFrameworkRuns): the loss "fused"; an fp8 plan's recipe "tensorwise" ("" for other
// dtypes). The one home of both defaults for the memory model, the costs and the exports.
std::string CrossEntropyOf(const PlanSpec& plan);
// elementwise_kernels in effect: "fused" where the plan leaves it unset.
std::string ElementwiseKernelsOf(const PlanSpec& plan);
// Whether its activations and rotary embeddings run as PyTorch primitives ("eager",
// "eager-fused-norm"), and its RMSNorms too ("eager").
bool EagerElementwise(const PlanSpec& plan);
bool EagerNorms(const PlanSpec& plan);
std::string Fp8RecipeOf(const PlanSpec& plan);

// The scales an FP8 recipe adds to a quantised tensor, in bytes: an fp32 scale per row for
// rowwise, per 128 elements for blockwise, an 8-bit one per 32 for mxfp8, an 8-bit (E4M3) one per
// 16 for nvfp4; one per tensor, nothing per row or element, for tensorwise. `element`: the
// quantised element's own bytes, 1 (E4M3 / E5M2), or half a byte for nvfp4's E2M1.
struct Fp8Scales {
  double per_element = 0, per_row = 0;
  double element = 1;
};
Fp8Scales Fp8ScaleBytes(std::string_view recipe);
// The scales of a recipe's quantised weights, per element: none for tensorwise, an fp32 one per
// 128 x 128 tile for blockwise (DeepSeek-V3 section 3.3: activations 1 x 128, weights 128 x 128),
// an 8-bit one per 32 for mxfp8, per 16 for nvfp4 (its 16 x 16 blocks store a scale per row of
// 16); rowwise weights are not gathered quantised (0).
double Fp8WeightScaleBytes(std::string_view recipe);
// Bytes of one quantised weight element under `recipe`: its element and its weight scales (what
// an FP8 weight gather moves, what each cached copy holds).
double Fp8WeightBytes(std::string_view recipe);
// Bytes per element of an fp8 plan's quantised tensor with rows of `row_width` elements: one byte
// (half under nvfp4) plus its recipe's scales. The one home of the FP8 element width (the casts' cost reads
// Fp8ScaleBytes too).
double Fp8ElementBytes(const PlanSpec& plan, int64_t row_width);
// Bytes per element of a row of `row_width` elements in the expert all-to-alls that carry rows to
// the experts: the activations' width, or Fp8ElementBytes under ep_dispatch_dtype fp8. The one
// home of the dispatch width for the step program and its exports.
double EpDispatchBytes(const PlanSpec& plan, int64_t row_width);
// ep_dispatch_dtype's values: "bf16", "fp8".
const std::vector<std::string>& EpDispatchDtypeNames();
// Whether the expert all-to-alls send a token once per destination node and GPU (ep_dispatcher
// deepep, with expert > 1) rather than once per routed copy.
bool DeduplicatesDispatch(const PlanSpec& plan);
// The compute units (SMs) the expert dispatcher's own kernels occupy while they run: DeepEP's 20
// (deep_ep/buffer.py Buffer.num_sms = 20; Megatron-core's moe_deepep_num_sms = 20) under
// DeduplicatesDispatch, else 0 (NCCL's all-to-all: its channel count varies, not modelled).
int64_t DispatchKernelUnits(const PlanSpec& plan);
// ep_dispatcher's values: "alltoall", "deepep".
const std::vector<std::string>& EpDispatcherNames();
// expert_routing's values: "uniform", "round-robin".
const std::vector<std::string>& ExpertRoutingNames();
// What a deduplicating dispatcher's all-to-alls need of the model's routing (its experts, top_k
// and group limit) under the plan's expert_routing: the one place the MoE spec becomes a
// TokenRouting. Empty for a dense model.
TokenRouting DispatchRouting(const ModelSpec& model, const PlanSpec& plan);
// Bytes per element of an input an FP8 product keeps for its backward, rows of `row_width`
// elements: Fp8ElementBytes under saved_input_dtype fp8 (an fp8 plan), else the activations' width.
double SavedInputBytes(const PlanSpec& plan, int64_t row_width);
// Bytes per element of a sequence-parallel all-gather of an FP8 product's input, rows of
// `row_width` elements: Fp8ElementBytes under tensor_gather_dtype fp8 (an fp8 plan), else the
// activations' width. The one home of that width.
double TensorGatherBytes(const PlanSpec& plan, int64_t row_width);
// Whether the plan runs sequence-parallel regions (tensor > 1 with sequence_parallel), whose
// all-gathers tensor_gather_dtype and sequence_parallel_inputs describe. The one home of that test.
bool GathersSequence(const PlanSpec& plan);
// tensor_gather_dtype's values: "bf16", "fp8".
const std::vector<std::string>& TensorGatherDtypeNames();
// saved_input_dtype's values: "bf16", "fp8".
const std::vector<std::string>& SavedInputDtypeNames();
// wgrad_dtype's values: "bf16", "fp8"; and whether an fp8 plan's weight-gradient products run at
// 16 bits (wgrad_dtype bf16 with dtype fp8).
const std::vector<std::string>& WgradDtypeNames();
bool SixteenBitWgrad(const PlanSpec& plan);

// Whether decoder layer `layer` (0-based) of a model of `num_layers` runs at 16 bits in this fp8
// plan (sixteen_bit_first_layers, sixteen_bit_last_layers); never outside fp8 plans.
bool SixteenBitLayer(const PlanSpec& plan, int64_t num_layers, int64_t layer);
bool HasSixteenBitLayers(const PlanSpec& plan);
// The fields an FP8 recipe owns, which need dtype fp8: its scaling, what it quantises, the
// layers it leaves at 16 bits.
const std::vector<std::string>& Fp8RecipeFields();
// `plan` at 16 bits: dtype bf16 and the FP8 recipe's fields at their defaults. What a decoder layer
// the plan keeps at 16 bits runs.
PlanSpec AtSixteenBits(PlanSpec plan);

// The effective fsdp_reshard_after_forward: the plan's, else true without pipeline parallelism and
// false with it.
bool ReshardAfterForward(const PlanSpec& plan);

// The axes of size > 1 in the plan's mesh_order, outermost first (the others do not change the
// layout), and whether they come in the default order.
std::vector<std::string> UsedMeshOrder(const PlanSpec& plan);
bool UsesDefaultMeshOrder(const PlanSpec& plan);

// The plan JSON's `framework` values: "megatron-core", "torchtitan", "maxtext", "deepspeed", in
// planner::Framework's order. They live here, not in planner/, because plan JSON is read in core.
const std::vector<std::string>& PlanFrameworkNames();
// `name` as one of PlanFrameworkNames(), with "megatron" read as "megatron-core"; empty when it is
// none of them.
std::string CanonicalFrameworkName(std::string_view name);

std::string ToString(Recompute recompute);
std::vector<std::string> RecomputeNames();
Recompute ParseRecompute(const std::string& name);                // REQUIRES: a name from the list

// Parses "data=8,tensor=8" (axes left out are 1). Throws InputError naming `where` for an unknown
// axis (with the closest), a repeated axis, or a size that is not a positive whole number.
MeshShape ParseMeshSpec(const std::string& text, const std::string& where);

// "data=8 x tensor=8 x pipeline=16" (axes of size 1 left out; "1 device" for all ones).
std::string DescribeMesh(const MeshShape& mesh);

}  // namespace shardsim
