// Rotary position embedding, rotate-half pairing; angles in double so every rank computes the
// same rotation for the same position.
#include "runtime/rope.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace shardsim::runtime {
namespace {

// sign = +1 rotates by +angle (forward), -1 by -angle (backward).
void Rotate(float* y, const float* x, const int32_t* positions, int t, int n_heads, int head_dim,
            float theta, float sign) {
  SHARDSIM_CHECK(t >= 0 && n_heads > 0 && head_dim > 0 && head_dim % 2 == 0,
                 "Rope: head_dim must be even and sizes positive");
  SHARDSIM_CHECK(theta > 0.0f, "Rope: theta must be positive");
  const int half = head_dim / 2;
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
  }
  std::vector<float> cos_pos(half), sin_pos(half);
  for (int tok = 0; tok < t; ++tok) {
    SHARDSIM_CHECK(positions[tok] >= 0, "Rope: negative position");
    for (int i = 0; i < half; ++i) {
      const double angle = positions[tok] * inv_freq[i];
      cos_pos[i] = static_cast<float>(std::cos(angle));
      sin_pos[i] = sign * static_cast<float>(std::sin(angle));
    }
    for (int h = 0; h < n_heads; ++h) {
      const int64_t base = (int64_t{tok} * n_heads + h) * head_dim;
      const float* xr = x + base;
      float* yr = y + base;
      for (int i = 0; i < half; ++i) {
        const float a = xr[i];
        const float b = xr[i + half];
        yr[i] = a * cos_pos[i] - b * sin_pos[i];
        yr[i + half] = b * cos_pos[i] + a * sin_pos[i];
      }
    }
  }
}

}  // namespace

void RopeForward(float* y, const float* x, const int32_t* positions, int t, int n_heads,
                 int head_dim, float theta) {
  Rotate(y, x, positions, t, n_heads, head_dim, theta, 1.0f);
}

void RopeBackward(float* dx, const float* dy, const int32_t* positions, int t, int n_heads,
                  int head_dim, float theta) {
  Rotate(dx, dy, positions, t, n_heads, head_dim, theta, -1.0f);
}

}  // namespace shardsim::runtime
