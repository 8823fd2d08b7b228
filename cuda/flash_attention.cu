#include "cuda/flash_attention.h"

#include <mma.h>

#include <cmath>

#include "cuda/cuda_check.h"
#include "cuda/device_math.cuh"

namespace shardsim::cuda {
namespace {

using device::WarpMax;
using device::WarpSum;

using namespace nvcuda;  // NOLINT: wmma's names
using bf16 = __nv_bfloat16;

constexpr int kTile = 64;    // queries and keys per tile
constexpr int kWarps = 4;    // each owns 16 rows of a tile
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16;    // rows per warp
constexpr int kVec = 8;      // bf16 per 16-byte load

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;  // reads a row-major tile as its transpose
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;


// dst [64][D] = rows [row0, row0 + 64) of head n of a [S, N, D] tensor (one batch row), 16-byte loads.
template <int D>
__device__ void LoadTile(bf16* dst, const bf16* src, int row0, int n_heads, int n) {
  for (int i = threadIdx.x; i < kTile * D / kVec; i += kThreads) {
    const int r = i / (D / kVec), c = (i % (D / kVec)) * kVec;
    *reinterpret_cast<uint4*>(dst + r * D + c) =
        *reinterpret_cast<const uint4*>(src + (static_cast<int64_t>(row0 + r) * n_heads + n) * D + c);
  }
}

// out [16][64] (fp32, ld 64) = A_w [16][D] (rows of a [64][D] tile) times B [64][D]^T.
template <int D>
__device__ void RowsTimesTransposed(float* out, const bf16* a_rows, const bf16* b_tile) {
#pragma unroll
  for (int j = 0; j < kTile / 16; ++j) {
    FragC s;
    wmma::fill_fragment(s, 0.0f);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      FragA a;
      FragBT bt;
      wmma::load_matrix_sync(a, a_rows + kk * 16, D);
      wmma::load_matrix_sync(bt, b_tile + j * 16 * D + kk * 16, D);
      wmma::mma_sync(s, a, bt, s);
    }
    wmma::store_matrix_sync(out + j * 16, s, kTile, wmma::mem_row_major);
  }
}

// acc[n] += P [16][64] (bf16, ld 64) times tile [64][D].
template <int D>
__device__ void AccumulateTimesTile(FragC (&acc)[D / 16], const bf16* p, const bf16* tile) {
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      FragA a;
      FragB b;
      wmma::load_matrix_sync(a, p + kk * 16, kTile);
      wmma::load_matrix_sync(b, tile + kk * 16 * D + n * 16, D);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
  }
}

template <int D>
constexpr int ForwardSmem() {
  return 3 * kTile * D * 2 + kWarps * kRows * kTile * (4 + 2) + kWarps * kRows * D * 4;
}

template <int D>
__global__ void __launch_bounds__(kThreads) ForwardKernel(bf16* o, float* lse, const bf16* q, const bf16* k, const bf16* v, int seq,
                                                          int heads, int kv_heads, bool causal, float scale) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sK = sQ + kTile * D;
  bf16* sV = sK + kTile * D;
  float* sS = reinterpret_cast<float*>(sV + kTile * D);
  bf16* sP = reinterpret_cast<bf16*>(sS + kWarps * kRows * kTile);
  float* sO = reinterpret_cast<float*>(sP + kWarps * kRows * kTile);
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (heads / kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bf16* qb = q + static_cast<int64_t>(b) * seq * heads * D;
  const bf16* kb = k + static_cast<int64_t>(b) * seq * kv_heads * D;
  const bf16* vb = v + static_cast<int64_t>(b) * seq * kv_heads * D;
  float* S = sS + warp * kRows * kTile;
  bf16* P = sP + warp * kRows * kTile;
  float* O = sO + warp * kRows * D;
  LoadTile<D>(sQ, qb, qt * kTile, heads, h);
  FragC acc[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
  const int q0 = qt * kTile + warp * kRows;  // this warp's first query
  // Per row of the warp, every lane holds the running maximum and sum (the warp reduces each row
  // over its 64 columns, two per lane: column-major over lanes, so shared memory sees no conflicts).
  float m[kRows], l[kRows], alpha[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0;
  }
  const int last = causal ? qt : seq / kTile - 1;
  for (int kt = 0; kt <= last; ++kt) {
    __syncthreads();
    LoadTile<D>(sK, kb, kt * kTile, kv_heads, g);
    LoadTile<D>(sV, vb, kt * kTile, kv_heads, g);
    __syncthreads();
    RowsTimesTransposed<D>(S, sQ + warp * kRows * D, sK);
    __syncwarp();
    // Online softmax over this tile's keys. Key 0 is in the first tile, so the running maximum is
    // finite from then on.
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int k0 = kt * kTile + lane, qpos = q0 + r;
      const float x0 = causal && k0 > qpos ? -INFINITY : S[r * kTile + lane] * scale;
      const float x1 = causal && k0 + 32 > qpos ? -INFINITY : S[r * kTile + lane + 32] * scale;
      const float m_new = fmaxf(m[r], WarpMax(fmaxf(x0, x1)));
      const bf16 p0 = __float2bfloat16(expf(x0 - m_new)), p1 = __float2bfloat16(expf(x1 - m_new));
      P[r * kTile + lane] = p0;
      P[r * kTile + lane + 32] = p1;
      alpha[r] = expf(m[r] - m_new);
      l[r] = l[r] * alpha[r] + WarpSum(__bfloat162float(p0) + __bfloat162float(p1));
      m[r] = m_new;
    }
    if (kt > 0) {  // the output so far, rescaled row by row (fragment layouts are opaque: via shared memory)
#pragma unroll
      for (int n = 0; n < D / 16; ++n) wmma::store_matrix_sync(O + n * 16, acc[n], D, wmma::mem_row_major);
      __syncwarp();
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        for (int c = lane; c < D; c += 32) O[r * D + c] *= alpha[r];
      }
      __syncwarp();
#pragma unroll
      for (int n = 0; n < D / 16; ++n) wmma::load_matrix_sync(acc[n], O + n * 16, D, wmma::mem_row_major);
    }
    __syncwarp();
    AccumulateTimesTile<D>(acc, P, sV);
  }
#pragma unroll
  for (int n = 0; n < D / 16; ++n) wmma::store_matrix_sync(O + n * 16, acc[n], D, wmma::mem_row_major);
  __syncwarp();
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float inv = 1.0f / l[r];
    bf16* out = o + ((static_cast<int64_t>(b) * seq + q0 + r) * heads + h) * D;
    for (int c = lane; c < D; c += 32) out[c] = __float2bfloat16(O[r * D + c] * inv);
    if (lane == 0) lse[(static_cast<int64_t>(b) * heads + h) * seq + q0 + r] = m[r] + logf(l[r]);
  }
}

template <int D>
constexpr int BackwardKvSmem() {
  return 4 * kTile * D * 2 + kWarps * kRows * kTile * (4 + 4 + 2) + 2 * kTile * 4;
}

// dK and dV of one key tile (warp w: keys 16w..16w+15), over every query tile that sees it.
template <int D>
__global__ void __launch_bounds__(kThreads) BackwardKvKernel(float* dk_acc, float* dv_acc, const bf16* q, const bf16* k, const bf16* v,
                                                             const bf16* d_o, const float* lse, const float* delta, int seq, int heads,
                                                             int kv_heads, bool causal, float scale) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sK = reinterpret_cast<bf16*>(smem);
  bf16* sV = sK + kTile * D;
  bf16* sQ = sV + kTile * D;
  bf16* sdO = sQ + kTile * D;
  float* sS = reinterpret_cast<float*>(sdO + kTile * D);
  float* sDP = sS + kWarps * kRows * kTile;
  bf16* sP = reinterpret_cast<bf16*>(sDP + kWarps * kRows * kTile);
  float* sLse = reinterpret_cast<float*>(sP + kWarps * kRows * kTile);
  float* sDelta = sLse + kTile;
  const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (heads / kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t qrow = static_cast<int64_t>(b) * seq * heads * D, kvrow = static_cast<int64_t>(b) * seq * kv_heads * D;
  const float* lse_bh = lse + (static_cast<int64_t>(b) * heads + h) * seq;
  const float* delta_bh = delta + (static_cast<int64_t>(b) * heads + h) * seq;
  float* S = sS + warp * kRows * kTile;
  float* DP = sDP + warp * kRows * kTile;
  bf16* P = sP + warp * kRows * kTile;
  LoadTile<D>(sK, k + kvrow, kt * kTile, kv_heads, g);
  LoadTile<D>(sV, v + kvrow, kt * kTile, kv_heads, g);
  FragC dk[D / 16], dv[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    wmma::fill_fragment(dk[n], 0.0f);
    wmma::fill_fragment(dv[n], 0.0f);
  }
  const int k0 = kt * kTile + warp * kRows;  // this warp's first key
  for (int qt = causal ? kt : 0; qt < seq / kTile; ++qt) {
    __syncthreads();
    LoadTile<D>(sQ, q + qrow, qt * kTile, heads, h);
    LoadTile<D>(sdO, d_o + qrow, qt * kTile, heads, h);
    for (int i = threadIdx.x; i < kTile; i += kThreads) {
      sLse[i] = lse_bh[qt * kTile + i];
      sDelta[i] = delta_bh[qt * kTile + i];
    }
    __syncthreads();
    RowsTimesTransposed<D>(S, sK + warp * kRows * D, sQ);    // S^T: keys x queries
    RowsTimesTransposed<D>(DP, sV + warp * kRows * D, sdO);  // dP^T = V dO^T
    __syncwarp();
#pragma unroll 4
    for (int r = 0; r < kRows; ++r) {
      for (int c = lane; c < kTile; c += 32) {
        const float p = causal && k0 + r > qt * kTile + c ? 0.0f : expf(S[r * kTile + c] * scale - sLse[c]);
        S[r * kTile + c] = p;
        P[r * kTile + c] = __float2bfloat16(p);
      }
    }
    __syncwarp();
    AccumulateTimesTile<D>(dv, P, sdO);  // dV += P^T dO
    __syncwarp();
#pragma unroll 4
    for (int r = 0; r < kRows; ++r) {
      for (int c = lane; c < kTile; c += 32) {
        P[r * kTile + c] = __float2bfloat16(S[r * kTile + c] * (DP[r * kTile + c] - sDelta[c]));  // dS^T
      }
    }
    __syncwarp();
    AccumulateTimesTile<D>(dk, P, sQ);  // dK += dS^T Q (scale below)
  }
  const int64_t out = ((static_cast<int64_t>(b) * seq + kt * kTile + warp * kRows) * heads + h) * D;
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    for (int i = 0; i < dk[n].num_elements; ++i) dk[n].x[i] *= scale;
    wmma::store_matrix_sync(dk_acc + out + n * 16, dk[n], heads * D, wmma::mem_row_major);
    wmma::store_matrix_sync(dv_acc + out + n * 16, dv[n], heads * D, wmma::mem_row_major);
  }
}

template <int D>
constexpr int BackwardQSmem() {
  return 4 * kTile * D * 2 + kWarps * kRows * kTile * (4 + 4 + 2);
}

// dQ of one query tile (warp w: queries 16w..16w+15), over every key tile it sees.
template <int D>
__global__ void __launch_bounds__(kThreads) BackwardQKernel(float* dq_acc, const bf16* q, const bf16* k, const bf16* v, const bf16* d_o,
                                                            const float* lse, const float* delta, int seq, int heads, int kv_heads,
                                                            bool causal, float scale) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sdO = sQ + kTile * D;
  bf16* sK = sdO + kTile * D;
  bf16* sV = sK + kTile * D;
  float* sS = reinterpret_cast<float*>(sV + kTile * D);
  float* sDP = sS + kWarps * kRows * kTile;
  bf16* sP = reinterpret_cast<bf16*>(sDP + kWarps * kRows * kTile);
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (heads / kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t qrow = static_cast<int64_t>(b) * seq * heads * D, kvrow = static_cast<int64_t>(b) * seq * kv_heads * D;
  float* S = sS + warp * kRows * kTile;
  float* DP = sDP + warp * kRows * kTile;
  bf16* P = sP + warp * kRows * kTile;
  LoadTile<D>(sQ, q + qrow, qt * kTile, heads, h);
  LoadTile<D>(sdO, d_o + qrow, qt * kTile, heads, h);
  const int q0 = qt * kTile + warp * kRows;  // this warp's first query
  float row_lse[kRows], row_delta[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    row_lse[r] = lse[(static_cast<int64_t>(b) * heads + h) * seq + q0 + r];
    row_delta[r] = delta[(static_cast<int64_t>(b) * heads + h) * seq + q0 + r];
  }
  FragC dq[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(dq[n], 0.0f);
  const int last = causal ? qt : seq / kTile - 1;
  for (int kt = 0; kt <= last; ++kt) {
    __syncthreads();
    LoadTile<D>(sK, k + kvrow, kt * kTile, kv_heads, g);
    LoadTile<D>(sV, v + kvrow, kt * kTile, kv_heads, g);
    __syncthreads();
    RowsTimesTransposed<D>(S, sQ + warp * kRows * D, sK);    // S = Q K^T
    RowsTimesTransposed<D>(DP, sdO + warp * kRows * D, sV);  // dP = dO V^T
    __syncwarp();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      for (int c = lane; c < kTile; c += 32) {
        const float p = causal && kt * kTile + c > q0 + r ? 0.0f : expf(S[r * kTile + c] * scale - row_lse[r]);
        P[r * kTile + c] = __float2bfloat16(p * (DP[r * kTile + c] - row_delta[r]));  // dS
      }
    }
    __syncwarp();
    AccumulateTimesTile<D>(dq, P, sK);  // dQ += dS K (scale below)
  }
  const int64_t out = ((static_cast<int64_t>(b) * seq + qt * kTile + warp * kRows) * heads + h) * D;
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    for (int i = 0; i < dq[n].num_elements; ++i) dq[n].x[i] *= scale;
    wmma::store_matrix_sync(dq_acc + out + n * 16, dq[n], heads * D, wmma::mem_row_major);
  }
}

template <typename Kernel>
void AllowSmem(Kernel kernel, int bytes) {
  Check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), "cudaFuncSetAttribute");
}

template <int D>
void Forward(bf16* o, float* lse, const bf16* q, const bf16* k, const bf16* v, int batch, int seq, int heads, int kv_heads, bool causal,
             float scale) {
  constexpr int smem = ForwardSmem<D>();
  AllowSmem(ForwardKernel<D>, smem);
  ForwardKernel<D><<<dim3(seq / kTile, heads, batch), kThreads, smem>>>(o, lse, q, k, v, seq, heads, kv_heads, causal, scale);
  CheckLaunch("FlashAttentionForward");
}

template <int D>
void Backward(float* dq, float* dk, float* dv, const bf16* q, const bf16* k, const bf16* v, const bf16* d_o, const float* lse,
              const float* delta, int batch, int seq, int heads, int kv_heads, bool causal, float scale) {
  constexpr int kv_smem = BackwardKvSmem<D>(), q_smem = BackwardQSmem<D>();
  AllowSmem(BackwardKvKernel<D>, kv_smem);
  AllowSmem(BackwardQKernel<D>, q_smem);
  const dim3 grid(seq / kTile, heads, batch);
  BackwardKvKernel<D><<<grid, kThreads, kv_smem>>>(dk, dv, q, k, v, d_o, lse, delta, seq, heads, kv_heads, causal, scale);
  CheckLaunch("FlashAttentionBackwardKv");
  BackwardQKernel<D><<<grid, kThreads, q_smem>>>(dq, q, k, v, d_o, lse, delta, seq, heads, kv_heads, causal, scale);
  CheckLaunch("FlashAttentionBackwardQ");
}

}  // namespace

bool FlashAttentionSupports(int seq, int head_dim) { return (head_dim == 64 || head_dim == 128) && seq > 0 && seq % kTile == 0; }

void FlashAttentionForward(bf16* o, float* lse, const bf16* q, const bf16* k, const bf16* v, int batch, int seq, int heads, int kv_heads,
                           int head_dim, bool causal, float scale) {
  if (head_dim == 64) {
    Forward<64>(o, lse, q, k, v, batch, seq, heads, kv_heads, causal, scale);
  } else {
    Forward<128>(o, lse, q, k, v, batch, seq, heads, kv_heads, causal, scale);
  }
}

void FlashAttentionBackward(float* dq_acc, float* dk_acc, float* dv_acc, const bf16* q, const bf16* k, const bf16* v, const bf16* d_o,
                            const float* lse, const float* delta, int batch, int seq, int heads, int kv_heads, int head_dim, bool causal,
                            float scale) {
  if (head_dim == 64) {
    Backward<64>(dq_acc, dk_acc, dv_acc, q, k, v, d_o, lse, delta, batch, seq, heads, kv_heads, causal, scale);
  } else {
    Backward<128>(dq_acc, dk_acc, dv_acc, q, k, v, d_o, lse, delta, batch, seq, heads, kv_heads, causal, scale);
  }
}

}  // namespace shardsim::cuda
