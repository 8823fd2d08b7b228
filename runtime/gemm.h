// Row-major fp32 matrix products on cblas_sgemm. This is the only file that sees cblas.h, so a
// different BLAS (or a GPU path) changes one .cc file.
#pragma once

#include <string>

namespace shardsim::runtime {

enum class Transpose { kNo, kYes };

// C[M,N] = alpha * op(A)[M,I] op(B)[I,N] + beta * C, every matrix row-major and dense.
// A is stored [M,I] (kNo) or [I,M] (kYes); B is stored [I,N] (kNo) or [N,I] (kYes); I = `inner`.
// With beta = 0, C is overwritten and its old contents are never read (NaN there is harmless).
// REQUIRES: m, n, inner >= 0.
void Gemm(float* c, const float* a, const float* b, int m, int n, int inner, Transpose trans_a,
          Transpose trans_b, float alpha, float beta);

// As Gemm, for sub-matrices: ldc, lda, ldb are the row strides in floats of C, of A as stored and
// of B as stored (one head's columns of Q [T, H*K] have stride H*K).
// REQUIRES: each stride >= the stored row length of its matrix.
void GemmStrided(float* c, int ldc, const float* a, int lda, const float* b, int ldb, int m, int n,
                 int inner, Transpose trans_a, Transpose trans_b, float alpha, float beta);

// openblas_get_config(): the OpenBLAS build and the kernel it picked for this CPU, for the run log.
// Threads are the caller's business (OPENBLAS_NUM_THREADS=1 per MPI rank).
std::string BlasConfig();
// One BLAS thread for this process: MPI ranks each own a core (what OPENBLAS_NUM_THREADS=1 does).
void UseOneBlasThread();

}  // namespace shardsim::runtime
