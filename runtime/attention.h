// Causal or full softmax attention with grouped-query heads, blockwise with an online softmax
// (FlashAttention-2, Dao 2023): never more than one tile of scores in memory. The block-level
// functions are what ring attention composes: each K/V block gives a partial (o, lse), partials
// merge by log-sum-exp, and the backward of a block needs only the final (merged) lse.
//
// Shapes (token-major, row-major): q, o, dq [B, Sq, H, K]; k, v, dk, dv [B, Skv, G, K];
// lse, delta [B, H, Sq]; q_pos [Sq], kv_pos [Skv] absolute positions (the same for every batch
// row). Query head h reads kv head h / (H / G). Scores are scale * q.k; causal masks the keys
// with kv_pos > q_pos.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

struct AttentionShape {
  int batch = 1;     // B
  int q_len = 0;     // Sq: queries per batch row in this call
  int kv_len = 0;    // Skv: keys per batch row in this block
  int heads = 1;     // H: query heads
  int kv_heads = 1;  // G: key/value heads; H % G == 0
  int head_dim = 1;  // K
};

// Attention of these queries over this K/V block only. o [B, Sq, H, K] overwritten with the
// softmax-weighted values; lse [B, H, Sq] overwritten with the natural-log sum of exp(scores) over
// the visible keys. A query that sees no key of the block gets o = 0 and lse = -inf. Tiles that are
// entirely masked (min kv_pos > max q_pos) are skipped, so positions need not be sorted.
// REQUIRES: sizes >= 0, heads % kv_heads == 0, head_dim > 0.
void AttentionForwardBlock(float* o, float* lse, const float* q, const float* k, const float* v,
                           const int32_t* q_pos, const int32_t* kv_pos, const AttentionShape& shape,
                           bool causal, float scale);

// Merges a block's partial result into an accumulated one, in place:
// lse_acc' = log(exp(lse_acc) + exp(lse_blk)), o_acc' = the matching weighted mean of o_acc, o_blk.
// o_acc, o_blk [B, Sq, H, K]; lse_acc, lse_blk [B, H, Sq]; -inf on either side means "nothing
// seen" (then o_acc's old contents are ignored). Uses batch, q_len, heads, head_dim of shape.
void AttentionMerge(float* o_acc, float* lse_acc, const float* o_blk, const float* lse_blk,
                    const AttentionShape& shape);

// delta [B, H, Sq] = rowsum(d_o * o) over K, overwritten; o is the final (merged) output.
void AttentionBackwardPrepare(float* delta, const float* o, const float* d_o,
                              const AttentionShape& shape);

// This block's exact contribution to the gradients, given the final lse (after every merge) and
// delta: P = exp(scale q.k - lse). dq [B, Sq, H, K], dk and dv [B, Skv, G, K] all accumulate, so
// summing over the blocks of a split gives the full gradients. Queries with lse = -inf contribute
// nothing. Same preconditions as AttentionForwardBlock.
void AttentionBackwardBlock(float* dq, float* dk, float* dv, const float* q, const float* k,
                            const float* v, const float* d_o, const float* lse, const float* delta,
                            const int32_t* q_pos, const int32_t* kv_pos,
                            const AttentionShape& shape, bool causal, float scale);

// Self-attention in one block: positions 0..S-1 for queries and keys. o, lse overwritten.
// REQUIRES: shape.q_len == shape.kv_len.
void AttentionForward(float* o, float* lse, const float* q, const float* k, const float* v,
                      const AttentionShape& shape, bool causal, float scale);

// Backward of AttentionForward: dq, dk, dv accumulate. o and lse as returned by the forward.
void AttentionBackward(float* dq, float* dk, float* dv, const float* q, const float* k,
                       const float* v, const float* o, const float* d_o, const float* lse,
                       const AttentionShape& shape, bool causal, float scale);

}  // namespace shardsim::runtime
