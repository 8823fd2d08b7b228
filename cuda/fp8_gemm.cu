#include "cuda/fp8_gemm.h"

#include <string>
#include <utility>

#include "cuda/cuda_check.h"

namespace shardsim::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

void CheckLt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw CudaError(std::string("cuBLASLt error in ") + what + ": " + cublasGetStatusString(status));
}

__global__ void FillFp8(__nv_fp8_e4m3* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = __nv_fp8_e4m3(Fp8FillValue(i, seed));
  }
}

}  // namespace

bool HasFp8TensorCores() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) return false;
  return major > 8 || (major == 8 && minor >= 9);
}

Fp8Product::Fp8Product(int64_t m, int64_t n, int64_t k) : m_(m), n_(n), k_(k) {
  // What the constructor made is released if it throws (the destructor would not run).
  try {
    const std::string shape = std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k);
    if (m % 16 != 0 || n % 16 != 0 || k % 16 != 0) throw CudaError("FP8 product " + shape + ": cuBLASLt needs multiples of 16");
    a_ = DeviceBuffer<__nv_fp8_e4m3>(m * k);
    b_ = DeviceBuffer<__nv_fp8_e4m3>(k * n);
    c_ = DeviceBuffer<__nv_bfloat16>(m * n);
    d_ = DeviceBuffer<__nv_bfloat16>(m * n);
    Check(cudaMemset(c_.data(), 0, c_.bytes()), "cudaMemset");
    FillFp8<<<1024, 256>>>(a_.data(), a_.size(), 11);
    FillFp8<<<1024, 256>>>(b_.data(), b_.size(), 12);
    CheckLaunch("FillFp8");
    workspace_ = DeviceBuffer<unsigned char>(static_cast<int64_t>(kWorkspaceBytes));
    CheckLt(cublasLtCreate(&handle_), "cublasLtCreate");
    // Column-major, cuBLASLt makes D[n,m] = X^T Y with X the row-major [n,k] W (column-major k x n,
    // read transposed: FP8's TN rule) and Y the row-major [m,k] x (column-major k x m): D is the
    // row-major [m,n] x W^T.
    CheckLt(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
    CheckLt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof transposed), "cublasLtMatmulDescSetAttribute");
    CheckLt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain), "cublasLtMatmulDescSetAttribute");
    // The per-tensor scales stay at cuBLASLt's default of 1: a recipe's scales multiply the
    // accumulator in the epilogue, as alpha does, and cost the product nothing (cuBLASLt 13.1 on
    // the lent H200 refused every product given scale pointers: data/gpu/h200-2026-11-30-fp8).
    CheckLt(cublasLtMatrixLayoutCreate(&la_, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k), "cublasLtMatrixLayoutCreate");
    CheckLt(cublasLtMatrixLayoutCreate(&lb_, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k), "cublasLtMatrixLayoutCreate");
    CheckLt(cublasLtMatrixLayoutCreate(&lc_, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t preference = nullptr;
    CheckLt(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes, sizeof kWorkspaceBytes);
    if (set != CUBLAS_STATUS_SUCCESS) cublasLtMatmulPreferenceDestroy(preference);
    CheckLt(set, "cublasLtMatmulPreferenceSetAttribute");
    // The heuristic's candidates best first; the first that runs is kept (cuBLASLt does not promise
    // that its first choice runs).
    cublasLtMatmulHeuristicResult_t heuristics[16] = {};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, desc_, la_, lb_, lc_, lc_, preference, 16, heuristics, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    CheckLt(status, "cublasLtMatmulAlgoGetHeuristic");
    cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
    for (int i = 0; i < found; ++i) {
      if (heuristics[i].state != CUBLAS_STATUS_SUCCESS) continue;
      algo_ = heuristics[i].algo;
      last = Launch();
      if (last == CUBLAS_STATUS_SUCCESS) return;
    }
    throw CudaError("cuBLASLt runs none of its " + std::to_string(found) + " FP8 algorithms for " + shape + " (last: " + cublasGetStatusString(last) + ")");
  } catch (...) {
    Release();
    throw;
  }
}

cublasStatus_t Fp8Product::Launch() {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(handle_, desc_, &alpha, b_.data(), la_, a_.data(), lb_, &beta, c_.data(), lc_, d_.data(), lc_, &algo_, workspace_.data(),
                        kWorkspaceBytes, nullptr);
}

Fp8Product::~Fp8Product() { Release(); }

void Fp8Product::Release() {
  if (lc_ != nullptr) cublasLtMatrixLayoutDestroy(std::exchange(lc_, nullptr));
  if (lb_ != nullptr) cublasLtMatrixLayoutDestroy(std::exchange(lb_, nullptr));
  if (la_ != nullptr) cublasLtMatrixLayoutDestroy(std::exchange(la_, nullptr));
  if (desc_ != nullptr) cublasLtMatmulDescDestroy(std::exchange(desc_, nullptr));
  if (handle_ != nullptr) cublasLtDestroy(std::exchange(handle_, nullptr));
}

std::vector<float> Fp8Product::Output() const {
  std::vector<__nv_bfloat16> raw(static_cast<size_t>(d_.size()));
  Check(cudaMemcpy(raw.data(), d_.data(), d_.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::vector<float> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) out[i] = __bfloat162float(raw[i]);
  return out;
}

void Fp8Product::Run() { CheckLt(Launch(), "cublasLtMatmul"); }

}  // namespace shardsim::cuda
