// The part of a LLaMA-style decoder one rank holds under a plan, with its forward and backward
// for one micro-batch: the layers of its pipeline chunks, each linear sharded over the tensor
// axis as Megatron-LM does it (Shoeybi et al. 2019), and sequence parallelism (Korthikanti et
// al. 2022) as an option.
//
// Sharding, with t the tensor size (the notation of docs/domain.md):
//   Wq[D, (H K)_tensor], Wk/Wv[D, (G K)_tensor]  column parallel: heads split over tensor
//   Wo[(H K)_tensor, D]                           row parallel: partial sums
//   Wgate/Wup[D, F_tensor], Wdown[F_tensor, D]    column, then row parallel
//   norms[D], embedding[V, D], head[D, V]         replicated over tensor
// With a context axis, X[B, S_context, D]: each rank holds two zigzag chunks of every sequence and
// attention passes K/V around the context ring (ring_attention.h); every weight's gradient is then
// summed over context with the data-parallel reduction.
// Collectives per layer (forward / backward), without SP: all-reduce of the row-parallel outputs
// (attention and MLP) / all-reduce of the column-parallel input gradients. With SP, activations
// outside attention and MLP are X[T_tensor, D]: all-gather before the column-parallel linears and
// reduce-scatter after the row-parallel ones / the reverse in backward; the replicated weights then
// see a share of the tokens each, so their gradients are summed over tensor once per step.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "runtime/comm.h"
#include "runtime/memory_account.h"
#include "runtime/moe_layer.h"
#include "runtime/ring_attention.h"
#include "runtime/trace.h"
#include "strategies/step_program.h"

namespace shardsim::runtime {

// Hyper-parameters a ModelSpec does not carry, with LLaMA's values.
struct ArchitectureConfig {
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  float init_stddev = 0.02f;
  // MoE load-balancing loss coefficient: Switch Transformer's alpha = 10^-2 (Fedus et al. 2021,
  // section 2.2).
  float router_aux_coeff = 0.01f;
};

// One parameter tensor as this rank holds it: a block of the global [rows, cols] tensor.
struct ParamTensor {
  std::string name;  // "layer3.wq", "embedding", ...
  int64_t rows = 0, cols = 0;                  // global shape
  int64_t row0 = 0, row1 = 0, col0 = 0, col1 = 0;  // the block held
  bool tensor_replicated = false;  // every tensor rank holds the same block
  bool decay = true;               // AdamW weight decay applies (not to norms)
  int64_t offset = 0;              // into the flat parameter / gradient buffers
  float init_stddev = 0;           // normal(0, init_stddev) at start; 0: ones (norm weights)
  int bucket = 0;                  // the ParamBucket holding it
  bool zeros = false;              // starts at zero (biases), whatever init_stddev says
  // Replicated over tensor, but each tensor rank's backward sees a share of what it reads (its
  // tokens with sequence parallelism; its heads for MLA's down projections): the gradients are
  // summed over tensor once per step (data_parallel.h).
  bool tensor_partial = false;
  int64_t size() const { return (row1 - row0) * (col1 - col0); }
};

// Parameters that are gathered, reduced and bucketed together (data_parallel.h): one layer's
// (of one kind), the embedding's, the final norm's with the head's. Contiguous in the flat
// buffers, in the order of the model.
struct ParamBucket {
  std::string name;  // "layer3", "embedding", "head"
  int64_t offset = 0, count = 0;
  bool expert = false;  // routed experts' weights (sharded over expert, not replicated on it)
  std::string layer;    // its layer in op keys: the decoder layer's index, E or L (strategies/op_keys.h)
  int64_t chunk = 0;    // the stage's chunk that reads it
  bool read_by_other_chunk = false;  // also read in another chunk's pass (a tied embedding, by the head)
  // A copy of the same parameters held by pipeline stage `copy_stage` (stage_copies.h; -1:
  // none), named `copy_of` on both stages; `copy_counted`: this stage's copy is the one global
  // sums count.
  int64_t copy_stage = -1;
  std::string copy_of;
  bool copy_counted = true;
};

// Throws InputError when the runtime cannot run `model` or `plan` (runtime_supports.cc; the
// README's run section lists each refusal with its reason). `context_kv`: the context-parallel
// K/V exchange the device runs ("ring" on the CPU, "all-gather" on the GPU path).
void CheckRuntimeSupports(const ModelSpec& model, const PlanSpec& plan, const std::string& context_kv = "ring");

class StageModel {
 public:
  // The chunks the program's stage at this rank's pipeline coordinate holds (its layout), for
  // this rank's tensor coordinate. Parameters initialised from `seed` (init.h), the same values
  // whatever the plan. `program` must outlive this.
  StageModel(const strategies::StepProgram& program, MeshComms& comms, const ArchitectureConfig& config, uint64_t seed);
  ~StageModel();

  // Where chunk `chunk` of this stage sits and what it holds.
  const strategies::ChunkLayout& chunk(int64_t chunk) const { return program_.layout.Chunk(stage_, chunk); }
  int64_t tokens() const { return tokens_; }         // tokens of a micro-batch on this rank (B S / context)
  // This context rank's positions within a sequence (all of them without context parallelism).
  const std::vector<int32_t>& sequence_positions() const { return seq_positions_; }
  int64_t local_tokens() const { return local_tokens_; }  // held between layers (T / t with SP)
  int64_t hidden() const { return hidden_; }

  // Forward of chunk `chunk` on micro-batch `mb`: `in` is the previous part's output
  // [local_tokens, D] (ignored for part 0, which embeds `ids`); writes the output to `out`
  // [local_tokens, D] unless this is the last part, which returns its share of the loss (summed
  // token losses / `loss_normaliser`) and keeps the logits' gradient for backward. `ids` and
  // `targets` are the micro-batch's [tokens] inputs and next tokens.
  double Forward(int64_t chunk, int64_t mb, const float* in, float* out, const int32_t* ids, const int32_t* targets, double loss_normaliser);
  // Backward of the same: `dout` [local_tokens, D] (ignored by the last part); writes the input
  // gradient to `din` (not for part 0); gradients accumulate into grads(). Frees the saved
  // activations.
  // `done(bucket)`, when given, is called as each bucket's gradients are complete for this
  // micro-batch. With `defer_weights` (zero-bubble schedules' B task) the weight gradients of the
  // program's W ops (the layers' and experts' matmuls, the output head's) are left for
  // BackwardWeight, which reports those buckets; norms and the embedding compute theirs here (the
  // program has them in B), and so does a tied head, whose gradient is the embedding's.
  void Backward(int64_t chunk, int64_t mb, const float* dout, float* din, const std::function<void(int)>& done = nullptr,
                bool defer_weights = false);
  // The W task: the weight gradients Backward deferred for this chunk and micro-batch.
  void BackwardWeight(int64_t chunk, int64_t mb, const std::function<void(int)>& done = nullptr);

  // The MoE block's routing log (moe_layer.h), null in a dense model.
  MoeLayer* moe() { return moe_.get(); }
  std::vector<float>& params() { return params_; }
  std::vector<float>& grads() { return grads_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const std::vector<ParamBucket>& buckets() const { return buckets_; }
  // Called before a bucket's parameters are read, with the bucket the same pass reads next (-1:
  // none), the micro-batch and whether it is a backward: where sharded parameters are gathered
  // and the next gather prefetched.
  void set_param_use(std::function<void(int bucket, int next, int64_t mb, bool backward)> use) { param_use_ = std::move(use); }
  // The micro-batch of the task running now, and whether it is a backward.
  int64_t current_microbatch() const { return current_mb_; }
  // Whether some tensor-replicated weights' gradients are partial over tensor and must be summed
  // over it (sequence parallelism's token shares; MLA's down projections: ParamTensor::tensor_partial).
  bool replicated_grads_partial() const { return tensor_partial_; }
  // Spans of every op, keyed stage/layer/op/microbatch with the step program's op names.
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  Tracer* tracer() const { return tracer_; }
  int64_t stage() const { return stage_; }
  const strategies::StepProgram& program() const { return program_; }
  // Counts this stage's parameters, gradients, saved activations and workspaces into `account`
  // (memory_account.h) from now on; `account` must outlive this.
  void set_memory_account(MemoryAccount* account);
  // Counts the parameter and gradient bytes resident now (resident_pages.h): sharded parts that
  // data parallelism gave back are not held.
  void CountStates();

 private:
  struct Saved;  // activations of one chunk and micro-batch
  struct LayerSaved;
  struct LayerIds;  // a decoder layer's tensors
  struct Deferred;
  // One weight gradient dW += x^T dy of a linear [in, out] over t rows.
  struct WeightGrad {
    int weight;
    const float* x;
    const float* dy;
    int t, in, out;
  };
  // The weight gradients of program op `op` (a matmul): now, under its W op's span, or left for
  // the W task when this backward defers them.
  void WeightGrads(std::optional<TraceSpan>& span, const strategies::LayerProgram& layer, const std::string& label, std::string_view op,
                   std::initializer_list<WeightGrad> grads, LayerSaved& s);
  bool defer_weights_ = false;
  bool backward_ = false;  // inside a backward (B or W) task
  void NewBucket(const std::string& name, const std::string& layer, bool expert);
  // Sets the buckets' copy fields (ParamBucket::copy_stage) and read_by_other_chunk.
  void MarkCopies();
  void Use(const std::vector<int>& order, size_t i);
  // The layer program a decoder layer runs.
  const strategies::LayerProgram& LayerProgramOf(int64_t layer) const;
  // The program op `name` of `layer`, or null.
  static const strategies::Op* FindOp(const strategies::LayerProgram& layer, std::string_view name);
  std::string Key(const std::string& label, std::string_view op) const;
  // Opens `span` on program op `name` of `layer` labelled `label`, in the category of the op's
  // stream. Aborts with the key when the program has no such op: the runtime runs the program.
  void Begin(std::optional<TraceSpan>& span, const strategies::LayerProgram& layer, const std::string& label, std::string_view name);
  // The tensor-parallel op `name`: the program's collective over its axes from `in` to `out`
  // (all-gather [Tl, D] -> [T, D], reduce-scatter [T, D] -> [Tl, D], all-reduce [T, D]), or a copy
  // when the program has no such op (tensor 1, or the identity half of Megatron's f/g pair).
  void Tensor(std::optional<TraceSpan>& span, const strategies::LayerProgram& layer, const std::string& label, std::string_view name, float* out,
              float* in);
  // Sequence parallelism (Megatron-LM's sequence-parallel linears): after the forward's products,
  // keep only this rank's shard `local` of the region's gathered input `full`; the backward
  // gathers it again into `full` (the program's ops::Regather of `enter`) before the products'
  // gradients. Without sequence parallelism, or where the plan keeps the gathered inputs
  // (KeepsGatheredSequence: the program has no regather), both leave `full` as the forward made it.
  void KeepShard(std::vector<float>& full, std::vector<float>& shard, const std::vector<float>& local) const;
  void Regather(std::optional<TraceSpan>& span, const strategies::LayerProgram& layer, const std::string& label, std::string_view enter,
                std::vector<float>& full, std::vector<float>& shard);
  int Add(const std::string& name, int64_t rows, int64_t cols, int64_t row0, int64_t row1, int64_t col0, int64_t col1, bool replicated,
          bool decay, float stddev);
  // A bias [1, cols] (columns [col0, col1) held), starting at zero, without weight decay.
  int AddBias(const std::string& name, int64_t cols, int64_t col0, int64_t col1, bool replicated);
  // MLA's tensors of the layer named `prefix` into `ids` (mla_attention.cc).
  void AddMla(const std::string& prefix, LayerIds& ids, float init_stddev);
  // Events for ring attention's transfer ops `names`, which ran inside the attention op begun at
  // `start_s` and left it waiting `wait_s`.
  void RingTransfers(const strategies::LayerProgram& layer, const std::string& label, std::initializer_list<std::string_view> names, double start_s,
                     double wait_s);
  // `recompute`: the recomputation before backward (ops under their R names, kept saved).
  void LayerForward(int64_t layer, float* x, LayerSaved& s, bool recompute = false);
  // The attention kernel (ring attention over context) from the saved q, k, v into o and lse.
  void AttentionCore(std::optional<TraceSpan>& span, const strategies::LayerProgram& layer, const std::string& label, LayerSaved& s, bool recompute);
  void LayerBackward(int64_t layer, float* dx, LayerSaved& s);
  // MLA's projections (mla_attention.cc): from the saved h_full to the attention kernel's q, k,
  // v (padded to attn_dim_ per head), and back from their gradients into dh_full.
  void MlaForward(const LayerIds& id, const strategies::LayerProgram& layer, const std::string& label, LayerSaved& s, bool recompute);
  void MlaBackward(const LayerIds& id, const strategies::LayerProgram& layer, const std::string& label, LayerSaved& s, const float* dq,
                   const float* dk, const float* dv, float* dh_full);
  float* P(int id) { return params_.data() + tensors_[static_cast<size_t>(id)].offset; }
  float* G(int id) { return grads_.data() + tensors_[static_cast<size_t>(id)].offset; }

  ModelSpec model_;
  PlanSpec plan_;
  MeshComms& comms_;
  ArchitectureConfig config_;
  const strategies::StepProgram& program_;
  int64_t stage_ = 0, tensor_rank_ = 0, t_ = 1;
  int64_t tokens_ = 0, local_tokens_ = 0, hidden_ = 0, heads_ = 0, kv_heads_ = 0, ffn_ = 0;
  int64_t vocab0_ = 0, vocab_local_ = 0;  // this tensor rank's vocabulary rows / logit columns
  bool sp_ = false;
  bool keeps_gathered_ = false;  // sequence_parallel_inputs keep-gathered: no KeepShard / Regather
  bool tensor_partial_ = false;  // some tensor's gradients are partial over tensor
  // The attention kernel's per-head width (MLA pads q, k and v to the widest of its query/key
  // and value widths), K/V heads, scale, and the per-head width of its output.
  int64_t attn_dim_ = 0, attn_kv_heads_ = 0, out_dim_ = 0;
  float attn_scale_ = 1;
  int64_t c_ = 1;                      // context ranks
  std::vector<int32_t> seq_positions_;  // this context rank's positions within a sequence
  std::vector<ParamTensor> tensors_;
  std::vector<ParamBucket> buckets_;
  std::vector<std::vector<int>> chunk_buckets_;  // per chunk, its buckets in forward order
  std::function<void(int, int, int64_t, bool)> param_use_;
  std::vector<float> params_, grads_;
  // Tensor ids per layer (by global layer index) and the embedding/head.
  struct LayerIds {
    int attn_norm = -1, wq = -1, wk = -1, wv = -1, wo = -1, mlp_norm = -1, wgate = -1, wup = -1, wdown = -1;
    // LayerNorm's biases; the linears' biases (GPT: every linear; Qwen2: q, k, v only); -1: none.
    int attn_norm_b = -1, mlp_norm_b = -1, bq = -1, bk = -1, bv = -1, bo = -1, bup = -1, bdown = -1;
    // MLA (mla_attention.cc): down projections and latent norms (replicated), up projections
    // (split by heads); wq is its query projection when queries are not compressed.
    int q_down = -1, q_norm = -1, q_up = -1, kv_down = -1, kv_norm = -1, kv_up = -1;
    bool moe = false;  // an MoE block instead of the MLP: router, shared experts, local experts
    int router = -1, shared_gate = -1, shared_up = -1, shared_down = -1;
    std::vector<int> expert_gate, expert_up, expert_down;
  };
  MoeWeights MoePointers(const LayerIds& id, bool gradients);
  std::map<int64_t, LayerIds> layer_ids_;
  std::map<int64_t, std::vector<int>> layer_buckets_;  // a layer's buckets (dense, then experts)
  std::unique_ptr<MoeLayer> moe_;
  RingAttentionWorkspace ring_workspace_;  // ring attention's buffers, kept between layers and steps
  MemoryAccount* account_ = nullptr;
  MemoryHold params_hold_, grads_hold_, ring_hold_;
  double aux_loss_ = 0, aux_weight_ = 0;  // this forward's balancing loss; the micro-batch's share
  int embedding_ = -1, final_norm_ = -1, head_ = -1;
  int final_norm_b_ = -1;                  // the final LayerNorm's bias
  int pos_table_ = -1, pos_bucket_ = -1;   // learned positions [max_seq_len, D], in a bucket of their own
  int embedding_bucket_ = -1, head_bucket_ = -1;
  // The copy of a tied embedding on a stage that holds the head but not the embedding (read by
  // the head, its gradients summed with the embedding stage's: stage_copies.h); -1: none.
  int tied_copy_bucket_ = -1;
  std::vector<int32_t> positions_;  // of the micro-batch's tokens
  Tracer* tracer_ = nullptr;
  int64_t current_mb_ = 0;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Saved>> saved_;
};

}  // namespace shardsim::runtime
