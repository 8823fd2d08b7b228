// The StepProgram: one training step of one SPMD program on a logical mesh, as every engine
// reads it. Per pipeline stage: which layer programs it runs (counted, not copied: a 126-layer
// model costs no more than a 2-layer one), the order of its micro-batch tasks, the step-level
// communication (gradient reduction) and the optimizer. Op keys read stage/layer/op/microbatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/collective_op.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::strategies {

// Where an op runs: compute, or one communication stream per kind (frameworks use separate CUDA
// streams or async collectives for these).
enum class Stream { kCompute, kTensor, kData, kPipeline, kExpert, kContext };

// When an op runs within a layer's work on one micro-batch.
enum class Phase : uint8_t {
  kForward,
  kBackwardInput,   // B: gradients with respect to activations (the critical path)
  kBackwardWeight,  // W: gradients with respect to weights (can be deferred by zero-bubble schedules)
  kRecompute,       // forward work redone before backward (activation recomputation)
};

enum class ComputeKind { kMatmul, kAttention, kElementwise, kEmbedding, kLoss, kOptimizer };

struct Op {
  std::string name;  // "qkv", "attention", "tp_reduce_attention", ...
  Phase phase = Phase::kForward;
  Stream stream = Stream::kCompute;
  // Compute (stream kCompute):
  ComputeKind kind = ComputeKind::kElementwise;
  double flops = 0;        // hardware FLOPs (2 per multiply-add)
  double bytes = 0;        // HBM bytes read and written
  int64_t m = 0, n = 0, k = 0;  // matmul shape [m,k] x [k,n]
  // Communication (other streams):
  CollectiveOp collective = CollectiveOp::kAllReduce;
  std::vector<std::string> axes;  // mesh axes of the group
  double comm_bytes = 0;          // nccl-tests size convention (see core/collective_op.h users)
  bool overlapped = false;        // runs under compute when the plan's overlap switch allows
  bool is_comm() const { return stream != Stream::kCompute; }
};

// A compute op of `kind` in `phase`.
Op ComputeOp(std::string name, Phase phase, ComputeKind kind, double flops, double bytes);
// A collective `op` over mesh `axes` on `stream` in `phase`, of `bytes` (nccl-tests size).
Op CommOp(std::string name, Phase phase, Stream stream, CollectiveOp op, std::vector<std::string> axes, double bytes, bool overlapped);

// The ops of one layer for one micro-batch, all phases, in issue order within each phase.
struct LayerProgram {
  std::string name;  // "dense", "moe", "embedding", "head"
  std::vector<Op> ops;
};

// A pipeline task: one micro-batch through one model chunk of a stage, one phase.
// Eight bytes: schedules of thousands of micro-batches over many stages are built per plan.
struct Task {
  int32_t microbatch = 0;
  int16_t chunk = 0;  // virtual stage index on this device (interleaved schedules)
  Phase phase = Phase::kForward;
};

struct Chunk {
  // (index into StepProgram::layer_programs, how many times) in execution order.
  std::vector<std::pair<int, int64_t>> layers;
  int64_t direction = 0;  // which micro-batches pass through it (DualPipe feeds two directions)
  int64_t position = 0;   // its place along those micro-batches' path through the pipeline
};

struct Stage {
  std::vector<Chunk> chunks;  // virtual_stages of them (chunk c of stage s at position c p + s); DualPipe: 2
  std::vector<Task> tasks;    // the schedule's order on this stage
  double params = 0;          // parameters held (after tensor / pipeline / expert sharding)
  double activation_peak_bytes = 0;  // stored activations at the schedule's peak (memory model)
  std::vector<Op> step_ops;   // once per step: gradient reduction, parameter gathers, optimizer
};

struct StepProgram {
  ModelSpec model;
  PlanSpec plan;
  int64_t microbatches = 0;  // per data-parallel replica
  // Micro-batches the stages' task lists cover: all of them, or, when there are many, a count
  // past the schedule's warm-up (ScheduledMicrobatches) from which the estimator extends the
  // steady state linearly. Task micro-batch indices and second_direction_from refer to these.
  int64_t scheduled_microbatches = 0;
  int64_t tokens_per_microbatch = 0;  // per device, after context parallelism
  std::vector<LayerProgram> layer_programs;
  std::vector<Stage> stages;            // one per pipeline rank
  // Per direction, the (stage, chunk) at each position of the path micro-batches take.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> paths;
  int64_t second_direction_from = 0;    // micro-batches from this index take direction 1 (DualPipe)
  Op pipeline_send;                     // activation (forward) / gradient (backward) between stages
  // Model FLOPs per step, no recomputation: 6 N per token plus causal attention (half the S x S
  // blocks), and PaLM's count, whose attention term 12 L H Q T includes the masked blocks.
  double model_flops_per_step = 0;
  double palm_flops_per_step = 0;
};

std::string ToString(Stream stream);
std::string ToString(Phase phase);
std::string ToString(ComputeKind kind);

// The direction micro-batch `mb` takes.
// How many micro-batches a stage's task list covers for `microbatches` in all: all of them up to
// 8 p v (plus one period), else 8 p v, a multiple of the extension period 2 p.
int64_t ScheduledMicrobatches(int64_t pipeline, int64_t virtual_stages, int64_t microbatches);
// The estimator plays a schedule of fewer micro-batches too, a multiple of 2 p (keeping
// interleaving's multiple of p and DualPipe's even split), to find the steady state's rate.
inline int64_t ScheduleExtensionPeriod(int64_t pipeline) { return 2 * pipeline; }

inline int64_t DirectionOf(const StepProgram& program, int64_t mb) { return mb >= program.second_direction_from ? 1 : 0; }

// Sum over a phase of a layer program's compute FLOPs.
double PhaseFlops(const LayerProgram& layer, Phase phase);

// Checks the schedule of every stage: each micro-batch's F precedes its B precedes its W on each
// chunk, and every (micro-batch, chunk, phase) task appears exactly once. Returns "" when valid,
// else what is wrong.
std::string ValidateSchedule(const StepProgram& program);

// A deterministic text dump (--dump-program): same inputs, byte-identical output.
std::string DumpProgram(const StepProgram& program);

}  // namespace shardsim::strategies
