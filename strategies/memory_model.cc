#include "strategies/memory_model.h"

#include <algorithm>
#include <map>
#include <optional>

#include "strategies/context_parallel.h"
#include "strategies/data_parallel.h"
#include "strategies/mamba_layer.h"
#include "strategies/saved_tensors.h"
#include "strategies/schedule.h"
#include "strategies/state_bytes.h"

namespace shardsim::strategies {

ElementBytes MemoryBytesPerElement(const std::string& dtype) {
  // fp32 training (what shardsim-runtime does): fp32 activations and logits only. Mixed
  // precision: 16-bit activations (Korthikanti et al. 2022, section 4); the loss's logits in fp32
  // beside their 16-bit copy (4 + 2).
  if (dtype == "fp32") return {.activations = ActivationBytes(dtype), .logits = 4};
  return {.activations = ActivationBytes(dtype), .logits = 4 + ActivationBytes(dtype)};
}

LogitBytes LossBytesPerLogit(const PlanSpec& p) {
  if (CrossEntropyOf(p) == "eager") {
    // Over vocabulary-sharded logits (tensor > 1) the eager loss is taken as torchtitan runs it:
    // PyTorch's loss_parallel (torch/distributed/tensor/parallel/loss.py, entered by torchtitan's
    // train context at 9dec370; its own components/loss.py later computes the same), whose fused
    // nll-and-log-softmax backward returns (grad_input + torch.exp(x)) * grad_output: a zeroed
    // gradient, exp(x), their sum and the product, fp32, at most three of them live at once
    // beside the saved log-probabilities (4 + 4 + 4). PyTorch's own kernels on whole logits make
    // the two gradients only (4 + 4).
    const double temporaries = p.mesh.tensor > 1 ? 4 + 4 + 4 : 4 + 4;
    // 16-bit logits: without pipelining the model's logits (2) and their fp32 copy (4) are made
    // side by side in forward and freed before the backward (torchtitan's train.py at 9dec370:
    // del pred), whose 4-byte temporaries reuse that space one at a time: 2 bytes per logit stay
    // reserved beside them (PyTorch's caching allocator keeps freed blocks until an allocation
    // fails; torchtitan reports the peak reserved). A pipeline stage keeps each micro-batch's outputs,
    // the logits, until its backward (torch.distributed.pipelining's fwd_cache): 2 bytes held per
    // micro-batch in flight. An fp32 plan's logits are their own fp32 copy.
    const double width = ActivationBytes(p.dtype), logits16 = width < 4 ? width : 0;
    if (p.mesh.pipeline > 1) return {.held = 4 + logits16, .backward = temporaries};
    return {.held = 4, .backward = temporaries + logits16};
  }
  return {.held = MemoryBytesPerElement(p.dtype).logits, .backward = 0};
}

double LayerActivationBytes(const ModelSpec& m, const PlanSpec& p, int64_t tokens, bool moe_layer) {
  // Per token: what the plan's recomputation keeps of each tensor the backward reads
  // (saved_tensors.h).
  double per_token = 0;
  for (int i = 0; i < kLayerTensors; ++i) {
    const auto tensor = static_cast<LayerTensor>(i);
    const double share = KeptShare(p.recompute, tensor, m, p);
    if (share > 0) per_token += share * TensorBytesPerToken(tensor, m, p, moe_layer);
  }
  return static_cast<double>(tokens) * per_token;
}

double LayerKindActivationBytes(const ModelSpec& m, const PlanSpec& p, int64_t tokens, LayerKind kind) {
  const LayerBlocks blocks = BlocksOf(kind);
  if (blocks.transformer()) return LayerActivationBytes(m, p, tokens, blocks.moe);
  double per_token = 0;
  for (int i = 0; i < kLayerTensors; ++i) {
    const auto tensor = static_cast<LayerTensor>(i);
    if (!BlockHolds(blocks, tensor)) continue;
    const double share = KeptShare(p.recompute, tensor, m, p);
    if (share > 0) per_token += share * TensorBytesPerToken(tensor, m, p, blocks.moe);
  }
  if (blocks.mamba) per_token += MambaKeptShare(p.recompute) * MambaActivationBytesPerToken(m, p);
  return static_cast<double>(tokens) * per_token;
}

double MtpActivationBytes(const ModelSpec& m, const PlanSpec& p, int64_t tokens) {
  const double a = MemoryBytesPerElement(p.dtype).activations;
  const double sp = p.sequence_parallel ? static_cast<double>(p.mesh.tensor) : 1.0;
  const double inputs = 2 * static_cast<double>(m.hidden_size) * a / sp;  // previous depth's hidden state, next token's embedding
  // Full recomputation reruns the entry from its inputs; the other sets keep its concatenation.
  const double entry = p.recompute == Recompute::kFull ? inputs : 2 * inputs;
  if (!IsHybrid(m)) return LayerActivationBytes(m, p, tokens, MtpLayerIsMoe(m)) + static_cast<double>(tokens) * entry;
  double layers = 0;  // a hybrid model's module: its blocks', each as the model's layer of that kind keeps
  for (const char block : m.mtp_pattern) layers += LayerKindActivationBytes(m, p, tokens, HybridBlockKind(block));
  return layers + static_cast<double>(tokens) * entry;
}

double ExpertRowActivationBytes(const ModelSpec& m, const PlanSpec& p) {
  if (!m.moe) return 0;
  // Its input row (the up projections' input, at the saved-input width and the routed width) and
  // its MLP rows.
  return SavedInputBytes(p, RoutedWidth(m)) * static_cast<double>(RoutedWidth(m)) + ExpertMlpRowBytes(m, p);
}

namespace {

// Whether any of the stage's layers runs an attention block (decoder layers with one, the
// multi-token-prediction modules).
bool HoldsAttention(const Stage& stage) {
  for (const Chunk& chunk : stage.chunks) {
    for (const auto& [kind, count, sixteen_bit] : chunk.layers) {
      if (count > 0 && (BlocksOf(kind).attention || kind == LayerKind::kMtp)) return true;
    }
  }
  return false;
}

// The largest sum over `stage_index`'s task order of `chunk_bytes[c]` stored by each F of chunk c
// and freed by its task of phase `release`. The peak is reached once the schedule is in its
// steady state, within one schedule (a step's rounds repeat it).
double PeakInFlight(const StepProgram& program, int64_t stage_index, const std::vector<double>& chunk_bytes, Phase release, TaskLists* task_lists) {
  const int64_t round = ScheduleRound(program);
  int64_t played = SteadyStateMicrobatches(program.layout.stages, program.layout.chunks, round);
  TaskLists own;
  TaskLists& lists = task_lists ? *task_lists : own;
  // A stage that holds every played micro-batch at once (GPipe runs all its forwards first) has
  // not reached its peak: that grows with the round, which is then walked whole.
  const int64_t directions = program.schedule->Directions(program.layout.stages);
  if (played < round) {
    for (const std::vector<int64_t>& counts : lists.InFlightPeaks(*program.schedule, program.layout.stages, played, program.layout.chunks, stage_index, release)) {
      if (std::any_of(counts.begin(), counts.end(), [&](int64_t n) { return n * directions >= played; })) played = round;
    }
  }
  double peak = 0;
  for (const std::vector<int64_t>& counts : lists.InFlightPeaks(*program.schedule, program.layout.stages, played, program.layout.chunks, stage_index, release)) {
    double bytes = 0;
    for (size_t c = 0; c < counts.size(); ++c) bytes += static_cast<double>(counts[c]) * chunk_bytes[c];
    peak = std::max(peak, bytes);
  }
  return peak;
}

// Whether `stage`'s chunk `c` sends its output to a chunk on another stage: not the head's, and
// the next chunk on its path not on this stage (a V schedule's turn passes the tensor in place).
bool SendsToAnotherStage(const Stage& stage, size_t c) {
  const ChunkLayout& chunk = stage.chunks[c].layout;
  if (chunk.head) return false;
  for (const Chunk& other : stage.chunks) {
    if (other.layout.direction == chunk.direction && other.layout.position == chunk.position + 1) return false;
  }
  return true;
}

// What a pipeline stage keeps of the tensors it sends and receives beyond its layers' saved
// activations and the loss's logits in flight, under the plan's pipeline_buffers (plan_spec.h).
// per-microbatch (torch.distributed.pipelining's stage.py): a receive buffer for each micro-batch's
// input (_prepare_forward_infra) and output gradient (_prepare_backward_infra) of every chunk
// but the first and the head's, made at the first step and kept; a micro-batch's input buffer
// is its first layer's input, which the stored activations count while it is in flight; each
// output sent to another stage kept from its F to its B (fwd_cache). A V schedule's turn puts the
// previous chunk's output and the next chunk's input gradient in those buffers'
// place (set_local_fwd_input, set_local_bwd_input), kept as long. keep-outputs: every output to
// the step's end instead (output_chunks before pytorch/pytorch#153383), the head's being its
// logits at the activations' width, of which the loss counts those in flight, and each input
// buffer's gradient, which stage_backward left in its .grad to the next step (before
// pytorch/pytorch#164329, October 2025: the same torch). Each chunk counts
// the micro-batches of its direction (DualPipe's two halves) in one schedule: a step of several
// rounds calls it once per round (step()), which reuses the buffers and clears the outputs.
double PipelineBufferBytes(const StepProgram& program, int64_t stage_index, double stage_logits, TaskLists* task_lists) {
  const std::string mode = PipelineBuffersOf(program.plan);
  if (program.layout.stages == 1 || mode == "per-transfer") return 0;
  const Stage& stage = program.stages[static_cast<size_t>(stage_index)];
  // Micro-batches taking each direction, in one schedule.
  const std::vector<int64_t> per_direction = MicrobatchesPerDirection(program, ScheduleRound(program));
  const double boundary = program.pipeline_send.comm_bytes;  // one micro-batch's stage input or output
  const double kept_input = KeptShare(program.plan.recompute, LayerTensor::kInput, program.model, program.plan);
  const double logit_bytes = ActivationBytes(program.plan.dtype);
  std::vector<double> inputs(stage.chunks.size(), 0), outputs(stage.chunks.size(), 0), logits(stage.chunks.size(), 0);
  double bytes = 0;
  std::vector<double> n(stage.chunks.size(), 0);
  for (size_t c = 0; c < stage.chunks.size(); ++c) {
    const ChunkLayout& chunk = stage.chunks[c].layout;
    n[c] = static_cast<double>(per_direction[static_cast<size_t>(chunk.direction)]);
    if (!chunk.embedding) {
      bytes += n[c] * boundary;
      inputs[c] = kept_input * boundary;
    }
    if (!chunk.head) bytes += n[c] * boundary;  // output-gradient receive buffers
    if (SendsToAnotherStage(stage, c)) outputs[c] = boundary;
    if (chunk.head) logits[c] = stage_logits * logit_bytes;
  }
  bytes -= PeakInFlight(program, stage_index, inputs, Phase::kBackwardWeight, task_lists);
  if (mode == "keep-outputs") {
    for (size_t c = 0; c < stage.chunks.size(); ++c) {
      const double input_grad = stage.chunks[c].layout.embedding ? 0 : boundary;
      bytes += n[c] * (outputs[c] + logits[c] + input_grad);
    }
    bytes -= PeakInFlight(program, stage_index, logits, Phase::kBackwardInput, task_lists);
  } else {
    bytes += PeakInFlight(program, stage_index, outputs, Phase::kBackwardInput, task_lists);
  }
  return bytes;
}

}  // namespace

namespace {

// Per chunk of `stage`: the activation bytes one micro-batch's F stores on the device and, of the
// offloaded layers (OffloadedLayers), in host memory.
struct ChunkActivations {
  std::vector<double> device, host;
  // Beyond the in-flight micro-batches' device bytes, the one at work may hold more while its
  // offloaded layers run: the layer being computed (or reloaded for its backward) beside the
  // previous one being copied out (or the next one being reloaded), two offloaded layers, where
  // its kept layers are fewer (OffloadedLayers are the chunk's first layers: their copies are
  // done before the kept layers' activations pile up, and reloaded after those are freed).
  double at_work = 0;
};
ChunkActivations ActivationsOf(const StepProgram& program, const Stage& stage) {
  std::optional<PlanSpec> sixteen_bit_plan;  // what a 16-bit layer keeps, made where one runs
  if (HasSixteenBitLayers(program.plan)) sixteen_bit_plan = AtSixteenBits(program.plan);
  ChunkActivations out;
  out.device.assign(stage.chunks.size(), 0);
  out.host.assign(stage.chunks.size(), 0);
  for (size_t c = 0; c < stage.chunks.size(); ++c) {
    const int64_t chunk_offloaded = OffloadedLayers(program.plan, stage.chunks[c]);
    const std::vector<int64_t> offloaded = OffloadedPerRun(program.plan, stage.chunks[c]);
    double largest = 0;  // one offloaded layer's, the largest
    for (size_t run = 0; run < stage.chunks[c].layers.size(); ++run) {
      const auto& [kind, count, sixteen_bit] = stage.chunks[c].layers[run];
      if (IsTransformerLayer(kind)) {
        const double layer = LayerKindActivationBytes(program.model, sixteen_bit ? *sixteen_bit_plan : program.plan, program.tokens_per_microbatch, kind);
        const int64_t off = offloaded[run];
        out.device[c] += static_cast<double>(count - off) * layer;
        out.host[c] += static_cast<double>(off) * layer;
        if (off > 0) largest = std::max(largest, layer);
      } else if (kind == LayerKind::kMtp) {
        out.device[c] += static_cast<double>(count) * MtpActivationBytes(program.model, program.plan, program.tokens_per_microbatch);
      }
    }
    out.at_work = std::max(out.at_work, static_cast<double>(std::min<int64_t>(chunk_offloaded, 2)) * largest - out.device[c]);
  }
  return out;
}

}  // namespace

double StageActivationPeak(const StepProgram& program, int64_t stage_index, TaskLists* task_lists) {
  // Walk the stage's tasks: an F adds its chunk's activations, its W frees them; the micro-batch
  // at work in its offloaded layers may hold more (ChunkActivations::at_work).
  const ChunkActivations chunks = ActivationsOf(program, program.stages[static_cast<size_t>(stage_index)]);
  return PeakInFlight(program, stage_index, chunks.device, Phase::kBackwardWeight, task_lists) + std::max(0.0, chunks.at_work);
}

double StageHostActivationPeak(const StepProgram& program, int64_t stage_index, TaskLists* task_lists) {
  const ChunkActivations chunks = ActivationsOf(program, program.stages[static_cast<size_t>(stage_index)]);
  return PeakInFlight(program, stage_index, chunks.host, Phase::kBackwardWeight, task_lists);
}

MemoryReport EstimateMemory(const StepProgram& program, TaskLists* task_lists, bool fp8_any_layout) {
  TaskLists own;  // one set of task lists for every stage, when the caller keeps none
  if (!task_lists) task_lists = &own;
  const ModelSpec& m = program.model;
  const PlanSpec& p = program.plan;
  const double t = static_cast<double>(p.mesh.tensor);
  const StateBytes bytes = StateBytesOf(p);
  MemoryReport report;
  for (size_t stage_index = 0; stage_index < program.stages.size(); ++stage_index) {
    const Stage& stage = program.stages[stage_index];
    MemoryBreakdown b;
    const double dense_params = stage.dense_params, expert_params = stage.expert_params;
    const ShardDegrees dense = Sharding(p, ParamKind::kDense), expert = Sharding(p, ParamKind::kExpert);
    b.params = bytes.params * (dense_params / dense.params + expert_params / expert.params);
    // Gradients are held as master_weights says: at the width they are reduced in beside a
    // separate master (Megatron's fp32 main_grad buffers), else at the weights' own dtype (FSDP2
    // casts each reduced shard to it).
    b.grads = bytes.grads * (dense_params / dense.grads + expert_params / expert.grads);
    b.optimizer = bytes.optimizer * (dense_params / dense.optimizer + expert_params / expert.optimizer);
    b.activations = stage.activation_peak_bytes;
    double layer_at_work = 0;  // one layer's backward working set beyond the stored activations
    if (p.offload_layers > 0) b.host = StageHostActivationPeak(program, static_cast<int64_t>(stage_index), task_lists);
    // A layer being recomputed holds what its recomputation rebuilds, once: all it does not keep
    // (a selective-layer layer rebuilds a whole one). For full recomputation that is the layer's
    // activations less its input, which the stored activations count already.
    if (p.recompute != Recompute::kNone && !stage.chunks.empty()) {
      auto rebuilt = [&](LayerKind kind, bool sixteen_bit) {
        PlanSpec none = sixteen_bit ? AtSixteenBits(p) : p, kept = none;
        none.recompute = Recompute::kNone;
        if (p.recompute == Recompute::kSelectiveLayer) kept.recompute = Recompute::kFull;
        return LayerKindActivationBytes(m, none, program.tokens_per_microbatch, kind) - LayerKindActivationBytes(m, kept, program.tokens_per_microbatch, kind);
      };
      // A hybrid model's layers differ, and a layer kept at 16 bits may keep more: the largest
      // the stage recomputes.
      double largest = 0;
      for (const Chunk& chunk : stage.chunks) {
        for (const auto& [kind, count, sixteen_bit] : chunk.layers) {
          if (IsTransformerLayer(kind) && (IsHybrid(m) || sixteen_bit)) largest = std::max(largest, rebuilt(kind, sixteen_bit));
        }
      }
      if (!IsHybrid(m)) largest = std::max(largest, rebuilt(TransformerLayerKind(m.moe.has_value(), false), false));
      layer_at_work += largest;
    }
    // K and V from the other context ranks, for one layer's attention at a time (forward or
    // backward): the all-gather's whole sequence, or the ring's next block.
    if (HoldsAttention(stage)) layer_at_work += ContextKvBytes(m, p, program.tokens_per_microbatch);
    b.activations += layer_at_work;
    // Buffers: what the loss keeps of the logits where the head is (LossBytesPerLogit), from a
    // micro-batch's F to its B: one micro-batch under 1F1B, all of them under GPipe; and what its
    // backward adds, once; gathered (FSDP / ZeRO-3) parameters of the current and the prefetched
    // layer.
    const double stage_logits = static_cast<double>(program.tokens_per_microbatch) * static_cast<double>(m.vocab_size) / t;
    const LogitBytes loss = LossBytesPerLogit(p);
    // Where the plan keeps sequence-parallel inputs gathered, the head's product keeps the final
    // norm's output whole: its tokens x D beyond the sequence shard, per micro-batch to its
    // backward (the shard itself, a small share of the logits, is not counted, kept or not).
    const double head_input = KeepsGatheredSequence(p) ? static_cast<double>(program.tokens_per_microbatch) * static_cast<double>(m.hidden_size) *
                                                             ActivationBytes(p.dtype) * (1 - 1 / t)
                                                       : 0;
    const double logits = stage_logits * loss.held + head_input;
    std::vector<double> head_logits(stage.chunks.size(), 0);
    bool has_head = false;
    for (size_t c = 0; c < stage.chunks.size(); ++c) {
      // Each multi-token-prediction module's loss keeps its own logits, where the module runs.
      const ChunkLayout& chunk = stage.chunks[c].layout;
      head_logits[c] = logits * static_cast<double>((chunk.head ? 1 : 0) + chunk.mtp);
      has_head = has_head || head_logits[c] > 0;
    }
    if (has_head) {
      b.buffers += PeakInFlight(program, static_cast<int64_t>(stage_index), head_logits, Phase::kBackwardInput, task_lists) + stage_logits * loss.backward;
      // Under a static buffer assignment (memory_allocator static) the micro-batch whose loss
      // backward runs frees its logits and the loss's temporaries before a layer's backward
      // makes its working set (what its recomputation rebuilds, the context ranks' K/V): the two
      // share memory, counted once. The peak is then the larger of the two phases, the other
      // micro-batches' logits in flight beside either. One loss's: with multi-token prediction
      // the main head's buffers are still alive while a module's layer runs its backward.
      if (MemoryAllocatorOf(p) == "static") {
        b.loss_shared = std::min(logits + stage_logits * loss.backward, layer_at_work);
        b.buffers -= b.loss_shared;
      }
    }
    b.pipeline = PipelineBufferBytes(program, static_cast<int64_t>(stage_index), stage_logits, task_lists);
    b.buffers += b.pipeline;
    // The cached FP8 weights: every product's weight on the stage, the dense layers', the experts'
    // and the multi-token-prediction modules' (the vocabulary matrices run at 16 bits; the norms'
    // and routers' few weights are counted with them).
    b.fp8_weight_cache = Fp8WeightCacheBytes(p, fp8_any_layout) * (stage.params() - stage.sixteen_bit_weights());
    b.buffers += b.fp8_weight_cache;
    if (!ParamShardAxes(p, ParamKind::kDense).empty()) {
      int64_t layers = 0;
      for (const Chunk& chunk : stage.chunks) {
        for (const auto& [kind, count, sixteen_bit] : chunk.layers) layers += count;
      }
      // Resharding after forward keeps the current and the prefetched layer gathered; keeping
      // the gathered parameters until the last backward (FSDP2's reshard_after_forward=False,
      // torchtitan's default under pipeline parallelism) holds the whole stage, and the stage's
      // unsharded gradients; over several micro-batches they accumulate at the reduction width
      // (FSDP2's FSDPParam.to_accumulated_grad_if_needed upcasts them to its reduce_dtype while
      // gradient sync is off, as pipeline schedules keep it until the last micro-batch).
      if (KeepsGatheredParams(p)) {
        const double unsharded_grads = program.microbatches > 1 ? GradReduceBytes(p) : ComputeElementBytes(p);
        // gathered weights (at the gather's width), unsharded gradients
        b.buffers += GatheredParamBytes(p, stage.params(), stage.sixteen_bit_weights()) + unsharded_grads * stage.params();
      } else if (layers > 0) {
        b.buffers += 2 * GatheredParamBytes(p, stage.params(), stage.sixteen_bit_weights()) / static_cast<double>(layers);
      }
    }
    report.stages.push_back(b);
  }
  for (size_t s = 0; s < report.stages.size(); ++s) {
    if (report.stages[s].total() > report.peak.total()) {
      report.peak = report.stages[s];
      report.peak_stage = static_cast<int64_t>(s);
    }
  }
  return report;
}

}  // namespace shardsim::strategies
