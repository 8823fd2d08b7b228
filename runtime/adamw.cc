// AdamW step, gradient squared norm, and clipping helpers.
#include "runtime/adamw.h"

#include <cmath>

#include "core/error.h"

namespace shardsim::runtime {

void AdamWStep(float* param, float* m, float* v, const float* grad, int64_t n,
               const AdamWConfig& config, int64_t step) {
  SHARDSIM_CHECK(step >= 1 && n >= 0, "AdamWStep: step counts from 1");
  const float b1 = config.beta1;
  const float b2 = config.beta2;
  const float bias1 = static_cast<float>(1.0 - std::pow(double{b1}, static_cast<double>(step)));
  const float bias2 = static_cast<float>(1.0 - std::pow(double{b2}, static_cast<double>(step)));
  const float decay = 1.0f - config.lr * config.weight_decay;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    const float m_hat = m[i] / bias1;
    const float v_hat = v[i] / bias2;
    param[i] = param[i] * decay - config.lr * m_hat / (std::sqrt(v_hat) + config.eps);
  }
}

double GradSquaredSum(const float* grad, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double{grad[i]} * grad[i];
  return sum;
}

float ClipFactor(double grad_sq_sum, float max_norm) {
  SHARDSIM_CHECK(grad_sq_sum >= 0.0 && max_norm > 0.0f, "ClipFactor: bad arguments");
  const double factor = max_norm / (std::sqrt(grad_sq_sum) + 1e-6);
  return factor < 1.0 ? static_cast<float>(factor) : 1.0f;
}

void ScaleInPlace(float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace shardsim::runtime
