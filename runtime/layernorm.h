// LayerNorm (Ba et al. 2016), as in GPT-2/GPT-3: y = (x - mean) / sqrt(var + eps) * w + b, per
// token, the variance over the row without Bessel's correction.
#pragma once

namespace shardsim::runtime {

// y [T, D] overwritten; mean [T] and rstd [T] = 1 / sqrt(var + eps) overwritten (saved for
// backward); x [T, D]; w, b [D]. REQUIRES: t >= 0, d > 0, eps >= 0.
void LayerNormForward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int t, int d, float eps);

// dx [T, D] += dL/dx (accumulates: the norm sits on the residual stream); dw, db [D] += dL/dw,
// dL/db (accumulate; each skipped when null). dy [T, D]; x, w, mean, rstd as given to and returned
// by forward.
void LayerNormBackward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, const float* mean, const float* rstd, int t,
                       int d);

}  // namespace shardsim::runtime
