#include "runtime/norm.h"

#include "runtime/layernorm.h"
#include "runtime/rmsnorm.h"

namespace shardsim::runtime {

void NormForward(NormKind kind, float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int t, int d, float eps) {
  if (kind == NormKind::kLayerNorm) {
    LayerNormForward(y, mean, rstd, x, w, b, t, d, eps);
  } else {
    RmsNormForward(y, rstd, x, w, t, d, eps);
  }
}

void NormBackward(NormKind kind, float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, const float* mean,
                  const float* rstd, int t, int d) {
  if (kind == NormKind::kLayerNorm) {
    LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, t, d);
  } else {
    RmsNormBackward(dx, dw, dy, x, w, rstd, t, d);
  }
}

}  // namespace shardsim::runtime
