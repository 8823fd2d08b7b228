#include "cuda/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/tensor_core.cuh"

namespace shardsim::cuda {
namespace {

using device::AccumulatorsAsA;
using device::CopyAsync16;
using device::CopyAsyncCommit;
using device::CopyAsyncWait;
using device::LoadMatrix;
using device::LoadMatrixT;
using device::Mma;
using device::PackBf16;
using device::QuadMax;
using device::QuadSum;
using bf16 = __nv_bfloat16;

constexpr int kBlock = 64;  // queries (forward, dQ) or keys (dK/dV) per block, 16 per warp
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Shared-memory rows padded by 16 bytes: the eight row addresses of an ldmatrix fall in distinct banks.
template <int D>
constexpr int Ld() {
  return D + 8;
}
// Queries per step of the dK/dV kernel: fewer at head dim 128 to keep its accumulators in registers.
template <int D>
constexpr int QueryStep() {
  return D == 64 ? 64 : 32;
}

// dst [kRows][Ld] = rows [row0, row0 + kRows) of head n of a [S, N, D] tensor (one batch row), copied
// asynchronously; the caller commits and waits.
template <int D, int kRows>
__device__ void LoadTileAsync(bf16* dst, const bf16* src, int row0, int n_heads, int n) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    CopyAsync16(dst + r * Ld<D>() + c, src + (static_cast<int64_t>(row0 + r) * n_heads + n) * D + c);
  }
}

// The A fragments of 16 rows [16][D] of a shared tile (row-major, padded).
template <int D>
__device__ void LoadRowsA(uint32_t (&a)[D / 16][4], const bf16* rows, int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    LoadMatrix(a[kk], rows + ((lane % 8) + ((lane >> 3) & 1) * 8) * Ld<D>() + kk * 16 + (lane >> 4) * 8);
  }
}

// s [16][N] = A [16][D] times B [N][D]^T, B a shared tile (rows of keys or queries).
template <int D, int N>
__device__ void Scores(float (&s)[N / 8][4], const uint32_t (&a)[D / 16][4], const bf16* b, int lane) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[j][e] = 0.0f;
  }
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
    for (int jp = 0; jp < N / 16; ++jp) {
      uint32_t f[4];
      LoadMatrix(f, b + (jp * 16 + (lane % 8) + (lane >> 4) * 8) * Ld<D>() + kk * 16 + ((lane >> 3) & 1) * 8);
      Mma(s[2 * jp], a[kk], f[0], f[1]);
      Mma(s[2 * jp + 1], a[kk], f[2], f[3]);
    }
  }
}

// acc [16][D] += P [16][N] (accumulators, rounded to bf16) times B [N][D], B a shared tile.
template <int D, int N>
__device__ void AccumulateTimes(float (&acc)[D / 8][4], const float (&p)[N / 8][4], const bf16* b, int lane) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    uint32_t a[4];
    AccumulatorsAsA(a, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      uint32_t f[4];
      LoadMatrixT(f, b + (kk * 16 + (lane % 8) + ((lane >> 3) & 1) * 8) * Ld<D>() + np * 16 + (lane >> 4) * 8);
      Mma(acc[2 * np], a, f[0], f[1]);
      Mma(acc[2 * np + 1], a, f[2], f[3]);
    }
  }
}

template <int D>
__device__ void Zero(float (&acc)[D / 8][4]) {
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  }
}

// Two fp32 values of an accumulator row to global memory (8-byte store).
__device__ __forceinline__ void StorePair(float* out, float x, float y) { *reinterpret_cast<float2*>(out) = make_float2(x, y); }

template <int D>
constexpr int ForwardSmem() {
  return 5 * kBlock * Ld<D>() * 2;
}

// One block: 64 queries of one head against every key they see, 64 keys a step (K/V double-buffered);
// each warp holds its 16 queries' fragments, scores, probabilities and output in registers. The scores
// are in log2 units (scale_log2 = scale * log2 e).
template <int D>
__global__ void __launch_bounds__(kThreads) ForwardKernel(bf16* o, float* lse, const bf16* q, const bf16* k, const bf16* v, int seq,
                                                          int heads, int kv_heads, bool causal, float scale_log2) {
  constexpr int kLd = Ld<D>(), kTileElems = kBlock * kLd;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sK = sQ + kTileElems;      // two buffers
  bf16* sV = sK + 2 * kTileElems;  // two buffers
  const int tiles = seq / kBlock;
  const int qt = tiles - 1 - static_cast<int>(blockIdx.y);  // causal: the longest blocks first, every head's
  const int h = blockIdx.x, b = blockIdx.z, g = h / (heads / kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tq = lane % 4;
  const bf16* qb = q + static_cast<int64_t>(b) * seq * heads * D;
  const bf16* kb = k + static_cast<int64_t>(b) * seq * kv_heads * D;
  const bf16* vb = v + static_cast<int64_t>(b) * seq * kv_heads * D;
  LoadTileAsync<D, kBlock>(sQ, qb, qt * kBlock, heads, h);
  LoadTileAsync<D, kBlock>(sK, kb, 0, kv_heads, g);
  LoadTileAsync<D, kBlock>(sV, vb, 0, kv_heads, g);
  CopyAsyncCommit();
  const int last = causal ? qt : tiles - 1;
  const int row0 = qt * kBlock + warp * 16 + lane / 4;  // this lane's rows: row0 and row0 + 8
  uint32_t qa[D / 16][4];
  float acc[D / 8][4];
  Zero<D>(acc);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  for (int kt = 0; kt <= last; ++kt) {
    const int buf = kt & 1;
    if (kt < last) {
      LoadTileAsync<D, kBlock>(sK + (buf ^ 1) * kTileElems, kb, (kt + 1) * kBlock, kv_heads, g);
      LoadTileAsync<D, kBlock>(sV + (buf ^ 1) * kTileElems, vb, (kt + 1) * kBlock, kv_heads, g);
    }
    CopyAsyncCommit();
    CopyAsyncWait<1>();
    __syncthreads();
    if (kt == 0) LoadRowsA<D>(qa, sQ + warp * 16 * kLd, lane);
    float s[kBlock / 8][4];
    Scores<D, kBlock>(s, qa, sK + buf * kTileElems, lane);
    const bool diagonal = causal && kt == qt;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kBlock / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[j][e] * scale_log2;
        if (diagonal && kt * kBlock + 8 * j + 2 * tq + (e & 1) > row0 + (e >> 1) * 8) x = -INFINITY;
        s[j][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    }
    // Online softmax: key 0 is unmasked for every query, so the running maximum is finite from the
    // first step on (exp2 of -inf minus it is 0).
    float alpha[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float m_new = fmaxf(m[i], QuadMax(mx[i]));
      alpha[i] = exp2f(m[i] - m_new);
      m[i] = m_new;
      l[i] *= alpha[i];
    }
#pragma unroll
    for (int j = 0; j < kBlock / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - m[e >> 1]);
        l[e >> 1] += s[j][e];
      }
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] *= alpha[e >> 1];
    }
    AccumulateTimes<D, kBlock>(acc, s, sV + buf * kTileElems, lane);
    __syncthreads();  // the buffer is refilled next step
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float sum = QuadSum(l[i]), inv = 1.0f / sum;
    const int row = row0 + 8 * i;
    bf16* out = o + ((static_cast<int64_t>(b) * seq + row) * heads + h) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      *reinterpret_cast<uint32_t*>(out + 8 * n + 2 * tq) = PackBf16(acc[n][2 * i] * inv, acc[n][2 * i + 1] * inv);
    }
    if (tq == 0) lse[(static_cast<int64_t>(b) * heads + h) * seq + row] = (m[i] + log2f(sum)) * kLn2;
  }
}

template <int D>
constexpr int BackwardQSmem() {
  return 6 * kBlock * Ld<D>() * 2;
}

// dQ of 64 queries of one head (a warp's 16 in registers), over every key tile they see: the
// probabilities recomputed from the lse, dS = P o (dP - delta) with dP = dO V^T, dQ += dS K.
template <int D>
__global__ void __launch_bounds__(kThreads) BackwardQKernel(float* dq_acc, const bf16* q, const bf16* k, const bf16* v, const bf16* d_o,
                                                            const float* lse, const float* delta, int seq, int heads, int kv_heads,
                                                            bool causal, float scale_log2, float scale) {
  constexpr int kLd = Ld<D>(), kTileElems = kBlock * kLd;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sdO = sQ + kTileElems;
  bf16* sK = sdO + kTileElems;     // two buffers
  bf16* sV = sK + 2 * kTileElems;  // two buffers
  const int tiles = seq / kBlock;
  const int qt = tiles - 1 - static_cast<int>(blockIdx.y);
  const int h = blockIdx.x, b = blockIdx.z, g = h / (heads / kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tq = lane % 4;
  const int64_t qrow = static_cast<int64_t>(b) * seq * heads * D, kvrow = static_cast<int64_t>(b) * seq * kv_heads * D;
  LoadTileAsync<D, kBlock>(sQ, q + qrow, qt * kBlock, heads, h);
  LoadTileAsync<D, kBlock>(sdO, d_o + qrow, qt * kBlock, heads, h);
  LoadTileAsync<D, kBlock>(sK, k + kvrow, 0, kv_heads, g);
  LoadTileAsync<D, kBlock>(sV, v + kvrow, 0, kv_heads, g);
  CopyAsyncCommit();
  const int row0 = qt * kBlock + warp * 16 + lane / 4;
  const int64_t bh = (static_cast<int64_t>(b) * heads + h) * seq;
  const float lse2[2] = {lse[bh + row0] * kLog2e, lse[bh + row0 + 8] * kLog2e};
  const float dl[2] = {delta[bh + row0], delta[bh + row0 + 8]};
  float dq[D / 8][4];
  Zero<D>(dq);
  const int last = causal ? qt : tiles - 1;
  for (int kt = 0; kt <= last; ++kt) {
    const int buf = kt & 1;
    if (kt < last) {
      LoadTileAsync<D, kBlock>(sK + (buf ^ 1) * kTileElems, k + kvrow, (kt + 1) * kBlock, kv_heads, g);
      LoadTileAsync<D, kBlock>(sV + (buf ^ 1) * kTileElems, v + kvrow, (kt + 1) * kBlock, kv_heads, g);
    }
    CopyAsyncCommit();
    CopyAsyncWait<1>();
    __syncthreads();
    const bf16* tK = sK + buf * kTileElems;
    float s[kBlock / 8][4], dp[kBlock / 8][4];
    {
      uint32_t a[D / 16][4];
      LoadRowsA<D>(a, sQ + warp * 16 * kLd, lane);
      Scores<D, kBlock>(s, a, tK, lane);  // S = Q K^T
      LoadRowsA<D>(a, sdO + warp * 16 * kLd, lane);
      Scores<D, kBlock>(dp, a, sV + buf * kTileElems, lane);  // dP = dO V^T
    }
    const bool diagonal = causal && kt == qt;
#pragma unroll
    for (int j = 0; j < kBlock / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool masked = diagonal && kt * kBlock + 8 * j + 2 * tq + (e & 1) > row0 + (e >> 1) * 8;
        const float p = masked ? 0.0f : exp2f(s[j][e] * scale_log2 - lse2[e >> 1]);
        s[j][e] = p * (dp[j][e] - dl[e >> 1]);  // dS
      }
    }
    AccumulateTimes<D, kBlock>(dq, s, tK, lane);  // dQ += dS K (scale below)
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float* out = dq_acc + ((static_cast<int64_t>(b) * seq + row0 + 8 * i) * heads + h) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) StorePair(out + 8 * n + 2 * tq, dq[n][2 * i] * scale, dq[n][2 * i + 1] * scale);
  }
}

template <int D>
constexpr int BackwardKvSmem() {
  return (2 * kBlock + 4 * QueryStep<D>()) * Ld<D>() * 2 + 4 * QueryStep<D>() * 4;
}

// dK and dV of 64 keys of one query head (a warp's 16 in registers), over every query that sees them,
// QueryStep queries a step (double-buffered): S^T = K Q^T and dP^T = V dO^T, P^T from the lse,
// dV += P^T dO, dS^T = P^T o (dP^T - delta), dK += dS^T Q.
template <int D>
__global__ void __launch_bounds__(kThreads) BackwardKvKernel(float* dk_acc, float* dv_acc, const bf16* q, const bf16* k, const bf16* v,
                                                             const bf16* d_o, const float* lse, const float* delta, int seq, int heads,
                                                             int kv_heads, bool causal, float scale_log2, float scale) {
  constexpr int kLd = Ld<D>(), kStep = QueryStep<D>(), kStepElems = kStep * kLd;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sK = reinterpret_cast<bf16*>(smem);
  bf16* sV = sK + kBlock * kLd;
  bf16* sQ = sV + kBlock * kLd;       // two buffers
  bf16* sdO = sQ + 2 * kStepElems;    // two buffers
  float* sL = reinterpret_cast<float*>(sdO + 2 * kStepElems);  // two buffers of lse * log2 e
  float* sDl = sL + 2 * kStep;                                  // two buffers of delta
  const int kt = blockIdx.y, h = blockIdx.x, b = blockIdx.z, g = h / (heads / kv_heads);  // causal: the longest first
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tq = lane % 4;
  const int64_t qrow = static_cast<int64_t>(b) * seq * heads * D, kvrow = static_cast<int64_t>(b) * seq * kv_heads * D;
  const int64_t bh = (static_cast<int64_t>(b) * heads + h) * seq;
  const int steps = seq / kStep, first = causal ? kt * kBlock / kStep : 0;
  auto load_step = [&](int qs, int buf) {
    LoadTileAsync<D, kStep>(sQ + buf * kStepElems, q + qrow, qs * kStep, heads, h);
    LoadTileAsync<D, kStep>(sdO + buf * kStepElems, d_o + qrow, qs * kStep, heads, h);
    for (int i = threadIdx.x; i < kStep; i += kThreads) {
      sL[buf * kStep + i] = lse[bh + qs * kStep + i] * kLog2e;
      sDl[buf * kStep + i] = delta[bh + qs * kStep + i];
    }
  };
  LoadTileAsync<D, kBlock>(sK, k + kvrow, kt * kBlock, kv_heads, g);
  LoadTileAsync<D, kBlock>(sV, v + kvrow, kt * kBlock, kv_heads, g);
  load_step(first, 0);
  CopyAsyncCommit();
  const int key0 = kt * kBlock + warp * 16 + lane / 4;  // this lane's keys: key0 and key0 + 8
  float dk[D / 8][4], dv[D / 8][4];
  Zero<D>(dk);
  Zero<D>(dv);
  for (int qs = first; qs < steps; ++qs) {
    const int buf = (qs - first) & 1;
    if (qs + 1 < steps) load_step(qs + 1, buf ^ 1);
    CopyAsyncCommit();
    CopyAsyncWait<1>();
    __syncthreads();
    const bf16* tQ = sQ + buf * kStepElems;
    const bf16* tdO = sdO + buf * kStepElems;
    const float* tl = sL + buf * kStep;
    const float* tdl = sDl + buf * kStep;
    float st[kStep / 8][4], dpt[kStep / 8][4];
    {
      uint32_t a[D / 16][4];
      LoadRowsA<D>(a, sK + warp * 16 * kLd, lane);
      Scores<D, kStep>(st, a, tQ, lane);  // S^T = K Q^T
      LoadRowsA<D>(a, sV + warp * 16 * kLd, lane);
      Scores<D, kStep>(dpt, a, tdO, lane);  // dP^T = V dO^T
    }
#pragma unroll
    for (int j = 0; j < kStep / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = 8 * j + 2 * tq + (e & 1);
        const bool masked = causal && key0 + (e >> 1) * 8 > qs * kStep + c;
        const float p = masked ? 0.0f : exp2f(st[j][e] * scale_log2 - tl[c]);
        st[j][e] = p;
        dpt[j][e] = p * (dpt[j][e] - tdl[c]);  // dS^T
      }
    }
    AccumulateTimes<D, kStep>(dv, st, tdO, lane);  // dV += P^T dO
    AccumulateTimes<D, kStep>(dk, dpt, tQ, lane);  // dK += dS^T Q (scale below)
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t row = ((static_cast<int64_t>(b) * seq + key0 + 8 * i) * heads + h) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      StorePair(dk_acc + row + 8 * n + 2 * tq, dk[n][2 * i] * scale, dk[n][2 * i + 1] * scale);
      StorePair(dv_acc + row + 8 * n + 2 * tq, dv[n][2 * i], dv[n][2 * i + 1]);
    }
  }
}

template <typename Kernel>
void AllowSmem(Kernel kernel, int bytes) {
  Check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), "cudaFuncSetAttribute");
}

// The most shared memory any of the head dimension's three kernels asks for.
template <int D>
constexpr int MostSmem() {
  return std::max({ForwardSmem<D>(), BackwardQSmem<D>(), BackwardKvSmem<D>()});
}

// The grids are (heads, tiles, batch): blocks start in order of x fastest, so the long causal tiles
// of every head go first and the short ones fill the tail.

template <int D>
void Forward(bf16* o, float* lse, const bf16* q, const bf16* k, const bf16* v, int batch, int seq, int heads, int kv_heads, bool causal,
             float scale) {
  constexpr int smem = ForwardSmem<D>();
  AllowSmem(ForwardKernel<D>, smem);
  ForwardKernel<D><<<dim3(heads, seq / kBlock, batch), kThreads, smem>>>(o, lse, q, k, v, seq, heads, kv_heads, causal, scale * kLog2e);
  CheckLaunch("FlashAttentionForward");
}

template <int D>
void Backward(float* dq, float* dk, float* dv, const bf16* q, const bf16* k, const bf16* v, const bf16* d_o, const float* lse,
              const float* delta, int batch, int seq, int heads, int kv_heads, bool causal, float scale) {
  constexpr int kv_smem = BackwardKvSmem<D>(), q_smem = BackwardQSmem<D>();
  AllowSmem(BackwardKvKernel<D>, kv_smem);
  AllowSmem(BackwardQKernel<D>, q_smem);
  const dim3 grid(heads, seq / kBlock, batch);  // blocks start in x order: every head of a tile together
  BackwardKvKernel<D><<<grid, kThreads, kv_smem>>>(dk, dv, q, k, v, d_o, lse, delta, seq, heads, kv_heads, causal, scale * kLog2e, scale);
  CheckLaunch("FlashAttentionBackwardKv");
  BackwardQKernel<D><<<grid, kThreads, q_smem>>>(dq, q, k, v, d_o, lse, delta, seq, heads, kv_heads, causal, scale * kLog2e, scale);
  CheckLaunch("FlashAttentionBackwardQ");
}

}  // namespace

bool FlashAttentionSupports(int seq, int head_dim) {
  if ((head_dim != 64 && head_dim != 128) || seq <= 0 || seq % kBlock != 0 || seq / kBlock > 65535) return false;
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    return false;
  }
  return optin >= (head_dim == 64 ? MostSmem<64>() : MostSmem<128>());
}

namespace {

// What the callers promise (GpuAttention checks FlashAttentionSupports), checked before a launch.
void CheckShape(int batch, int seq, int heads, int kv_heads, int head_dim) {
  if (batch < 1 || batch > 65535 || heads < 1 || kv_heads < 1 || heads % kv_heads != 0 || !FlashAttentionSupports(seq, head_dim)) {
    throw CudaError("flash attention: a shape its kernels do not take (batch " + std::to_string(batch) + ", sequence " + std::to_string(seq) +
                    ", heads " + std::to_string(heads) + " over " + std::to_string(kv_heads) + " K/V heads, head dim " +
                    std::to_string(head_dim) + ")");
  }
}

}  // namespace

void FlashAttentionForward(bf16* o, float* lse, const bf16* q, const bf16* k, const bf16* v, int batch, int seq, int heads, int kv_heads,
                           int head_dim, bool causal, float scale) {
  CheckShape(batch, seq, heads, kv_heads, head_dim);
  if (head_dim == 64) {
    Forward<64>(o, lse, q, k, v, batch, seq, heads, kv_heads, causal, scale);
  } else {
    Forward<128>(o, lse, q, k, v, batch, seq, heads, kv_heads, causal, scale);
  }
}

void FlashAttentionBackward(float* dq_acc, float* dk_acc, float* dv_acc, const bf16* q, const bf16* k, const bf16* v, const bf16* d_o,
                            const float* lse, const float* delta, int batch, int seq, int heads, int kv_heads, int head_dim, bool causal,
                            float scale) {
  CheckShape(batch, seq, heads, kv_heads, head_dim);
  if (head_dim == 64) {
    Backward<64>(dq_acc, dk_acc, dv_acc, q, k, v, d_o, lse, delta, batch, seq, heads, kv_heads, causal, scale);
  } else {
    Backward<128>(dq_acc, dk_acc, dv_acc, q, k, v, d_o, lse, delta, batch, seq, heads, kv_heads, causal, scale);
  }
}

}  // namespace shardsim::cuda
