// RMSNorm (Zhang & Sennrich 2019), as in LLaMA: y = x / sqrt(mean(x^2) + eps) * w, per token.
#pragma once

namespace shardsim::runtime {

// y [T, D] overwritten; rstd [T] = 1 / sqrt(mean_d(x^2) + eps) overwritten (saved for backward);
// x [T, D]; w [D]. REQUIRES: t >= 0, d > 0, eps >= 0.
void RmsNormForward(float* y, float* rstd, const float* x, const float* w, int t, int d, float eps);

// dx [T, D] += dL/dx (accumulates: the norm sits on the residual stream); dw [D] += dL/dw
// (accumulates; skipped when null). dy [T, D]; x, w, rstd as given to and returned by forward.
void RmsNormBackward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                     const float* rstd, int t, int d);

}  // namespace shardsim::runtime
