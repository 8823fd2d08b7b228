// Measuring the GPU this process runs on (`shardsim-gpu calibrate`): matrix-product throughput by
// shape, the blockwise attention's throughput, and HBM bandwidth, each timed with CUDA events
// after warm-up runs. What the cluster JSON's efficiencies are then set from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/device_info.h"

namespace shardsim::cuda {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  std::string what;  // "square", or the model's layer it stands for
};

struct GemmMeasure {
  GemmShape shape;
  std::string dtype;     // "bf16" (fp32 accumulation), "fp32" (no TF32) or "fp8" (E4M3, per-tensor scales, bf16 out)
  double flop_per_s = 0;
  double seconds = 0;    // one product
};

struct AttentionMeasure {
  int seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool fused = false;              // the fused kernels (cuda/flash_attention.h), else the tiled products
  double forward_flop_per_s = 0;   // causal FLOPs actually needed: 2 products x 2 x H x K x S^2 / 2
  double training_flop_per_s = 0;  // forward + backward, counted as 3x the forward's FLOPs
  double forward_s = 0, training_s = 0;
};

struct GpuCalibration {
  DeviceInfo device;
  std::vector<GemmMeasure> gemms;
  std::vector<AttentionMeasure> attention;
  double hbm_bytes_per_s = 0;  // device-to-device copy, bytes read + written
};

// Shapes a model's training step multiplies: tokens x hidden x (q, kv, o, mlp, head widths).
std::vector<GemmShape> ModelGemmShapes(int64_t tokens, int64_t hidden, int64_t q_width, int64_t kv_width, int64_t ffn,
                                       int64_t vocab);

// The BF16 products of `bf16_shapes`, the same in FP8 where the device has FP8 tensor cores (those
// of whole multiples of 16), one FP32 square, the attention kernels and HBM.
GpuCalibration MeasureGpu(const std::vector<GemmShape>& bf16_shapes, const std::vector<AttentionMeasure>& attention_shapes);

}  // namespace shardsim::cuda
