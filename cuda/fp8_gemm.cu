#include "cuda/fp8_gemm.h"

#include <string>

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
  const std::string shape = std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k);
  if (m % 16 != 0 || n % 16 != 0 || k % 16 != 0) throw CudaError("FP8 product " + shape + ": cuBLASLt needs multiples of 16");
  a_ = DeviceBuffer<__nv_fp8_e4m3>(m * k);
  b_ = DeviceBuffer<__nv_fp8_e4m3>(k * n);
  c_ = DeviceBuffer<__nv_bfloat16>(m * n);
  FillFp8<<<1024, 256>>>(a_.data(), a_.size(), 11);
  FillFp8<<<1024, 256>>>(b_.data(), b_.size(), 12);
  CheckLaunch("FillFp8");
  scales_ = DeviceBuffer<float>(2);
  const float ones[2] = {1.0f, 1.0f};  // per-tensor scales, as a recipe passes them
  Check(cudaMemcpy(scales_.data(), ones, sizeof ones, cudaMemcpyHostToDevice), "cudaMemcpy");
  workspace_ = DeviceBuffer<unsigned char>(static_cast<int64_t>(kWorkspaceBytes));
  CheckLt(cublasLtCreate(&handle_), "cublasLtCreate");
  // Column-major, cuBLASLt makes D[n,m] = X^T Y with X stored [k,n] and read transposed (FP8's
  // TN rule) and Y stored [k,m]: the row-major product's FLOPs and bytes.
  CheckLt(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
  CheckLt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof transposed), "cublasLtMatmulDescSetAttribute");
  CheckLt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain), "cublasLtMatmulDescSetAttribute");
  const float* scale_x = scales_.data();
  const float* scale_y = scales_.data() + 1;
  CheckLt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_x, sizeof scale_x), "cublasLtMatmulDescSetAttribute");
  CheckLt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_y, sizeof scale_y), "cublasLtMatmulDescSetAttribute");
  CheckLt(cublasLtMatrixLayoutCreate(&la_, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k), "cublasLtMatrixLayoutCreate");
  CheckLt(cublasLtMatrixLayoutCreate(&lb_, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k), "cublasLtMatrixLayoutCreate");
  CheckLt(cublasLtMatrixLayoutCreate(&lc_, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n), "cublasLtMatrixLayoutCreate");
  cublasLtMatmulPreference_t preference = nullptr;
  CheckLt(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  CheckLt(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes, sizeof kWorkspaceBytes),
          "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, desc_, la_, lb_, lc_, lc_, preference, 1, &heuristic, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  CheckLt(status, "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) throw CudaError("cuBLASLt offers no FP8 algorithm for " + shape);
  algo_ = heuristic.algo;
}

Fp8Product::~Fp8Product() {
  if (lc_ != nullptr) cublasLtMatrixLayoutDestroy(lc_);
  if (lb_ != nullptr) cublasLtMatrixLayoutDestroy(lb_);
  if (la_ != nullptr) cublasLtMatrixLayoutDestroy(la_);
  if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

std::vector<float> Fp8Product::Output() const {
  std::vector<__nv_bfloat16> raw(static_cast<size_t>(c_.size()));
  Check(cudaMemcpy(raw.data(), c_.data(), c_.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::vector<float> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) out[i] = __bfloat162float(raw[i]);
  return out;
}

void Fp8Product::Run() {
  const float alpha = 1.0f, beta = 0.0f;
  CheckLt(cublasLtMatmul(handle_, desc_, &alpha, b_.data(), la_, a_.data(), lb_, &beta, c_.data(), lc_, c_.data(), lc_, &algo_, workspace_.data(),
                         kWorkspaceBytes, nullptr),
          "cublasLtMatmul");
}

}  // namespace shardsim::cuda
