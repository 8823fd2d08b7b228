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

}  // namespace shardsim::runtime
