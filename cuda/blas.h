// Row-major matrix products on cuBLAS, with the same conventions as runtime/gemm.h (C[M,N] =
// alpha op(A) op(B) + beta C; A stored [M,I] or [I,M], B stored [I,N] or [N,I]; strides in
// elements). Inputs are fp32 or bf16, the output fp32 or bf16, and the products always accumulate
// in fp32. fp32 inputs use full fp32 arithmetic: TF32 is switched off, so the CUDA path can be
// compared with the CPU reference to 1e-5.
#pragma once

#include <cstdint>

#include <cublas_v2.h>

namespace shardsim::cuda {

enum class DType { kF32, kBf16 };
enum class Op { kNo, kYes };

int64_t SizeOf(DType t);

struct MatRef {
  const void* data = nullptr;
  DType type = DType::kF32;
  int64_t ld = 0;  // row stride of the matrix as stored
  Op op = Op::kNo;
  int64_t batch_stride = 0;  // elements between consecutive matrices of a batch (0: the same one)
};

struct OutRef {
  void* data = nullptr;
  DType type = DType::kF32;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

class Blas {
 public:
  Blas();
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // C = alpha op(A) op(B) + beta C for `batch` independent products (strided).
  void Gemm(const OutRef& c, const MatRef& a, const MatRef& b, int64_t m, int64_t n, int64_t inner, float alpha,
            float beta, int64_t batch = 1);
  // The stream the products run on (default: the legacy default stream).
  void SetStream(cudaStream_t stream);

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace shardsim::cuda
