// RMSNorm forward and backward; row reductions in double (D is small next to the matmuls).
#include "runtime/rmsnorm.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace shardsim::runtime {

void RmsNormForward(float* y, float* rstd, const float* x, const float* w, int t, int d,
                    float eps) {
  SHARDSIM_CHECK(t >= 0 && d > 0 && eps >= 0.0f, "RmsNormForward: bad sizes or eps");
  for (int i = 0; i < t; ++i) {
    const float* xr = x + int64_t{i} * d;
    float* yr = y + int64_t{i} * d;
    double sum_sq = 0.0;
    for (int j = 0; j < d; ++j) sum_sq += double{xr[j]} * xr[j];
    const float r = static_cast<float>(1.0 / std::sqrt(sum_sq / d + eps));
    rstd[i] = r;
    for (int j = 0; j < d; ++j) yr[j] = xr[j] * r * w[j];
  }
}

// With g = dy * w: dx = r * g - r^3 / D * x * sum(g * x).
void RmsNormBackward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                     const float* rstd, int t, int d) {
  SHARDSIM_CHECK(t >= 0 && d > 0, "RmsNormBackward: bad sizes");
  for (int i = 0; i < t; ++i) {
    const float* xr = x + int64_t{i} * d;
    const float* dyr = dy + int64_t{i} * d;
    float* dxr = dx + int64_t{i} * d;
    const float r = rstd[i];
    double dot = 0.0;
    for (int j = 0; j < d; ++j) dot += double{dyr[j]} * w[j] * xr[j];
    const float c = static_cast<float>(dot * r * r * r / d);
    for (int j = 0; j < d; ++j) dxr[j] += r * dyr[j] * w[j] - c * xr[j];
    if (dw != nullptr) {
      for (int j = 0; j < d; ++j) dw[j] += dyr[j] * xr[j] * r;
    }
  }
}

}  // namespace shardsim::runtime
