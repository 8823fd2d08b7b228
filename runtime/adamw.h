// AdamW (Loshchilov & Hutter 2019, PyTorch's form: decoupled weight decay, bias correction) over a
// flat parameter array, and the pieces of global-norm gradient clipping.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

struct AdamWConfig {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // call with 0 for arrays that take no decay (norm weights)
};

// One step, in place, for n parameters with gradient grad [n] and moments m, v [n] (start at 0):
//   p -= lr * wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).
// REQUIRES: step >= 1 (the 1-based count of steps taken including this one), n >= 0.
void AdamWStep(float* param, float* m, float* v, const float* grad, int64_t n,
               const AdamWConfig& config, int64_t step);

// Returns sum(grad^2) accumulated in double: the caller sums it over ranks and arrays, then takes
// the square root for the global gradient norm.
double GradSquaredSum(const float* grad, int64_t n);

// Returns the clipping factor min(1, max_norm / (sqrt(grad_sq_sum) + 1e-6)) (PyTorch's
// clip_grad_norm_). REQUIRES: grad_sq_sum >= 0, max_norm > 0.
float ClipFactor(double grad_sq_sum, float max_norm);

// x [n] *= factor, in place.
void ScaleInPlace(float* x, int64_t n, float factor);

}  // namespace shardsim::runtime
