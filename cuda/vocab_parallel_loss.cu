#include "cuda/vocab_parallel_loss.h"

#include <cmath>

#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/device_math.cuh"

namespace shardsim::cuda {
namespace {

using device::BlockMax;
using device::BlockSum;

constexpr int kThreads = 1024;

// row_max [T]: the maximum of this rank's columns of each row.
__global__ void RowMaxKernel(float* row_max, const float* logits, int v) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * v;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, logits[base + j]);
  m = BlockMax(m, scratch);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

// sums [2T]: sum of exp(logit - max) over this rank's columns, then the target's logit where this
// rank holds its column (0 elsewhere, so the group's sum is the logit).
__global__ void RowSumsKernel(float* sums, const float* logits, const float* row_max, const int32_t* targets, int v, int col0, int t) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * v;
  const float m = row_max[blockIdx.x];
  float s = 0;
  for (int j = threadIdx.x; j < v; j += blockDim.x) s += expf(logits[base + j] - m);
  s = BlockSum(s, scratch);
  if (threadIdx.x == 0) {
    const int target = targets[blockIdx.x] - col0;
    sums[blockIdx.x] = s;
    sums[t + blockIdx.x] = target >= 0 && target < v ? logits[base + target] : 0.0f;
  }
}

__global__ void GradKernel(float* dlogits, const float* logits, const float* row_max, const float* sums, const int32_t* targets, int v,
                           int col0, float scale) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * v;
  const int global_target = targets[blockIdx.x];
  const int target = global_target - col0;
  const float m = row_max[blockIdx.x], inv = 1.0f / sums[blockIdx.x];
  for (int j = threadIdx.x; j < v; j += blockDim.x) {
    const float p = global_target >= 0 ? expf(logits[base + j] - m) * inv : 0.0f;
    dlogits[base + j] = (p - (j == target ? 1.0f : 0.0f)) * scale;
  }
}

}  // namespace

double VocabParallelCrossEntropy(float* dlogits, const float* logits, const int32_t* targets, const std::vector<int32_t>& host_targets,
                                 int t, int v, int col0, double normaliser, HostGroup& group) {
  if (t == 0) return 0.0;
  DeviceBuffer<float> row_max(t), sums(2 * static_cast<int64_t>(t));
  RowMaxKernel<<<t, kThreads>>>(row_max.data(), logits, v);
  CheckLaunch("VocabParallelCrossEntropy row maximum");
  std::vector<float> host_max = row_max.Download();
  group.Max(host_max.data(), t, "vocabulary-parallel loss: row maxima");
  row_max.Upload(host_max);
  RowSumsKernel<<<t, kThreads>>>(sums.data(), logits, row_max.data(), targets, v, col0, t);
  CheckLaunch("VocabParallelCrossEntropy row sums");
  std::vector<float> host_sums = sums.Download();
  group.Sum(host_sums.data(), 2 * static_cast<int64_t>(t), "vocabulary-parallel loss: sums of exponentials and target logits");
  sums.Upload(host_sums);
  GradKernel<<<t, kThreads>>>(dlogits, logits, row_max.data(), sums.data(), targets, v, col0, static_cast<float>(1.0 / normaliser));
  CheckLaunch("VocabParallelCrossEntropy gradient");
  double loss = 0;
  for (int i = 0; i < t; ++i) {
    if (host_targets[static_cast<size_t>(i)] < 0) continue;
    loss += (static_cast<double>(std::log(host_sums[static_cast<size_t>(i)])) + host_max[static_cast<size_t>(i)] - host_sums[static_cast<size_t>(t + i)]) /
            normaliser;
  }
  Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return loss;
}

}  // namespace shardsim::cuda
