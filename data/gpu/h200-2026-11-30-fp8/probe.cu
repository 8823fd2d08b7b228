#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
// Variants of an FP8 cublasLtMatmul on this GPU: which runs.
int main() {
  cublasLtHandle_t h; cublasLtCreate(&h);
  printf("cublasLt version %zu\n", cublasLtGetVersion());
  const int m = 256, n = 256, k = 256;
  void *A, *B, *C, *D, *W, *S, *Amax;
  cudaMalloc(&A, m*k); cudaMalloc(&B, k*n); cudaMalloc(&C, m*n*2); cudaMalloc(&D, m*n*2); cudaMalloc(&W, 32<<20); cudaMalloc(&S, 64); cudaMalloc(&Amax, 64);
  cudaMemset(A, 0, m*k); cudaMemset(B, 0, k*n); cudaMemset(C, 0, m*n*2);
  float ones[8] = {1,1,1,1,1,1,1,1}; cudaMemcpy(S, ones, 32, cudaMemcpyHostToDevice);
  for (int variant = 0; variant < 6; ++variant) {
    cublasLtMatmulDesc_t d; cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn);
    float* sa = (float*)S; float* sb = (float*)S + 1; float* sc = (float*)S + 2; float* sd = (float*)S + 3;
    if (variant != 1) {
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
    }
    cudaDataType_t dt = variant == 2 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    if (variant == 2) {
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, &sc, sizeof sc);
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &sd, sizeof sd);
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &Amax, sizeof Amax);
    }
    if (variant == 3) { int8_t fa = 1; cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fa, sizeof fa); }
    cudaDataType_t ct = variant == 4 ? CUDA_R_32F : CUDA_R_16BF;
    if (variant == 4) dt = CUDA_R_32F;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k);
    cublasLtMatrixLayoutCreate(&lc, ct, m, n, m);
    cublasLtMatrixLayoutCreate(&ld, dt, m, n, m);
    cublasLtMatmulPreference_t p; cublasLtMatmulPreferenceCreate(&p);
    size_t ws = 32 << 20; cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t r[8] = {}; int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, d, la, lb, lc, ld, p, 8, r, &found);
    float alpha = 1, beta = 0;
    cublasStatus_t ms = CUBLAS_STATUS_NOT_SUPPORTED;
    if (found > 0) ms = cublasLtMatmul(h, d, &alpha, A, la, B, lb, &beta, C, lc, variant == 5 ? C : D, ld, &r[0].algo, W, ws, 0);
    cublasStatus_t ms_null = found > 0 ? cublasLtMatmul(h, d, &alpha, A, la, B, lb, &beta, C, lc, D, ld, nullptr, W, ws, 0) : CUBLAS_STATUS_NOT_SUPPORTED;
    cudaError_t e = cudaDeviceSynchronize();
    printf("variant %d: heuristic %d found %d; matmul(algo) %d (%s); matmul(no algo) %d; sync %s\n", variant, hs, found, ms, cublasGetStatusString(ms), ms_null, cudaGetErrorString(e));
  }
  return 0;
}
