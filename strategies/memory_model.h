// Memory per device: parameters, gradients and optimizer state per ZeRO stage (bytes per element
// by the plan's dtype: ZeRO's 2 + 2 + 12 per parameter in mixed precision, 4 + 4 + 8 in fp32),
// activations per layer and micro-batch re-derived from Korthikanti et al. 2022 for SwiGLU, GQA,
// MLA and MoE, times the micro-batches a stage holds at once under its schedule, plus logits and
// communication buffers.
#pragma once

#include <string>

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/schedule.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// Bytes per element the memory model counts for activations (per stored activation element) and
// logits (per logit of the loss); parameters, gradients and optimizer state per parameter are
// StateBytesOf's (strategies/state_bytes.h, by the plan's master_weights).
struct ElementBytes {
  double activations = 0, logits = 0;
};
// The table, by the plan's dtype: fp32 activations and logits for "fp32", 16-bit activations and
// fp32 logits beside their 16-bit copy for any other dtype.
ElementBytes MemoryBytesPerElement(const std::string& dtype);

// Bytes per logit of the loss: `held` from a micro-batch's forward to its backward, and
// `backward` more while its backward runs. Fused (Megatron-core's vocab-parallel cross-entropy,
// or a compiled loss): the logits and their fp32 softmax made in place (the dtype's `logits`),
// nothing more. Eager (PyTorch's F.cross_entropy over logits.float(), torchtitan's loss without
// torch.compile): the fp32 log-probabilities it saves, then their gradient and the logits' fp32
// gradient (4 + 4); over vocabulary-sharded logits (PyTorch's loss_parallel, tensor > 1) up to
// three fp32 temporaries at once (4 + 4 + 4); with 16-bit logits, 2 more, held per micro-batch in
// flight by a pipeline stage or kept reserved by the caching allocator (memory_model.cc).
struct LogitBytes {
  double held = 0, backward = 0;
};
LogitBytes LossBytesPerLogit(const PlanSpec& plan);

// Activation bytes one device stores for backward, per layer and micro-batch of `tokens` tokens
// (b S / context), under the plan's tensor / sequence parallelism, recomputation and attention
// kernel. MoE layers add their routed experts' activations.
double LayerActivationBytes(const ModelSpec& model, const PlanSpec& plan, int64_t tokens, bool moe_layer);
// The same for a decoder layer of `kind`: a transformer layer's, or a hybrid layer's one block
// (the tensors its block holds, saved_tensors.h BlockHolds; a Mamba-2 mixer's,
// mamba_layer.h) with its input.
double LayerKindActivationBytes(const ModelSpec& model, const PlanSpec& plan, int64_t tokens, LayerKind kind);

// Activation bytes one multi-token-prediction module stores per micro-batch of `tokens` tokens: its
// layer's (LayerActivationBytes), the two inputs of its entry norms and, unless fully recomputed,
// their normed concatenation the projection reads.
double MtpActivationBytes(const ModelSpec& model, const PlanSpec& plan, int64_t tokens);

// Bytes one routed token copy adds to the saved activations of the rank whose expert computes it:
// its input row and its gate, up and activation rows (the MoE term of LayerActivationBytes per
// copy). Dropless routing sends a rank more or fewer copies than its tokens route (balanced);
// `shardsim validate` evaluates the model at the routing that happened with it.
double ExpertRowActivationBytes(const ModelSpec& model, const PlanSpec& plan);

struct MemoryBreakdown {
  double params = 0, grads = 0, optimizer = 0, activations = 0, buffers = 0;
  // Of `buffers`: what the stage keeps of the tensors it sends and receives under the plan's
  // pipeline_buffers beyond its layers' activations and the loss's logits in flight (0 under
  // per-transfer).
  double pipeline = 0;
  // Of `buffers`: the FP8 copies of the products' weights that per-step casts keep
  // (Fp8WeightCacheBytes; 0 otherwise).
  double fp8_weight_cache = 0;
  // Taken off `buffers`: what one micro-batch's loss buffers and a layer's backward working set
  // (what its recomputation rebuilds, the context ranks' K/V) share under memory_allocator static
  // (0 under caching, and where the stage has no head).
  double loss_shared = 0;
  // Host memory (not in total()): the offloaded layers' activations at the stage's peak
  // (PlanSpec::offload_layers).
  double host = 0;
  double total() const { return params + grads + optimizer + activations + buffers; }
};

struct MemoryReport {
  std::vector<MemoryBreakdown> stages;  // per pipeline stage
  int64_t peak_stage = 0;
  MemoryBreakdown peak;  // the stage with the largest total
};

// Peak activation bytes of `stage` under its task order (an F stores a chunk's activations, its
// W releases them). BuildStep stores it in Stage::activation_peak_bytes.
// `task_lists`, when given, supplies (and keeps) the task lists.
// Layers whose activations the plan offloads (PlanSpec::offload_layers) count two of them at most,
// the one being copied out or in beside the one at work.
double StageActivationPeak(const StepProgram& program, int64_t stage, TaskLists* task_lists = nullptr);
// The same for what the offloaded layers hold in host memory.
double StageHostActivationPeak(const StepProgram& program, int64_t stage, TaskLists* task_lists = nullptr);

// Memory of every stage of `program`. In-flight micro-batches come from each stage's task order
// (an F stores a chunk's activations, its W releases them). `task_lists` as above;
// `fp8_any_layout`: the chip's (ChipSpec::fp8_any_layout), for the cached FP8 weights.
MemoryReport EstimateMemory(const StepProgram& program, TaskLists* task_lists = nullptr, bool fp8_any_layout = false);

}  // namespace shardsim::strategies
