// The transformer's elementwise and row-wise kernels on the GPU, the CUDA counterparts of
// runtime/{rmsnorm,rope,swiglu,embedding,cross_entropy,adamw}.h with the same formulas. Every
// kernel runs on the default stream; arithmetic is fp32 whatever the storage type T (float or
// __nv_bfloat16: activations), and parameters, their gradients and optimizer state are fp32.
// Sizes are in elements; shapes are written as in the CPU headers.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

namespace shardsim::cuda {

using bf16 = __nv_bfloat16;

// out [n] = in [n] converted (round to nearest for bf16).
template <typename Tout, typename Tin>
void Convert(Tout* out, const Tin* in, int64_t n);
// y [n] += x [n], summed in fp32 and rounded once to T.
template <typename T>
void AddInPlace(T* y, const float* x, int64_t n);
// x [n] = normal(0, stddev) draws keyed by (seed, stream, index): counter-based, so the same
// tensor comes out whatever the launch shape; or x [n] = value.
void FillNormal(float* x, int64_t n, uint64_t seed, uint64_t stream, float stddev);
void Fill(float* x, int64_t n, float value);

// out [T, D] = table rows of ids; d_table += d_out rows scattered (atomic adds). The table holds
// rows [row0, row0 + rows) of the vocabulary (all of it: 0, V; a vocabulary-parallel shard: its
// block): ids outside read zeros and scatter nothing, so the shards' outputs sum to the lookup.
template <typename T>
void EmbeddingForward(T* out, const int32_t* ids, const float* table, int t, int d, int row0, int rows);
void EmbeddingBackward(float* d_table, const float* d_out, const int32_t* ids, int t, int d, int row0, int rows);

// RMSNorm: y [T, D] = x / sqrt(mean(x^2) + eps) * w; rstd [T] saved. Backward: dx [T, D] += and
// dw [D] += from dy [T, D] (fp32, the products' output).
template <typename T>
void RmsNormForward(T* y, float* rstd, const T* x, const float* w, int t, int d, float eps);
template <typename T>
void RmsNormBackward(float* dx, float* dw, const float* dy, const T* x, const float* w, const float* rstd, int t, int d);

// RoPE, rotate-half pairing, in place on x [T, N, K]; positions [T]. Backward: the inverse rotation.
template <typename T>
void RopeForward(T* x, const int32_t* positions, int t, int n_heads, int head_dim, float theta);
template <typename T>
void RopeBackward(T* dx, const int32_t* positions, int t, int n_heads, int head_dim, float theta);

// SwiGLU: h = silu(gate) * up; backward writes d_gate, d_up from dh. All [T, F].
template <typename T>
void SwigluForward(T* h, const T* gate, const T* up, int64_t n);
template <typename T>
void SwigluBackward(T* d_gate, T* d_up, const T* dh, const T* gate, const T* up, int64_t n);

// Softmax cross-entropy: returns sum over tokens of -log softmax(logits)[target] / normaliser and
// writes dlogits [T, V] = (softmax - onehot) / normaliser (may alias logits). Negative targets
// are ignored. Synchronises (the loss comes back to the host).
double CrossEntropy(float* dlogits, const float* logits, const int32_t* targets, int t, int v, double normaliser);

// AdamW as runtime/adamw.h (PyTorch's form) on grad x grad_scale (the clipping factor), in place
// and in one pass over the tensors, as fused optimizers run it (apex's FusedAdam under
// Megatron-LM): it also writes the updated parameters' bf16 copy to `weights` (unless null) and
// zeroes the gradient for the next step's accumulation.
void AdamW(float* param, float* m, float* v, float* grad, int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
           int64_t step, float grad_scale = 1.0f, __nv_bfloat16* weights = nullptr);
// sum(x^2) in fp64 (synchronises).
double SquaredSum(const float* x, int64_t n);

}  // namespace shardsim::cuda
