// Linear layer without bias, weights stored [in, out]: Y[T,out] = X[T,in] W[in,out].
// Tensor parallelism calls it unchanged on a column shard W[in, out/t] or a row shard W[in/t, out].
#pragma once

namespace shardsim::runtime {

// y [T, out] = x [T, in] w [in, out]; y overwritten. REQUIRES: sizes >= 0.
void LinearForward(float* y, const float* x, const float* w, int t, int in, int out);

// dx [T, in] += dy [T, out] w^T, skipped when dx is null (the first layer needs no dx);
// dw [in, out] += x^T dy, skipped when dw is null. Both accumulate.
void LinearBackward(float* dx, float* dw, const float* dy, const float* x, const float* w, int t,
                    int in, int out);

// y [T, n] += b [n] on every row (a linear's bias).
void AddRowBias(float* y, const float* b, int t, int n);

// db [n] += the sum over rows of dy [T, n] (a bias's gradient; accumulates).
void AddColumnSums(float* db, const float* dy, int t, int n);

}  // namespace shardsim::runtime
