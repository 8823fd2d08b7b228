#include "cuda/attention.h"

#include <algorithm>
#include <cmath>

#include "cuda/device_math.cuh"
#include "cuda/flash_attention.h"
#include "cuda/kernels.h"

namespace shardsim::cuda {
namespace {

using device::FromF;
using device::ToF;
using device::WarpMax;
using device::WarpSum;



// out [S, H, K] = x [S, G, K] with head h reading group h / rep.
template <typename T>
__global__ void RepeatKvKernel(T* out, const T* x, int seq, int heads, int rep, int head_dim) {
  const int64_t n = static_cast<int64_t>(seq) * heads * head_dim;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int k = static_cast<int>(i % head_dim);
  const int64_t sh = i / head_dim;
  const int h = static_cast<int>(sh % heads);
  const int64_t s = sh / heads;
  out[i] = x[(s * (heads / rep) + h / rep) * head_dim + k];
}

// out [S, G, K] = sum over each group's heads of acc [S, H, K].
template <typename T>
__global__ void ReduceKvKernel(T* out, const float* acc, int seq, int kv_heads, int rep, int head_dim) {
  const int64_t n = static_cast<int64_t>(seq) * kv_heads * head_dim;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int k = static_cast<int>(i % head_dim);
  const int64_t sg = i / head_dim;
  const int g = static_cast<int>(sg % kv_heads);
  const int64_t s = sg / kv_heads;
  float sum = 0;
  for (int r = 0; r < rep; ++r) sum += acc[(s * kv_heads * rep + g * rep + r) * head_dim + k];
  out[i] = FromF<T>(sum);
}

// Where the causal mask compares: query q and key k by their positions (null: their indices).
struct MaskPositions {
  const int32_t* query = nullptr;
  const int32_t* key = nullptr;
  bool causal = false;
  __device__ __forceinline__ bool Masked(int q, int k) const {
    return causal && (key != nullptr ? key[k] : k) > (query != nullptr ? query[q] : q);
  }
};

// One warp per (head, query row) of a tile: p = exp(s - max), row max and sum kept.
template <typename T>
__global__ void TileSoftmaxKernel(T* probs, float* row_m, float* row_l, const float* scores, int bq, int bk, int q0,
                                  int k0, MaskPositions mask, int tile) {
  const int i = blockIdx.x, h = blockIdx.y;
  const int64_t base = (static_cast<int64_t>(h) * bq + i) * bk;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < bk; j += 32) {
    if (!mask.Masked(q0 + i, k0 + j)) m = fmaxf(m, scores[base + j]);
  }
  m = WarpMax(m);
  float l = 0;
  for (int j = threadIdx.x; j < bk; j += 32) {
    const float p = (m == -INFINITY || mask.Masked(q0 + i, k0 + j)) ? 0.0f : expf(scores[base + j] - m);
    const T stored = FromF<T>(p);
    probs[base + j] = stored;
    l += ToF(stored);  // the sum of what the product with V will read
  }
  l = WarpSum(l);
  if (threadIdx.x == 0) {
    row_m[h * tile + i] = m;
    row_l[h * tile + i] = l;
  }
}

// o_acc, lse_acc merged with this tile's unnormalised product o_tile = P V (P = exp(s - m), row
// sum l): the tile's lse is m + log l and its normalised output o_tile / l.
__global__ void TileMergeKernel(float* o_acc, float* lse_acc, const float* o_tile, const float* row_m,
                                const float* row_l, int heads, int head_dim, int tile) {
  const int i = blockIdx.x, h = blockIdx.y;
  const float acc = lse_acc[h * tile + i];
  const float m = row_m[h * tile + i], l = row_l[h * tile + i];
  const float blk = l > 0 ? m + logf(l) : -INFINITY;
  const float hi = fmaxf(acc, blk);
  __syncthreads();
  if (hi == -INFINITY) return;
  const float merged = hi + logf(expf(acc - hi) + expf(blk - hi));
  const float wa = acc == -INFINITY ? 0.0f : expf(acc - merged);
  const float wb = l > 0 ? expf(m - merged) : 0.0f;
  const int64_t row = (static_cast<int64_t>(i) * heads + h) * head_dim;
  for (int k = threadIdx.x; k < head_dim; k += blockDim.x) {
    o_acc[row + k] = (acc == -INFINITY ? 0.0f : o_acc[row + k] * wa) + o_tile[row + k] * wb;
  }
  if (threadIdx.x == 0) lse_acc[h * tile + i] = merged;
}

template <typename T>
__global__ void FinishForwardKernel(T* o, float* lse, const float* o_acc, const float* lse_acc, int heads, int head_dim,
                                    int tile, int seq) {
  const int i = blockIdx.x, h = blockIdx.y;
  const float l = lse_acc[h * tile + i];
  const int64_t row = (static_cast<int64_t>(i) * heads + h) * head_dim;
  for (int k = threadIdx.x; k < head_dim; k += blockDim.x) o[row + k] = FromF<T>(l == -INFINITY ? 0.0f : o_acc[row + k]);
  if (threadIdx.x == 0) lse[static_cast<int64_t>(h) * seq + i] = l;
}

__global__ void InitRowsKernel(float* lse_acc, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) lse_acc[i] = -INFINITY;
}

// delta [H, S] = rowsum(d_o * o), one warp per (token, head).
template <typename T>
__global__ void DeltaKernel(float* delta, const T* o, const T* d_o, int seq, int heads, int head_dim) {
  const int s = blockIdx.x, h = blockIdx.y;
  const int64_t row = (static_cast<int64_t>(s) * heads + h) * head_dim;
  float acc = 0;
  for (int k = threadIdx.x; k < head_dim; k += 32) acc += ToF(o[row + k]) * ToF(d_o[row + k]);
  acc = WarpSum(acc);
  if (threadIdx.x == 0) delta[static_cast<int64_t>(h) * seq + s] = acc;
}

// Backward, per tile: probs = exp(scores - lse) (masked: 0).
template <typename T>
__global__ void TileProbsKernel(T* probs, const float* scores, const float* lse, int bq, int bk, int q0, int k0,
                                MaskPositions mask, int seq) {
  const int i = blockIdx.x, h = blockIdx.y;
  const int64_t base = (static_cast<int64_t>(h) * bq + i) * bk;
  const float l = lse[static_cast<int64_t>(h) * seq + q0 + i];
  for (int j = threadIdx.x; j < bk; j += blockDim.x) {
    const bool off = l == -INFINITY || mask.Masked(q0 + i, k0 + j);
    probs[base + j] = FromF<T>(off ? 0.0f : expf(scores[base + j] - l));
  }
}

// ds = p * (dp - delta), written over p.
template <typename T>
__global__ void TileDsKernel(T* probs, const float* dp, const float* delta, int bq, int bk, int q0, int seq) {
  const int i = blockIdx.x, h = blockIdx.y;
  const int64_t base = (static_cast<int64_t>(h) * bq + i) * bk;
  const float dl = delta[static_cast<int64_t>(h) * seq + q0 + i];
  for (int j = threadIdx.x; j < bk; j += blockDim.x) probs[base + j] = FromF<T>(ToF(probs[base + j]) * (dp[base + j] - dl));
}

int Blocks(int64_t n) { return static_cast<int>((n + 255) / 256); }

template <typename T>
constexpr DType TypeOf() {
  return std::is_same_v<T, float> ? DType::kF32 : DType::kBf16;
}

}  // namespace

template <typename T>
GpuAttention<T>::GpuAttention(const AttentionDims& dims, bool causal, float scale)
    : d_(dims), causal_(causal), scale_(scale) {
  if (d_.heads % d_.kv_heads != 0 || d_.tile <= 0 || d_.head_dim <= 0) {
    throw CudaError("GpuAttention: heads must be a multiple of kv_heads, tile and head_dim positive");
  }
  if (d_.kv_seq == 0) d_.kv_seq = d_.seq;
  d_.tile = std::min(d_.tile, std::max(1, std::max(d_.seq, d_.kv_seq)));
  // By index until SetPositions: each tile's latest query and earliest key.
  for (int q0 = 0; q0 < d_.seq; q0 += d_.tile) q_tile_max_.push_back(std::min(q0 + d_.tile, d_.seq) - 1);
  for (int k0 = 0; k0 < d_.kv_seq; k0 += d_.tile) k_tile_min_.push_back(k0);
  use_fused_ = std::is_same_v<T, bf16> && d_.fused && d_.kv_seq == d_.seq && FlashAttentionSupports(d_.seq, d_.head_dim);
  if (use_fused_) return;  // the fused kernels need no tile workspace
  const int64_t tt = static_cast<int64_t>(d_.heads) * d_.tile * d_.tile;
  const int64_t thk = static_cast<int64_t>(d_.tile) * d_.heads * d_.head_dim;
  const int64_t shk = static_cast<int64_t>(d_.kv_seq) * d_.heads * d_.head_dim;
  scores_ = DeviceBuffer<float>(tt);
  probs_ = DeviceBuffer<T>(tt);
  o_tile_ = DeviceBuffer<float>(thk);
  o_acc_ = DeviceBuffer<float>(thk);
  row_m_ = DeviceBuffer<float>(static_cast<int64_t>(d_.heads) * d_.tile);
  row_l_ = DeviceBuffer<float>(static_cast<int64_t>(d_.heads) * d_.tile);
  lse_acc_ = DeviceBuffer<float>(static_cast<int64_t>(d_.heads) * d_.tile);
  if (d_.kv_heads < d_.heads) {
    k_rep_ = DeviceBuffer<T>(shk);
    v_rep_ = DeviceBuffer<T>(shk);
  }
}

template <typename T>
int64_t GpuAttention<T>::WorkspaceBytes() const {
  return static_cast<int64_t>(scores_.bytes() + probs_.bytes() + o_tile_.bytes() + o_acc_.bytes() + row_m_.bytes() +
                              row_l_.bytes() + lse_acc_.bytes() + k_rep_.bytes() + v_rep_.bytes() + dq_acc_.bytes() + dk_acc_.bytes() +
                              dv_acc_.bytes() + delta_.bytes());
}

template <typename T>
void GpuAttention<T>::SetPositions(const std::vector<int32_t>& query, const std::vector<int32_t>& key) {
  if (static_cast<int>(query.size()) != d_.seq || static_cast<int>(key.size()) != d_.kv_seq) {
    throw CudaError("GpuAttention::SetPositions: expected seq query and kv_seq key positions");
  }
  if (use_fused_) throw CudaError("GpuAttention::SetPositions: not on the fused kernels (construct with fused off)");
  q_pos_ = ToDevice(query);
  k_pos_ = ToDevice(key);
  for (size_t t = 0; t < q_tile_max_.size(); ++t) {
    const auto from = query.begin() + static_cast<std::ptrdiff_t>(t) * d_.tile;
    q_tile_max_[t] = *std::max_element(from, std::min(from + d_.tile, query.end()));
  }
  for (size_t t = 0; t < k_tile_min_.size(); ++t) {
    const auto from = key.begin() + static_cast<std::ptrdiff_t>(t) * d_.tile;
    k_tile_min_[t] = *std::min_element(from, std::min(from + d_.tile, key.end()));
  }
}

template <typename T>
bool GpuAttention<T>::Skipped(int q0, int k0) const {
  return causal_ && k_tile_min_[static_cast<size_t>(k0 / d_.tile)] > q_tile_max_[static_cast<size_t>(q0 / d_.tile)];
}

template <typename T>
const T* GpuAttention<T>::Expanded(const T* x, int b, DeviceBuffer<T>& out) {
  const int64_t row = static_cast<int64_t>(d_.kv_seq) * d_.kv_heads * d_.head_dim;
  if (d_.kv_heads == d_.heads) return x + b * row;
  const int64_t n = static_cast<int64_t>(d_.kv_seq) * d_.heads * d_.head_dim;
  RepeatKvKernel<<<Blocks(n), 256>>>(out.data(), x + b * row, d_.kv_seq, d_.heads, d_.heads / d_.kv_heads, d_.head_dim);
  CheckLaunch("RepeatKv");
  return out.data();
}

template <typename T>
void GpuAttention<T>::Forward(Blas& blas, T* o, float* lse, const T* q, const T* k, const T* v) {
  if constexpr (std::is_same_v<T, bf16>) {
    if (use_fused_) {
      FlashAttentionForward(o, lse, q, k, v, d_.batch, d_.seq, d_.heads, d_.kv_heads, d_.head_dim, causal_, scale_);
      return;
    }
  }
  const int S = d_.seq, Sk = d_.kv_seq, H = d_.heads, K = d_.head_dim, tile = d_.tile;
  const int64_t hk = static_cast<int64_t>(H) * K;
  const DType t = TypeOf<T>();
  const int threads = std::min(K, 256);
  const MaskPositions mask{q_pos_.data(), k_pos_.data(), causal_};
  for (int b = 0; b < d_.batch; ++b) {
    const T* kr = Expanded(k, b, k_rep_);
    const T* vr = Expanded(v, b, v_rep_);
    const T* qb = q + static_cast<int64_t>(b) * S * hk;
    for (int q0 = 0; q0 < S; q0 += tile) {
      const int bq = std::min(tile, S - q0);
      InitRowsKernel<<<Blocks(static_cast<int64_t>(H) * tile), 256>>>(lse_acc_.data(), H * tile);
      CheckLaunch("InitRows");
      for (int k0 = 0; k0 < Sk; k0 += tile) {
        if (Skipped(q0, k0)) continue;
        const int bk = std::min(tile, Sk - k0);
        const int64_t tt = static_cast<int64_t>(bq) * bk;
        blas.Gemm({scores_.data(), DType::kF32, bk, tt}, {qb + q0 * hk, t, hk, Op::kNo, K},
                  {kr + k0 * hk, t, hk, Op::kYes, K}, bq, bk, K, scale_, 0.0f, H);
        TileSoftmaxKernel<<<dim3(bq, H), 32>>>(probs_.data(), row_m_.data(), row_l_.data(), scores_.data(), bq, bk, q0,
                                               k0, mask, tile);
        CheckLaunch("TileSoftmax");
        blas.Gemm({o_tile_.data(), DType::kF32, hk, K}, {probs_.data(), t, bk, Op::kNo, tt},
                  {vr + k0 * hk, t, hk, Op::kNo, K}, bq, K, bk, 1.0f, 0.0f, H);
        TileMergeKernel<<<dim3(bq, H), threads>>>(o_acc_.data(), lse_acc_.data(), o_tile_.data(), row_m_.data(),
                                                  row_l_.data(), H, K, tile);
        CheckLaunch("TileMerge");
      }
      FinishForwardKernel<<<dim3(bq, H), threads>>>(o + (static_cast<int64_t>(b) * S + q0) * hk,
                                                    lse + static_cast<int64_t>(b) * H * S + q0, o_acc_.data(),
                                                    lse_acc_.data(), H, K, tile, S);
      CheckLaunch("FinishForward");
    }
  }
}

template <typename T>
void GpuAttention<T>::Backward(Blas& blas, T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const T* o,
                               const T* d_o, const float* lse) {
  const int S = d_.seq, Sk = d_.kv_seq, H = d_.heads, G = d_.kv_heads, K = d_.head_dim, tile = d_.tile;
  const int64_t hk = static_cast<int64_t>(H) * K;
  const int64_t shk = static_cast<int64_t>(S) * hk, skhk = static_cast<int64_t>(Sk) * hk;
  const DType t = TypeOf<T>();
  const MaskPositions mask{q_pos_.data(), k_pos_.data(), causal_};
  if constexpr (std::is_same_v<T, bf16>) {
    if (use_fused_) {
      const int64_t all = d_.batch * shk;
      if (dq_acc_.size() != all) {
        dq_acc_ = DeviceBuffer<float>(all);
        dk_acc_ = DeviceBuffer<float>(all);
        dv_acc_ = DeviceBuffer<float>(all);
        delta_ = DeviceBuffer<float>(static_cast<int64_t>(d_.batch) * H * S);
      }
      for (int b = 0; b < d_.batch; ++b) {
        DeltaKernel<<<dim3(S, H), 32>>>(delta_.data() + static_cast<int64_t>(b) * H * S, o + b * shk, d_o + b * shk, S, H, K);
        CheckLaunch("Delta");
      }
      FlashAttentionBackward(dq_acc_.data(), dk_acc_.data(), dv_acc_.data(), q, k, v, d_o, lse, delta_.data(), d_.batch, S, H, G, K, causal_,
                             scale_);
      Convert(dq, dq_acc_.data(), all);
      const int64_t bsgk = static_cast<int64_t>(d_.batch) * S * G * K;
      ReduceKvKernel<<<Blocks(bsgk), 256>>>(dk, dk_acc_.data(), d_.batch * S, G, H / G, K);
      ReduceKvKernel<<<Blocks(bsgk), 256>>>(dv, dv_acc_.data(), d_.batch * S, G, H / G, K);
      CheckLaunch("ReduceKv");
      return;
    }
  }
  if (dq_acc_.size() != shk || dk_acc_.size() != skhk) {
    dq_acc_ = DeviceBuffer<float>(shk);
    dk_acc_ = DeviceBuffer<float>(skhk);
    dv_acc_ = DeviceBuffer<float>(skhk);
    delta_ = DeviceBuffer<float>(static_cast<int64_t>(H) * S);
  }
  for (int b = 0; b < d_.batch; ++b) {
    const T* kr = Expanded(k, b, k_rep_);
    const T* vr = Expanded(v, b, v_rep_);
    const T* qb = q + b * shk;
    const T* dob = d_o + b * shk;
    const float* lseb = lse + static_cast<int64_t>(b) * H * S;
    DeltaKernel<<<dim3(S, H), 32>>>(delta_.data(), o + b * shk, dob, S, H, K);
    CheckLaunch("Delta");
    dq_acc_.Zero();
    dk_acc_.Zero();
    dv_acc_.Zero();
    for (int q0 = 0; q0 < S; q0 += tile) {
      const int bq = std::min(tile, S - q0);
      for (int k0 = 0; k0 < Sk; k0 += tile) {
        if (Skipped(q0, k0)) continue;
        const int bk = std::min(tile, Sk - k0);
        const int64_t tt = static_cast<int64_t>(bq) * bk;
        blas.Gemm({scores_.data(), DType::kF32, bk, tt}, {qb + q0 * hk, t, hk, Op::kNo, K},
                  {kr + k0 * hk, t, hk, Op::kYes, K}, bq, bk, K, scale_, 0.0f, H);
        TileProbsKernel<<<dim3(bq, H), 128>>>(probs_.data(), scores_.data(), lseb, bq, bk, q0, k0, mask, S);
        CheckLaunch("TileProbs");
        // dV += P^T dO
        blas.Gemm({dv_acc_.data() + k0 * hk, DType::kF32, hk, K}, {probs_.data(), t, bk, Op::kYes, tt},
                  {dob + q0 * hk, t, hk, Op::kNo, K}, bk, K, bq, 1.0f, 1.0f, H);
        // dP = dO V^T, then dS = P (dP - delta) over P
        blas.Gemm({scores_.data(), DType::kF32, bk, tt}, {dob + q0 * hk, t, hk, Op::kNo, K},
                  {vr + k0 * hk, t, hk, Op::kYes, K}, bq, bk, K, 1.0f, 0.0f, H);
        TileDsKernel<<<dim3(bq, H), 128>>>(probs_.data(), scores_.data(), delta_.data(), bq, bk, q0, S);
        CheckLaunch("TileDs");
        // dQ += scale dS K; dK += scale dS^T Q
        blas.Gemm({dq_acc_.data() + q0 * hk, DType::kF32, hk, K}, {probs_.data(), t, bk, Op::kNo, tt},
                  {kr + k0 * hk, t, hk, Op::kNo, K}, bq, K, bk, scale_, 1.0f, H);
        blas.Gemm({dk_acc_.data() + k0 * hk, DType::kF32, hk, K}, {probs_.data(), t, bk, Op::kYes, tt},
                  {qb + q0 * hk, t, hk, Op::kNo, K}, bk, K, bq, scale_, 1.0f, H);
      }
    }
    Convert(dq + b * shk, dq_acc_.data(), shk);
    const int64_t sgk = static_cast<int64_t>(Sk) * G * K;
    ReduceKvKernel<<<Blocks(sgk), 256>>>(dk + b * sgk, dk_acc_.data(), Sk, G, H / G, K);
    ReduceKvKernel<<<Blocks(sgk), 256>>>(dv + b * sgk, dv_acc_.data(), Sk, G, H / G, K);
    CheckLaunch("ReduceKv");
  }
}

template class GpuAttention<float>;
template class GpuAttention<bf16>;

}  // namespace shardsim::cuda
