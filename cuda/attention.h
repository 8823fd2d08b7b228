// Causal or full self-attention with grouped-query heads on the GPU, blockwise as in
// runtime/attention.h: the sequence is cut into tiles, each (query tile, key tile) pair is a pair
// of cuBLAS products batched over the heads with the scores of one tile pair in memory, and the
// partial results merge by log-sum-exp (FlashAttention-2's online softmax, Dao 2023, at tile
// granularity). The backward recomputes each tile's probabilities from the saved lse.
//
// Shapes (token-major, row-major): q, o, dq [B, S, H, K]; k, v, dk, dv [B, Sk, G, K]; lse [B, H, S]
// (Sk = S unless kv_seq says otherwise). Query head h reads key/value head h / (H / G); scores are
// scale * q.k; causal masks keys after the query: by index, or by the positions SetPositions gives
// (context parallelism: a rank's queries against the whole sequence's keys). T is float or bf16; products accumulate in fp32 and the lse is fp32. With
// AttentionDims::fused, bf16 attention whose shape the fused kernels take (head dim 64 or 128,
// sequence a multiple of 64) runs on them instead (cuda/flash_attention.h).
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/blas.h"
#include "cuda/device_buffer.h"

namespace shardsim::cuda {

struct AttentionDims {
  int batch = 1;
  int seq = 0;
  int heads = 1;
  int kv_heads = 1;
  int head_dim = 1;
  int tile = 1024;  // query and key tile length
  // true: bf16 with a shape FlashAttentionSupports takes runs on the fused kernels
  // (cuda/flash_attention.h) instead of the tiled products (docs/gpu.md has both rates).
  bool fused = false;
  int kv_seq = 0;  // keys per batch row; 0: seq (the fused kernels take only that)
};

template <typename T>
class GpuAttention {
 public:
  // Workspace for one tile pair and one batch row. REQUIRES: heads % kv_heads == 0, tile > 0.
  GpuAttention(const AttentionDims& dims, bool causal, float scale);

  // The queries' and keys' positions in their sequence ([seq], [kv_seq], the same for every batch
  // row), for the causal mask; tile pairs whose keys all follow their queries are skipped. Turns
  // the fused kernels off.
  void SetPositions(const std::vector<int32_t>& query, const std::vector<int32_t>& key);

  // o, lse overwritten.
  void Forward(Blas& blas, T* o, float* lse, const T* q, const T* k, const T* v);
  // dq, dk, dv overwritten; o and lse as the forward returned them.
  void Backward(Blas& blas, T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const T* o, const T* d_o,
                const float* lse);
  // Bytes of workspace held.
  int64_t WorkspaceBytes() const;
  bool fused() const { return use_fused_; }

 private:
  // k, v of batch row b with each K/V head repeated for its H/G query heads: [Sk, H, K].
  const T* Expanded(const T* x, int b, DeviceBuffer<T>& out);
  // Whether the tile pair from query q0 and key k0 has no unmasked (query, key).
  bool Skipped(int q0, int k0) const;

  AttentionDims d_;
  bool causal_;
  float scale_;
  DeviceBuffer<float> scores_;  // [H, tile, tile]
  DeviceBuffer<T> probs_;       // [H, tile, tile]
  DeviceBuffer<float> o_tile_;  // [tile, H, K]
  DeviceBuffer<float> o_acc_;   // [tile, H, K]
  DeviceBuffer<float> row_m_;   // [H, tile]
  DeviceBuffer<float> row_l_;   // [H, tile]
  DeviceBuffer<float> lse_acc_; // [H, tile]
  DeviceBuffer<T> k_rep_, v_rep_;           // [Sk, H, K] when G < H
  DeviceBuffer<float> dq_acc_, dk_acc_, dv_acc_;  // [S, H, K], [Sk, H, K], [Sk, H, K]
  DeviceBuffer<int32_t> q_pos_, k_pos_;      // SetPositions' (empty: by index)
  std::vector<int32_t> q_tile_max_, k_tile_min_;  // the latest query / earliest key per tile
  DeviceBuffer<float> delta_;   // [H, S]; [B, H, S] on the fused path
  bool use_fused_ = false;
};

}  // namespace shardsim::cuda
