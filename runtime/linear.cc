// Linear layer without bias: Y = X W and its gradients, on Gemm.
#include "runtime/linear.h"

#include "runtime/gemm.h"

namespace shardsim::runtime {

void LinearForward(float* y, const float* x, const float* w, int t, int in, int out) {
  Gemm(y, x, w, t, out, in, Transpose::kNo, Transpose::kNo, 1.0f, 0.0f);
}

void LinearBackward(float* dx, float* dw, const float* dy, const float* x, const float* w, int t,
                    int in, int out) {
  if (dx != nullptr) Gemm(dx, dy, w, t, in, out, Transpose::kNo, Transpose::kYes, 1.0f, 1.0f);
  if (dw != nullptr) Gemm(dw, x, dy, in, out, t, Transpose::kYes, Transpose::kNo, 1.0f, 1.0f);
}

void AddRowBias(float* y, const float* b, int t, int n) {
  for (int i = 0; i < t; ++i) {
    float* row = y + int64_t{i} * n;
    for (int j = 0; j < n; ++j) row[j] += b[j];
  }
}

void AddColumnSums(float* db, const float* dy, int t, int n) {
  for (int i = 0; i < t; ++i) {
    const float* row = dy + int64_t{i} * n;
    for (int j = 0; j < n; ++j) db[j] += row[j];
  }
}

}  // namespace shardsim::runtime
