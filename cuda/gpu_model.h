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
  bool fused_attention = false;  // the fused bf16 kernels where they apply (cuda/attention.h)
};

// One parameter tensor in the flat fp32 array, named as the CPU runtime names it
// (runtime/stage_model.h: "layer3.wq", "embedding", ...), global shape [rows, cols].
struct GpuParamTensor {
  std::string name;
  int64_t rows = 0, cols = 0, offset = 0;
  float init_stddev = 0;  // 0: ones (norm weights)
  bool decay = true;      // AdamW weight decay applies (not to norms)
};

struct GpuStepStats {
  double loss = 0;       // mean cross-entropy over the step's tokens, nats
  double grad_norm = 0;  // global gradient norm before clipping
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
  // The tensors and their places; replace every parameter with `values` [Parameters()] (the
  // optimizer state is reset).
  const std::vector<GpuParamTensor>& Tensors() const;
  void LoadParameters(const std::vector<float>& values);
  // The accumulated gradients [Parameters()] copied to the host, and back (host staging for the
  // data-parallel reduction over MPI: Debian's OpenMPI is not CUDA-aware).
  std::vector<float> Gradients() const;
  void SetGradients(const std::vector<float>& values);
  int64_t Parameters() const;
  int64_t DeviceBytes() const;  // parameters, gradients, optimizer state, activations, workspace

  class Impl;

 private:
  GpuTrainConfig config_;
  std::unique_ptr<Impl> impl_;
};

// Refuses (InputError naming "--model") what GpuModel cannot train.
void CheckGpuTrainable(const ModelSpec& model);

}  // namespace shardsim::cuda
