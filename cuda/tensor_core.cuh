// Warp-level tensor-core primitives (PTX for sm_80 and later: H100, H200), for kernels that keep
// their fragments in registers: asynchronous 16-byte copies into shared memory, ldmatrix loads of
// 8x8 bf16 matrices, and the bf16 mma.m16n8k16 with fp32 accumulation. Included by .cu files only.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// g = lane / 4 and t = lane % 4:
//   A (16x16, row-major), 4 registers of two bf16: a0 (row g, cols 2t, 2t+1), a1 (row g+8, same
//   cols), a2 (row g, cols 2t+8, 2t+9), a3 (row g+8, cols 2t+8, 2t+9);
//   B (16x8), 2 registers: b0 (rows 2t, 2t+1, col g), b1 (rows 2t+8, 2t+9, col g);
//   C (16x8, fp32), 4 floats: c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8, same cols).
// So the accumulators of two neighbouring 16x8 products are, packed to bf16, the A fragment of
// their 16x16 block: what FlashAttention-2 relies on to keep probabilities in registers.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "cuda/tensor_core.cuh needs sm_80 or later (bf16 mma, cp.async): set SHARDSIM_CUDA_ARCHITECTURES to 80 or above (90: H100, H200)"
#endif

namespace shardsim::cuda::device {

__device__ __forceinline__ uint32_t SharedAddress(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// 16 bytes from global to shared memory without passing through registers (cp.async, L2 only).
__device__ __forceinline__ void CopyAsync16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress(shared)), "l"(global));
}
__device__ __forceinline__ void CopyAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Four 8x8 bf16 matrices: lanes 8i..8i+7 give the row addresses of matrix i, which lands in r[i]
// (each lane holding row lane/4, columns 2(lane%4) and +1; transposed with LoadMatrixT).
__device__ __forceinline__ void LoadMatrix(uint32_t (&r)[4], const __nv_bfloat16* shared) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(shared)));
}
__device__ __forceinline__ void LoadMatrixT(uint32_t (&r)[4], const __nv_bfloat16* shared) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(shared)));
}

// c += a b (16x16 by 16x8, bf16 in, fp32 accumulate).
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as two bf16 in one register, the first in the low half (the lower column).
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The A fragment of columns [16kk, 16kk+16) from the accumulators of the 16x8 products 2kk, 2kk+1.
__device__ __forceinline__ void AccumulatorsAsA(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = PackBf16(lo[0], lo[1]);
  a[1] = PackBf16(lo[2], lo[3]);
  a[2] = PackBf16(hi[0], hi[1]);
  a[3] = PackBf16(hi[2], hi[3]);
}

// Maximum / sum over the four lanes that hold one row of an accumulator (lanes 4g..4g+3).
__device__ __forceinline__ float QuadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float QuadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace shardsim::cuda::device
