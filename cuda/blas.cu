#include "cuda/blas.h"

#include <cuda_bf16.h>

#include "cuda/cuda_check.h"

namespace shardsim::cuda {
namespace {

cudaDataType_t CudaType(DType t) { return t == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF; }
cublasOperation_t CublasOp(Op op) { return op == Op::kNo ? CUBLAS_OP_N : CUBLAS_OP_T; }

}  // namespace

int64_t SizeOf(DType t) { return t == DType::kF32 ? 4 : 2; }

Blas::Blas() {
  Check(cublasCreate(&handle_), "cublasCreate");
  // Full fp32 products for fp32 inputs (no TF32); bf16 inputs use the tensor cores regardless.
  Check(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}

void Blas::SetStream(cudaStream_t stream) { Check(cublasSetStream(handle_, stream), "cublasSetStream"); }

Blas::~Blas() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

// Row-major C[M,N] is column-major C^T[N,M] = op(B)^T op(A)^T: cuBLAS sees B first, then A, and a
// row-major matrix stored as is reads as its own transpose.
void Blas::Gemm(const OutRef& c, const MatRef& a, const MatRef& b, int64_t m, int64_t n, int64_t inner, float alpha,
                float beta, int64_t batch) {
  if (m == 0 || n == 0) return;
  const cublasComputeType_t compute =
      a.type == DType::kF32 && b.type == DType::kF32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  Check(cublasGemmStridedBatchedEx(handle_, CublasOp(b.op), CublasOp(a.op), static_cast<int>(n), static_cast<int>(m),
                                   static_cast<int>(inner), &alpha, b.data, CudaType(b.type), static_cast<int>(b.ld),
                                   b.batch_stride, a.data, CudaType(a.type), static_cast<int>(a.ld), a.batch_stride,
                                   &beta, c.data, CudaType(c.type), static_cast<int>(c.ld), c.batch_stride,
                                   static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

}  // namespace shardsim::cuda
