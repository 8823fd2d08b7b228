// Device helpers the CUDA kernels share: fp32 arithmetic on any storage type (float or bf16) and
// warp- and block-wide reductions. Included by .cu files only.
#pragma once

#include <cuda_bf16.h>

namespace shardsim::cuda::device {

__device__ __forceinline__ float ToF(float x) { return x; }
__device__ __forceinline__ float ToF(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T FromF(float x);
template <>
__device__ __forceinline__ float FromF<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 FromF<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

// Every lane gets the warp's total / maximum.
__device__ __forceinline__ float WarpSum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float WarpMax(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Sum over the block's threads; every thread gets the total. `scratch` holds 32 floats.
__device__ __forceinline__ float BlockSum(float x, float* scratch) {
  x = WarpSum(x);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  float total = 0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

__device__ __forceinline__ float BlockMax(float x, float* scratch) {
  x = WarpMax(x);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  float m = -INFINITY;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

}  // namespace shardsim::cuda::device
