// Softmax cross-entropy over the vocabulary, loss and gradient in one pass.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// logits [T, V]; targets [T] in [0, V), or negative to ignore the token (no loss, zero gradient).
// Returns sum over tokens of -log softmax(logits)[target], divided by `normaliser` (pass the global
// token count, so the losses of sharded runs add up to the single-rank loss).
// If dlogits is not null, writes dlogits [T, V] = (softmax(logits) - onehot(target)) / normaliser,
// overwritten; dlogits may alias logits. Numerically stable (max subtracted).
// REQUIRES: t >= 0, v > 0, normaliser > 0, targets < V (checked).
double CrossEntropyForwardBackward(float* dlogits, const float* logits, const int32_t* targets,
                                   int t, int v, double normaliser);

// Vocabulary-parallel softmax cross-entropy (Megatron-LM's vocab_parallel_cross_entropy) in
// steps around the tensor group's two reductions. logits [T, Vl] are columns [col0, col0 + Vl) of
// the [T, V] logits; targets [T] in [0, V), or negative to ignore the token.
// 1. row_max [T] = the shard's row maxima; the caller all-reduces them with max.
void VocabShardRowMax(float* row_max, const float* logits, int t, int vl);
// 2. probs [T, Vl] = exp(logits - row_max) (may alias logits); sums [T, 2] = per row the sum of the
//    exponentials and the target's logit when it falls in the shard (else 0); the caller
//    all-reduces sums with sum.
void VocabShardExp(float* probs, float* sums, const float* logits, const float* row_max, const int32_t* targets, int t, int vl, int col0);
// 3. Returns sum over tokens of log(sum) + max - target logit, divided by `normaliser`.
double VocabShardLoss(const float* sums, const float* row_max, const int32_t* targets, int t, double normaliser);
// Backward: dlogits [T, Vl] = (probs / sum - onehot(target)) / normaliser, zero rows for ignored
// tokens; may alias probs.
void VocabShardLossBackward(float* dlogits, const float* probs, const float* sums, const int32_t* targets, int t, int vl, int col0,
                            double normaliser);

}  // namespace shardsim::runtime
