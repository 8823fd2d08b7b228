// LayerNorm forward and backward; row reductions in double (D is small next to the matmuls).
#include "runtime/layernorm.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace shardsim::runtime {

void LayerNormForward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int t, int d, float eps) {
  SHARDSIM_CHECK(t >= 0 && d > 0 && eps >= 0.0f, "LayerNormForward: bad sizes or eps");
  for (int i = 0; i < t; ++i) {
    const float* xr = x + int64_t{i} * d;
    float* yr = y + int64_t{i} * d;
    double sum = 0.0;
    for (int j = 0; j < d; ++j) sum += xr[j];
    const double mu = sum / d;
    double var = 0.0;
    for (int j = 0; j < d; ++j) var += (xr[j] - mu) * (xr[j] - mu);
    const float r = static_cast<float>(1.0 / std::sqrt(var / d + eps));
    mean[i] = static_cast<float>(mu);
    rstd[i] = r;
    for (int j = 0; j < d; ++j) yr[j] = (xr[j] - mean[i]) * r * w[j] + b[j];
  }
}

// With xhat = (x - mean) r and g = dy * w: dx = r (g - mean(g) - xhat mean(g xhat)).
void LayerNormBackward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, const float* mean, const float* rstd, int t,
                       int d) {
  SHARDSIM_CHECK(t >= 0 && d > 0, "LayerNormBackward: bad sizes");
  for (int i = 0; i < t; ++i) {
    const float* xr = x + int64_t{i} * d;
    const float* dyr = dy + int64_t{i} * d;
    float* dxr = dx + int64_t{i} * d;
    const float r = rstd[i], mu = mean[i];
    double sum_g = 0.0, sum_gx = 0.0;
    for (int j = 0; j < d; ++j) {
      const double g = double{dyr[j]} * w[j];
      sum_g += g;
      sum_gx += g * (xr[j] - mu) * r;
    }
    const float mean_g = static_cast<float>(sum_g / d), mean_gx = static_cast<float>(sum_gx / d);
    for (int j = 0; j < d; ++j) {
      const float xhat = (xr[j] - mu) * r;
      dxr[j] += r * (dyr[j] * w[j] - mean_g - xhat * mean_gx);
    }
    if (dw != nullptr) {
      for (int j = 0; j < d; ++j) dw[j] += dyr[j] * (xr[j] - mu) * r;
    }
    if (db != nullptr) {
      for (int j = 0; j < d; ++j) db[j] += dyr[j];
    }
  }
}

}  // namespace shardsim::runtime
