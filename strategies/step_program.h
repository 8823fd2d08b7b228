// The StepProgram: one training step of one SPMD program on a logical mesh, as every engine
// reads it. Per pipeline stage: which layer programs it runs (counted, not copied: a 126-layer
// model costs no more than a 2-layer one), the order of its micro-batch tasks, the step-level
// communication (gradient reduction) and the optimizer. Op keys read stage/layer/op/microbatch.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/collective_op.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/stage_layout.h"

namespace shardsim::strategies {

class Schedule;

// Where an op runs: compute, or one communication stream per kind (frameworks use separate CUDA
// streams or async collectives for these); kHost: copies between the device and its host's memory
// (activation offloading), CollectiveOp::kPermute over no mesh axis, on the cluster's "host" link.
enum class Stream { kCompute, kTensor, kData, kPipeline, kExpert, kContext, kHost };
inline constexpr size_t kStreams = 7;

// When an op runs within a layer's work on one micro-batch.
enum class Phase : uint8_t {
  kForward,
  kBackwardInput,   // B: gradients with respect to activations (the critical path)
  kBackwardWeight,  // W: gradients with respect to weights (can be deferred by zero-bubble schedules)
  kRecompute,       // forward work redone before backward (activation recomputation)
};

// kScan: a Mamba-2 mixer's chunked scan (SSD), blockwise tensor-core products like attention's.
// kElementwise: memory-bound work (norms, activations, the embedding lookup, the loss); kOptimizer:
// the optimizer step (memory-bound too, told apart for the runtime's step timing).
enum class ComputeKind { kMatmul, kAttention, kElementwise, kOptimizer, kScan };

struct Op {
  std::string name;  // "qkv", "attention", "tp_reduce_attention", ...
  Phase phase = Phase::kForward;
  Stream stream = Stream::kCompute;
  // Compute (stream kCompute):
  ComputeKind kind = ComputeKind::kElementwise;
  double flops = 0;        // hardware FLOPs (2 per multiply-add)
  double bytes = 0;        // HBM bytes read and written
  int64_t m = 0, n = 0, k = 0;  // matmul shape [m,k] x [k,n]
  // An FP8 matmul's share of the FP8 cast of its [k,n] operand that it pays: the weight's in the
  // forward and input-gradient products (WeightCastShares), 1 in a weight-gradient product,
  // whose operands are activations.
  double weight_cast_share = 1;
  // A product an fp8 plan runs at 16 bits: at the 16-bit peak and matmul efficiency, with no FP8
  // casts (the output head's, which none of the profiled frameworks converts: Megatron-core builds
  // it as tensor_parallel.ColumnParallelLinear, not a Transformer Engine module, unless
  // fp8_output_proj with MXFP8; torchtitan's FP8 configurations filter "lm_head"; MaxText does not
  // quantize the logits matmul) and an MoE router's (Megatron-core's router_gating_linear,
  // torchtitan's "router.gate" filter). Set on fp8 plans' ops only.
  bool sixteen_bit = false;
  // Communication (other streams):
  CollectiveOp collective = CollectiveOp::kAllReduce;
  std::vector<std::string> axes;  // mesh axes of the group
  double comm_bytes = 0;          // nccl-tests size convention (see core/collective_op.h users)
  bool overlapped = false;        // runs under compute when the plan's overlap switch allows
  // The part of its partner product's time it may hide under, as shares of it from its start
  // (OverlapPartner): all of it but for context parallelism's K/V all-gather (the attention's
  // local block, [0, 1 / context)) and the backward's dK/dV (the other blocks, [1 / context, 1)).
  double partner_from = 0, partner_to = 1;
  TokenRouting routing;           // an expert all-to-all sent once per node and device (deepep)
  // Compute units (SMs) the collective's own kernels occupy while it runs, taken from the compute
  // it hides under (DeepEP's dispatch and combine); 0: none (copy engines, or not modelled).
  int64_t comm_units = 0;
  bool is_comm() const { return stream != Stream::kCompute; }
};

// A compute op of `kind` in `phase`.
Op ComputeOp(std::string name, Phase phase, ComputeKind kind, double flops, double bytes);
// A collective `op` over mesh `axes` on `stream` in `phase`, of `bytes` (nccl-tests size).
Op CommOp(std::string name, Phase phase, Stream stream, CollectiveOp op, std::vector<std::string> axes, double bytes, bool overlapped);

// The kinds of layer program: a stage refers to them by kind and count. The local kinds are the
// dense and MoE layers whose attention covers a sliding window (SlidingWindowSpec); kMtp is one
// multi-token-prediction module (ModelSpec::mtp_layers), beside the head. A hybrid model's layers
// (ModelSpec::hybrid_pattern) are one block each: a Mamba-2 mixer, attention, an MLP or experts.
enum class LayerKind : uint8_t { kDense, kMoe, kEmbedding, kHead, kDenseLocal, kMoeLocal, kMtp, kMamba, kAttentionOnly, kMlpOnly, kMoeOnly };
inline constexpr int kLayerKinds = 11;

// The decoder layer kinds, in LayerKind's order.
inline constexpr std::array<LayerKind, 8> kTransformerKinds = {LayerKind::kDense,   LayerKind::kMoe,           LayerKind::kDenseLocal, LayerKind::kMoeLocal,
                                                               LayerKind::kMamba,   LayerKind::kAttentionOnly, LayerKind::kMlpOnly,    LayerKind::kMoeOnly};
// The model's decoder layers (dense or MoE, global or local attention, a hybrid model's blocks), as
// opposed to the embedding, the head and the multi-token-prediction modules.
constexpr bool IsTransformerLayer(LayerKind kind) { return kind != LayerKind::kEmbedding && kind != LayerKind::kHead && kind != LayerKind::kMtp; }
constexpr bool IsMoeKind(LayerKind kind) { return kind == LayerKind::kMoe || kind == LayerKind::kMoeLocal || kind == LayerKind::kMoeOnly; }
// The blocks a decoder layer of `kind` runs, each behind its own pre-norm.
struct LayerBlocks {
  bool mamba = false, attention = false, mlp = false, moe = false;
  // A transformer layer's two blocks (attention, then an MLP or experts), as opposed to a hybrid
  // model's one.
  constexpr bool transformer() const { return attention && (mlp || moe); }
  // A hybrid layer's character in ModelSpec::hybrid_pattern (LayerKindOf's inverse).
  constexpr char pattern() const { return mamba ? kHybridMamba : mlp ? kHybridMlp : moe ? kHybridMoe : kHybridAttention; }
};
constexpr LayerBlocks BlocksOf(LayerKind kind) {
  switch (kind) {
    case LayerKind::kMamba: return {.mamba = true};
    case LayerKind::kAttentionOnly: return {.attention = true};
    case LayerKind::kMlpOnly: return {.mlp = true};
    case LayerKind::kMoeOnly: return {.moe = true};
    case LayerKind::kMoe: case LayerKind::kMoeLocal: return {.attention = true, .moe = true};
    case LayerKind::kDense: case LayerKind::kDenseLocal: return {.attention = true, .mlp = true};
    default: return {};
  }
}
constexpr bool IsLocalAttentionKind(LayerKind kind) { return kind == LayerKind::kDenseLocal || kind == LayerKind::kMoeLocal; }
constexpr LayerKind TransformerLayerKind(bool moe, bool local) {
  return moe ? (local ? LayerKind::kMoeLocal : LayerKind::kMoe) : (local ? LayerKind::kDenseLocal : LayerKind::kDense);
}
// The kind of the model's decoder layer `layer` (0-based).
LayerKind LayerKindOf(const ModelSpec& model, int64_t layer);
// The hybrid layer kind of a hybrid symbol (ModelSpec::hybrid_pattern, mtp_pattern).
LayerKind HybridBlockKind(char symbol);

// The layer programs: one per kind, then each decoder kind's 16-bit twin, which an fp8 plan's
// decoder layers kept at 16 bits run (PlanSpec::sixteen_bit_first_layers, _last_layers).
inline constexpr int kLayerPrograms = 2 * kLayerKinds;

// The ops of one layer for one micro-batch, all phases, in issue order within each phase.
struct LayerProgram {
  LayerKind kind = LayerKind::kDense;
  bool sixteen_bit = false;  // the kind's 16-bit twin in an fp8 plan
  std::vector<Op> ops;       // empty for a kind the model lacks (MoE in a dense model)
};
// A layer program's name in reports: its kind's (ToString), "-16bit" after a 16-bit twin's.
std::string ProgramName(LayerKind kind, bool sixteen_bit);

// A pipeline task: one micro-batch through one model chunk of a stage, one phase.
// Eight bytes: schedules of thousands of micro-batches over many stages are built per plan.
struct Task {
  int32_t microbatch = 0;
  int16_t chunk = 0;  // virtual stage index on this device (interleaved schedules)
  Phase phase = Phase::kForward;
};

// `count` layers in a row that run one layer program.
struct LayerRun {
  LayerKind kind = LayerKind::kDense;
  int64_t count = 0;
  bool sixteen_bit = false;  // decoder layers an fp8 plan keeps at 16 bits
  // Its program's index in StepProgram::layer_programs.
  size_t program() const { return static_cast<size_t>(kind) + (sixteen_bit ? static_cast<size_t>(kLayerKinds) : 0); }
  bool operator==(const LayerRun&) const = default;
};

struct Chunk {
  ChunkLayout layout;  // where it sits and which layers it holds (stage_layout.h)
  // The layer programs it runs, in execution order, as runs of one program.
  std::vector<LayerRun> layers;
};

struct Stage {
  std::vector<Chunk> chunks;  // the schedule's chunks per stage
  double dense_params = 0;    // parameters held after tensor / pipeline sharding, replicated over expert
  double expert_params = 0;   // routed experts' parameters held (after expert sharding)
  // Of dense_params and expert_params, the weights no FP8 recipe casts: the embedding tables, the
  // head and their copies, and the decoder layers an fp8 plan keeps at 16 bits.
  double sixteen_bit_params = 0, sixteen_bit_expert_params = 0;
  double sixteen_bit_weights() const { return sixteen_bit_params + sixteen_bit_expert_params; }
  double params() const { return dense_params + expert_params; }
  double activation_peak_bytes = 0;  // stored activations at the schedule's peak (memory model)
  std::vector<Op> step_ops;   // once per step: gradient reduction, parameter gathers, optimizer
};

struct StepProgram {
  ModelSpec model;
  PlanSpec plan;
  const Schedule* schedule = nullptr;  // the plan's pipeline schedule
  int64_t microbatches = 0;            // per data-parallel replica
  int64_t tokens_per_microbatch = 0;   // per device, after context parallelism
  std::array<LayerProgram, kLayerPrograms> layer_programs;  // indexed by LayerRun::program()
  std::vector<Stage> stages;           // one per pipeline rank
  StageLayout layout;                  // the same chunks, as the layout decided them
  Op pipeline_send;                    // activation (forward) / gradient (backward) between stages
  // Model FLOPs per step, no recomputation: 6 N per token plus causal attention (half the S x S
  // blocks), and PaLM's count, whose attention term 12 L H Q T includes the masked blocks.
  double model_flops_per_step = 0;
  double palm_flops_per_step = 0;

  const LayerProgram& Layer(LayerKind kind) const { return layer_programs[static_cast<size_t>(kind)]; }
  const LayerProgram& Layer(const LayerRun& run) const { return layer_programs[run.program()]; }
  // The program the model's decoder layer `layer` (0-based) runs.
  const LayerProgram& ProgramOfLayer(int64_t layer) const;
};

// Decoder layers of `chunk` whose kept activations the plan offloads to host memory
// (PlanSpec::offload_layers: its first ones, at most all of them).
int64_t OffloadedLayers(const PlanSpec& plan, const Chunk& chunk);
// The same per run of `chunk.layers`: how many of each run's layers are offloaded (the first
// decoder layers in order; 0 for the embedding, the head and multi-token-prediction modules).
std::vector<int64_t> OffloadedPerRun(const PlanSpec& plan, const Chunk& chunk);

// Micro-batches per pipeline schedule when `count` of the program's micro-batches run: its plan's
// pipeline_rounds' share of the step's, or `count` where that is fewer (a steady-state play of one
// schedule's first micro-batches). `count` -1: all of them.
int64_t ScheduleRound(const StepProgram& program, int64_t count = -1);
// The task order of `stage` over the program's first `microbatches` micro-batches (all of them
// when -1), as the schedule dictates, round after round (RoundTasks).
std::vector<Task> StageTasks(const StepProgram& program, int64_t stage, int64_t microbatches = -1);
// The direction micro-batch `mb` of `microbatches` takes (its place in its schedule round).
int64_t DirectionOf(const StepProgram& program, int64_t mb, int64_t microbatches);
// How many of the program's first `microbatches` micro-batches take each of its paths' directions
// (DirectionOf of each, summed over whole rounds and the part of one: no visit per micro-batch).
std::vector<int64_t> MicrobatchesPerDirection(const StepProgram& program, int64_t microbatches);

std::string ToString(Stream stream);
std::string ToString(Phase phase);
std::string ToString(ComputeKind kind);
std::string ToString(LayerKind kind);

// The program with every collective it overlaps with compute run as blocking instead (point-to-
// point transfers, CollectiveOp::kPermute, keep theirs): what a cluster runs whose collectives do
// not move under compute (CollectivesOverlapCompute in core/calibration.h).
StepProgram WithBlockingCollectives(StepProgram program);
// Whether the program overlaps any collective (point-to-point transfers aside) with compute:
// what WithBlockingCollectives would change.
bool OverlapsCollectives(const StepProgram& program);

// The matrix product an overlapped tensor-parallel collective of `ops` (a layer program's, in
// issue order) hides under: the first one after it in its phase for an all-gather (the product
// that reads what it gathers), the last one before it for a reduce-scatter or all-reduce (the
// product whose output it reduces). That is how tensor-parallel overlap works: Megatron-core's
// tp-comm-overlap and torchtitan's async TP split the product and its collective into chunks
// that pipeline (collective matmul), and Megatron's backward all-gather of the sequence-parallel
// input runs while the input-gradient product computes; neither can hide under the rest of the
// phase, which waits for the product's output. The product must be the nearest compute op that
// way (collectives in between are passed over). -1 for any other op, or where there is no such
// product (the collective then hides under the phase's compute, as other overlapped ones).
// Several collectives may share a product: they run one after another on the tensor stream, and
// what they take together beyond it is exposed. An overlapped all-gather of K/V over context (in
// the forward, its recomputation or the backward) has the attention after it as partner, and the
// backward's reduce-scatter of dK/dV the attention before it, each over its part of it
// (partner_from, partner_to): PyTorch's context parallel (all-gather rotate method) starts the
// gather, computes the local block and waits for the gather before the next block
// (torch/distributed/tensor/experimental/_attention.py, _templated_ring_attention), and its
// backward passes each block's dK/dV on while the next block computes; under load balancing the
// local block is 1 / context of a rank's causal attention. shardsim applies it to every
// framework's all-gather variant, and to sliding-window layers as to global ones.
int64_t OverlapPartner(const std::vector<Op>& ops, size_t index);

// Sum over a phase of a layer program's compute FLOPs.
double PhaseFlops(const LayerProgram& layer, Phase phase);

// Checks the schedule of every stage over `microbatches` (all when -1): each micro-batch's F
// precedes its B precedes its W on each chunk of its direction, and every (micro-batch, chunk,
// phase) task appears exactly once. Returns "" when valid, else what is wrong.
std::string ValidateSchedule(const StepProgram& program, int64_t microbatches = -1);

// A deterministic text dump (--dump-program): same inputs, byte-identical output.
std::string DumpProgram(const StepProgram& program);

}  // namespace shardsim::strategies
