// Softmax cross-entropy over a vocabulary split by columns over a tensor-parallel group
// (Megatron-LM's vocabulary-parallel loss): each rank holds logits [T, v], columns
// [col0, col0 + v) of every row, and the group reduces three per-row figures (the maximum, the sum
// of exponentials, the target's logit) instead of gathering [T, V]. Same result as CrossEntropy
// (kernels.h) on the whole row.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/host_group.h"

namespace shardsim::cuda {

// Returns sum over tokens of -log softmax(row)[target] / normaliser (the same on every rank) and
// writes dlogits [T, v] = (softmax - onehot) / normaliser for this rank's columns (may alias
// logits). `targets` on the device, `host_targets` the same on the host; negative targets are
// ignored. Synchronises.
double VocabParallelCrossEntropy(float* dlogits, const float* logits, const int32_t* targets, const std::vector<int32_t>& host_targets,
                                 int t, int v, int col0, double normaliser, HostGroup& group);

}  // namespace shardsim::cuda
