// Turning CUDA and cuBLAS status codes into exceptions that name the call and the error, so the
// tools print one line ("CUDA error in cudaMalloc: out of memory") and exit non-zero.
#pragma once

#include <stdexcept>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace shardsim::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw CudaError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status));
  }
}

inline void Check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw CudaError(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusString(status));
  }
}

// After a kernel launch: a bad launch configuration shows here, a fault at the next sync.
inline void CheckLaunch(const char* kernel) { Check(cudaGetLastError(), kernel); }

}  // namespace shardsim::cuda
