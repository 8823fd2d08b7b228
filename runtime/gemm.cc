// Row-major fp32 matrix products on cblas_sgemm.
#include "runtime/gemm.h"

#include <cblas.h>

#include <algorithm>

#include "core/error.h"

namespace shardsim::runtime {

void Gemm(float* c, const float* a, const float* b, int m, int n, int inner, Transpose trans_a,
          Transpose trans_b, float alpha, float beta) {
  const int lda = trans_a == Transpose::kNo ? inner : m;
  const int ldb = trans_b == Transpose::kNo ? n : inner;
  GemmStrided(c, n, a, lda, b, ldb, m, n, inner, trans_a, trans_b, alpha, beta);
}

void GemmStrided(float* c, int ldc, const float* a, int lda, const float* b, int ldb, int m, int n,
                 int inner, Transpose trans_a, Transpose trans_b, float alpha, float beta) {
  SHARDSIM_CHECK(m >= 0 && n >= 0 && inner >= 0, "negative matrix size");
  const bool ta = trans_a == Transpose::kYes;
  const bool tb = trans_b == Transpose::kYes;
  SHARDSIM_CHECK(ldc >= n && lda >= (ta ? m : inner) && ldb >= (tb ? inner : n),
                 "a row stride is shorter than its row");
  if (m == 0 || n == 0) return;
  // BLAS requires every leading dimension >= 1 even when the matrix is empty.
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              inner, alpha, a, std::max(lda, 1), b, std::max(ldb, 1), beta, c, std::max(ldc, 1));
}

std::string BlasConfig() { return openblas_get_config(); }

void UseOneBlasThread() { openblas_set_num_threads(1); }

}  // namespace shardsim::runtime
