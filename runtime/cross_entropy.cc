// Softmax cross-entropy: per row, max, sum of exp, loss (accumulated in double) and gradient.
#include "runtime/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/vector_math.h"

namespace shardsim::runtime {
namespace {

// out [n] = exp(row - shift); out may alias row.
SHARDSIM_VECTOR_CLONES
void ExpRow(float* out, const float* row, float shift, int n) {
  for (int j = 0; j < n; ++j) out[j] = FastExp(row[j] - shift);
}

}  // namespace

double CrossEntropyForwardBackward(float* dlogits, const float* logits, const int32_t* targets,
                                   int t, int v, double normaliser) {
  SHARDSIM_CHECK(t >= 0 && v > 0 && normaliser > 0.0, "CrossEntropy: bad sizes or normaliser");
  std::vector<float> scratch(dlogits == nullptr ? v : 0);
  double loss = 0.0;
  for (int i = 0; i < t; ++i) {
    const float* row = logits + int64_t{i} * v;
    float* out = dlogits != nullptr ? dlogits + int64_t{i} * v : scratch.data();
    const int32_t target = targets[i];
    SHARDSIM_CHECK(target < v, "CrossEntropy: target " + std::to_string(target) +
                                   " outside vocab " + std::to_string(v));
    if (target < 0) {
      if (dlogits != nullptr) std::fill_n(out, v, 0.0f);
      continue;
    }
    const float target_logit = row[target];  // read before `out` may overwrite it
    const float m = RowMax(row, v);
    ExpRow(out, row, m, v);
    const double sum = RowSum(out, v);
    loss += std::log(sum) + m - target_logit;
    if (dlogits != nullptr) {
      const float factor = static_cast<float>(1.0 / (sum * normaliser));
      for (int j = 0; j < v; ++j) out[j] *= factor;
      out[target] -= static_cast<float>(1.0 / normaliser);
    }
  }
  return loss / normaliser;
}

void VocabShardRowMax(float* row_max, const float* logits, int t, int vl) {
  SHARDSIM_CHECK(t >= 0 && vl > 0, "VocabShardRowMax: bad sizes");
  for (int i = 0; i < t; ++i) row_max[i] = RowMax(logits + int64_t{i} * vl, vl);
}

void VocabShardExp(float* probs, float* sums, const float* logits, const float* row_max, const int32_t* targets, int t, int vl, int col0) {
  SHARDSIM_CHECK(t >= 0 && vl > 0 && col0 >= 0, "VocabShardExp: bad sizes");
  for (int i = 0; i < t; ++i) {
    const float* row = logits + int64_t{i} * vl;
    const int local = targets[i] - col0;
    // Read before `probs` may overwrite the row.
    sums[2 * i + 1] = targets[i] >= 0 && local >= 0 && local < vl ? row[local] : 0.0f;
    float* out = probs + int64_t{i} * vl;
    ExpRow(out, row, row_max[i], vl);
    sums[2 * i] = static_cast<float>(RowSum(out, vl));
  }
}

double VocabShardLoss(const float* sums, const float* row_max, const int32_t* targets, int t, double normaliser) {
  SHARDSIM_CHECK(normaliser > 0.0, "VocabShardLoss: normaliser");
  double loss = 0.0;
  for (int i = 0; i < t; ++i) {
    if (targets[i] < 0) continue;
    loss += std::log(static_cast<double>(sums[2 * i])) + row_max[i] - sums[2 * i + 1];
  }
  return loss / normaliser;
}

void VocabShardLossBackward(float* dlogits, const float* probs, const float* sums, const int32_t* targets, int t, int vl, int col0,
                            double normaliser) {
  for (int i = 0; i < t; ++i) {
    float* out = dlogits + int64_t{i} * vl;
    const float* p = probs + int64_t{i} * vl;
    if (targets[i] < 0) {
      std::fill_n(out, vl, 0.0f);
      continue;
    }
    const float factor = static_cast<float>(1.0 / (static_cast<double>(sums[2 * i]) * normaliser));
    for (int j = 0; j < vl; ++j) out[j] = p[j] * factor;
    const int local = targets[i] - col0;
    if (local >= 0 && local < vl) out[local] -= static_cast<float>(1.0 / normaliser);
  }
}

}  // namespace shardsim::runtime
