// One rank's LLaMA-style decoder trained on the GPU: embedding, L x (RMSNorm, Q/K/V, RoPE,
// blockwise attention, output projection, RMSNorm, SwiGLU MLP) with residuals, final norm, head,
// softmax cross-entropy, global-norm clipping and AdamW. The same model and formulas as the CPU
// runtime's single-rank reference (runtime/stage_model.h), on cuBLAS and cuda/kernels.h.
//
// Precision: kF32 keeps everything in fp32 with full-fp32 products (for comparison with the CPU
// kernels); kBf16 keeps activations and a weight copy in bf16 with fp32 accumulation, fp32 master
// weights, gradients and optimizer state (mixed precision as Megatron-LM and PyTorch AMP do it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "cuda/blas.h"
#include "cuda/gradient_sink.h"
#include "cuda/host_group.h"

namespace shardsim::cuda {

struct GpuTrainConfig {
  int micro_batch = 1;
  int seq_len = 0;
  DType dtype = DType::kBf16;
  uint64_t seed = 1;
  float lr = 3e-4f;
  float weight_decay = 0.1f;
  float clip_norm = 1.0f;
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  int attention_tile = 1024;
  bool fused_attention = true;  // the fused bf16 kernels where they apply (cuda/attention.h); false: the tiled products
  // Tensor parallelism (Megatron-LM's, without sequence parallelism), as the CPU runtime shards
  // (runtime/stage_model.h): heads and the MLP width split over the group, Q/K/V, gate and up by
  // columns, the output and down projections by rows (their partial sums reduced over the group),
  // the embedding table, head and loss split by vocabulary, norms replicated. Null: one rank
  // holds everything. Not owned; outlives the model.
  HostGroup* tensor_group = nullptr;
  // Pipeline parallelism: this stage's decoder layers [first_layer, first_layer + layers) (-1:
  // all), and whether it holds the embedding (first stage) and the final norm, head and loss
  // (last stage); the others take and give activations [tokens, hidden] (Forward, Backward).
  int64_t first_layer = 0, layers = -1;
  bool embedding = true, head = true;
  // Context parallelism: this rank's token positions in each sequence (`positions`, seq_len /
  // context of them) and every context rank's in group order (`key_positions`, seq_len: the
  // keys' order after the all-gather). Attention gathers the group's K and V over MPI through
  // host memory, runs this rank's queries against them masked by position, and reduce-scatters
  // dK and dV back (the same sums as ring attention). Null: one rank holds whole sequences.
  HostGroup* context_group = nullptr;
  std::vector<int32_t> positions, key_positions;
};

// One parameter tensor in the flat fp32 array, named as the CPU runtime names it
// (runtime/stage_model.h: "layer3.wq", "embedding", ...): this rank's block [rows, cols] of the
// global tensor, from global row row0 and column col0.
struct GpuParamTensor {
  std::string name;
  int64_t rows = 0, cols = 0, offset = 0;
  int64_t row0 = 0, col0 = 0;
  bool replicated = true;  // every tensor-parallel rank holds the same block (norms)
  float init_stddev = 0;  // 0: ones (norm weights)
  bool decay = true;      // AdamW weight decay applies (not to norms)
};

struct GpuStepStats {
  double loss = 0;       // mean cross-entropy over the step's tokens, nats
  double grad_norm = 0;  // global gradient norm before clipping
  // Wall time of the step's forward and backward (to the device's last kernel) and of its optimizer
  // (norm, clipping, AdamW, the bf16 weight copies), seconds (Step only).
  double forward_backward_s = 0;
  double optimizer_s = 0;
};

class GpuModel {
 public:
  // Throws InputError (field "--model") for models this path does not train (MoE, MLA, biases,
  // LayerNorm, GELU, learned positions) and CudaError when the device is short of memory.
  GpuModel(const ModelSpec& model, const GpuTrainConfig& config);
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  // One training step on tokens [micro_batch, seq_len + 1]: inputs are the first seq_len of each
  // row, targets the last seq_len. Synchronises.
  GpuStepStats Step(const std::vector<int32_t>& tokens);
  // The pieces of a step with gradient accumulation: forward and backward of one micro-batch
  // (ids, targets [micro_batch x seq_len]; the loss summed and divided by `normaliser`, the step's
  // token count), adding to the gradients; then clipping and AdamW at `lr`, which returns the
  // gradient norm before clipping and clears the gradients.
  double ForwardBackward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser);
  double Optimize(float lr);
  // The same on one pipeline stage: Forward takes the previous stage's output [tokens, hidden]
  // (`input`, empty on the stage with the embedding), returns the micro-batch's loss (0 on stages
  // without the head) and writes this stage's output to `output` (left empty on the last stage);
  // Backward takes the gradient of that output (`grad_output`, empty on the last stage) and writes
  // the gradient of `input` to `grad_input` (left empty on the first). Each micro-batch in flight
  // keeps its activations in a `slot` of its own (allocated at the slot's first use; a pipeline
  // schedule holds as many as it has micro-batches between their forward and backward), and
  // Backward(slot) must follow Forward(slot). With a `sink` (the step's last backward), each
  // layer's finished gradients are copied to pinned host memory on a stream of their own and
  // handed to the sink while the GPU goes on; Backward returns when every copy has been handed
  // over, and LoadStreamedGradients then takes what the sink left in that memory (the reduced
  // gradients) as this rank's gradients.
  double Forward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser, const std::vector<float>& input,
                 std::vector<float>* output, int slot = 0);
  void Backward(const std::vector<float>& grad_output, std::vector<float>* grad_input, GradientSink* sink = nullptr, int slot = 0);
  void LoadStreamedGradients();
  // The sum of this rank's squared gradients (tensor-replicated ones only with `replicated`, so
  // that a group counts them once), and the optimizer step clipping to the global norm
  // sqrt(`squares`) (the sum over the ranks that hold different parameters); returns that norm.
  double GradientSquares(bool replicated) const;
  double Optimize(float lr, double squares);
  // The tensors and their places; replace every parameter with `values` [Parameters()] (the
  // optimizer state is reset).
  const std::vector<GpuParamTensor>& Tensors() const;
  void LoadParameters(const std::vector<float>& values);
  // This rank's accumulated gradients [Parameters()] copied to the host, and back (host staging
  // for the data- and context-parallel reduction over MPI after the backward: Debian's OpenMPI is
  // not CUDA-aware).
  std::vector<float> Gradients() const;
  void SetGradients(const std::vector<float>& values);
  int64_t Parameters() const;
  // Whether the attention runs on the fused kernels (bf16 with a shape they take), else tiled.
  bool FusedAttention() const;

  class Impl;

 private:
  GpuTrainConfig config_;
  std::unique_ptr<Impl> impl_;
};

// Refuses (InputError naming "--model") what GpuModel cannot train.
void CheckGpuTrainable(const ModelSpec& model);

}  // namespace shardsim::cuda
