// Fused attention for bf16 on the tensor cores (FlashAttention-2, Dao 2023): one kernel reads Q, K,
// V tiles into shared memory, computes scores, an online softmax and the output without writing
// scores to device memory; the backward is two kernels, dK/dV per key tile and dQ per query tile,
// recomputing the probabilities from the saved lse. Each warp keeps its 16 rows' fragments, scores,
// probabilities and accumulators in registers (mma.m16n8k16 bf16 products with fp32 accumulation,
// operands from padded shared memory by ldmatrix, the next K/V or Q/dO tile copied in by cp.async
// while the current one is used: cuda/tensor_core.cuh). Shapes and semantics as cuda/attention.h (q, o [B, S, H, K]; k, v [B, S, G, K];
// lse [B, H, S]).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

namespace shardsim::cuda {

// Whether the fused kernels take this shape on the current device: head dim 64 or 128, a sequence
// a multiple of 64 (at most 64 x 65535), and the device's opt-in shared memory per block enough
// for the kernels (104 KB at head dim 128: Hopper and the A100, not sm_86/89); false without a GPU.
bool FlashAttentionSupports(int seq, int head_dim);

// REQUIRES (checked, CudaError otherwise): FlashAttentionSupports(seq, head_dim), heads a multiple
// of kv_heads, batch at most 65535. o, lse overwritten.
void FlashAttentionForward(__nv_bfloat16* o, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                           int batch, int seq, int heads, int kv_heads, int head_dim, bool causal, float scale);

// delta [B, H, S] = rowsum(dO o O) must be given; dq_acc [B, S, H, K], dk_acc and dv_acc
// [B, S, H, K] (one per query head: the caller sums each K/V head's group) are overwritten, fp32.
void FlashAttentionBackward(float* dq_acc, float* dk_acc, float* dv_acc, const __nv_bfloat16* q, const __nv_bfloat16* k,
                            const __nv_bfloat16* v, const __nv_bfloat16* d_o, const float* lse, const float* delta, int batch, int seq,
                            int heads, int kv_heads, int head_dim, bool causal, float scale);

}  // namespace shardsim::cuda
