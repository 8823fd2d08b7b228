// SwiGLU elementwise forward and backward.
#include "runtime/swiglu.h"

#include <cstdint>

#include "core/error.h"
#include "runtime/vector_math.h"

namespace shardsim::runtime {
namespace {

SHARDSIM_VECTOR_CLONES
void SwigluForwardLoop(float* h, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float a = gate[i];
    const float sig = 1.0f / (1.0f + FastExp(-a));
    h[i] = a * sig * up[i];
  }
}

// d silu(a)/da = sig(a) * (1 + a * (1 - sig(a))).
SHARDSIM_VECTOR_CLONES
void SwigluBackwardLoop(float* __restrict d_gate, float* __restrict d_up, const float* dh,
                        const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float a = gate[i];
    const float sig = 1.0f / (1.0f + FastExp(-a));
    d_up[i] = dh[i] * a * sig;
    d_gate[i] = dh[i] * up[i] * sig * (1.0f + a * (1.0f - sig));
  }
}

}  // namespace

void SwigluForward(float* h, const float* gate, const float* up, int t, int f) {
  SHARDSIM_CHECK(t >= 0 && f >= 0, "SwigluForward: negative size");
  SwigluForwardLoop(h, gate, up, int64_t{t} * f);
}

void SwigluBackward(float* d_gate, float* d_up, const float* dh, const float* gate, const float* up,
                    int t, int f) {
  SHARDSIM_CHECK(t >= 0 && f >= 0, "SwigluBackward: negative size");
  SwigluBackwardLoop(d_gate, d_up, dh, gate, up, int64_t{t} * f);
}

}  // namespace shardsim::runtime
