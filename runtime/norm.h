// The model's norm, one call for both kinds a ModelSpec names: RMSNorm (LLaMA; weight only) and
// LayerNorm (GPT; weight and bias, and the row means kept for backward).
#pragma once

#include "core/model_spec.h"

namespace shardsim::runtime {

// y [T, D] = norm(x [T, D]) with weight w [D] and, for LayerNorm, bias b [D]; rstd [T] and, for
// LayerNorm, mean [T] written for backward (mean and b unused by RMSNorm).
void NormForward(NormKind kind, float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int t, int d, float eps);

// dx [T, D] += dL/dx; dw [D] += dL/dw; db [D] += dL/db (LayerNorm; db may be null).
void NormBackward(NormKind kind, float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, const float* mean,
                  const float* rstd, int t, int d);

}  // namespace shardsim::runtime
