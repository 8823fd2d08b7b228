// FP8 matrix products on cuBLASLt (E4M3 inputs, BF16 output, FP32 accumulation; per-tensor scales
// at 1, which cost nothing: the epilogue multiplies by them), as per-tensor FP8 recipes (Transformer Engine's delayed and current scaling,
// torchao's tensorwise) run their GEMMs: timed by `shardsim-gpu calibrate` beside the BF16 ones.
// Needs compute capability 8.9 or later (Ada, Hopper, Blackwell).
#pragma once

#include <cstdint>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "cuda/device_buffer.h"

namespace shardsim::cuda {

// Whether the device at hand runs FP8 tensor-core products (compute capability >= 8.9).
bool HasFp8TensorCores();

// The value element `i` of an operand filled with `seed` holds before its E4M3 rounding: a hash
// of the index in [-2, 2) (tensor cores draw less power on zeros).
__host__ __device__ inline float Fp8FillValue(int64_t i, uint32_t seed) {
  uint32_t h = (static_cast<uint32_t>(i) * 2654435761u) ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return static_cast<float>(h & 0xffff) / 16384.0f - 2.0f;
}

// One [m,k] x [k,n] product (x W^T, W stored [n,k]) of random E4M3 inputs, set up once (buffers, cuBLASLt's descriptors
// and its heuristic's algorithm) and run as often as asked.
class Fp8Product {
 public:
  // REQUIRES: HasFp8TensorCores(). Throws CudaError where m, n or k is not a multiple of 16
  // (cuBLASLt's FP8 rule) or cuBLASLt offers no algorithm.
  Fp8Product(int64_t m, int64_t n, int64_t k);
  ~Fp8Product();
  Fp8Product(const Fp8Product&) = delete;
  Fp8Product& operator=(const Fp8Product&) = delete;
  void Run();
  // The row-major [m,n] output of the last Run, x W^T, as floats. The inputs are Fp8FillValue's,
  // row-major: seed 11 the [m,k] x, seed 12 the [n,k] W (FP8's "TN" rule: a linear layer's
  // weight as it is stored).
  std::vector<float> Output() const;

 private:
  cublasStatus_t Launch();
  void Release();  // the cuBLASLt objects made so far
  int64_t m_, n_, k_;
  DeviceBuffer<__nv_fp8_e4m3> a_, b_;
  DeviceBuffer<__nv_bfloat16> c_, d_;  // C (zeros, beta 0) and the output D
  DeviceBuffer<unsigned char> workspace_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

}  // namespace shardsim::cuda
