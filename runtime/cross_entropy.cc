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

}  // namespace shardsim::runtime
