#include "cuda/gpu_calibrate.h"

#include <algorithm>
#include <functional>

#include "cuda/attention.h"
#include "cuda/blas.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/fp8_gemm.h"
#include "cuda/kernels.h"

namespace shardsim::cuda {
namespace {

// Seconds per call of `fn`: two warm-up calls, one timed call to size the batch, then a batch of
// calls lasting about 0.2 s between CUDA events.
double TimePerCall(const std::function<void()>& fn) {
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  fn();
  fn();
  Check(cudaEventRecord(start), "cudaEventRecord");
  fn();
  Check(cudaEventRecord(stop), "cudaEventRecord");
  Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  const int calls = std::clamp(static_cast<int>(200.0 / std::max(ms, 1e-3f)), 3, 500);
  Check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < calls; ++i) fn();
  Check(cudaEventRecord(stop), "cudaEventRecord");
  Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1000.0 / calls;
}

GemmMeasure MeasureGemm(Blas& blas, const GemmShape& s, DType type) {
  // Random normal inputs (tensor cores draw less power on zeros, which would flatter the rate).
  DeviceBuffer<float> a32(s.m * s.k), b32(s.k * s.n);
  FillNormal(a32.data(), a32.size(), 7, 1, 1.0f);
  FillNormal(b32.data(), b32.size(), 7, 2, 1.0f);
  DeviceBuffer<bf16> a16, b16, c16;
  DeviceBuffer<float> c32;
  const void* a = a32.data();
  const void* b = b32.data();
  void* c = nullptr;
  if (type == DType::kBf16) {
    a16 = DeviceBuffer<bf16>(a32.size());
    b16 = DeviceBuffer<bf16>(b32.size());
    Convert(a16.data(), a32.data(), a32.size());
    Convert(b16.data(), b32.data(), b32.size());
    c16 = DeviceBuffer<bf16>(s.m * s.n);
    a = a16.data();
    b = b16.data();
    c = c16.data();
  } else {
    c32 = DeviceBuffer<float>(s.m * s.n);
    c = c32.data();
  }
  const double seconds = TimePerCall([&] {
    blas.Gemm({c, type, s.n, 0}, {a, type, s.k, Op::kNo, 0}, {b, type, s.n, Op::kNo, 0}, s.m, s.n, s.k, 1.0f, 0.0f);
  });
  return {s, type == DType::kBf16 ? "bf16" : "fp32", 2.0 * s.m * s.n * s.k / seconds, seconds};
}

GemmMeasure MeasureFp8Gemm(const GemmShape& s) {
  Fp8Product product(s.m, s.n, s.k);
  const double seconds = TimePerCall([&] { product.Run(); });
  return {s, "fp8", 2.0 * s.m * s.n * s.k / seconds, seconds};
}

AttentionMeasure MeasureAttention(Blas& blas, AttentionMeasure a) {
  const int64_t q_n = static_cast<int64_t>(a.seq) * a.heads * a.head_dim, kv_n = static_cast<int64_t>(a.seq) * a.kv_heads * a.head_dim;
  DeviceBuffer<float> tmp(q_n);
  DeviceBuffer<bf16> q(q_n), k(kv_n), v(kv_n), o(q_n), d_o(q_n), dq(q_n), dk(kv_n), dv(kv_n);
  DeviceBuffer<float> lse(static_cast<int64_t>(a.heads) * a.seq);
  uint64_t stream = 10;
  for (DeviceBuffer<bf16>* x : {&q, &k, &v, &d_o}) {
    FillNormal(tmp.data(), x->size(), 7, ++stream, 1.0f);
    Convert(x->data(), tmp.data(), x->size());
  }
  GpuAttention<bf16> attn({1, a.seq, a.heads, a.kv_heads, a.head_dim, 1024, a.fused}, true, 1.0f / std::sqrt(static_cast<float>(a.head_dim)));
  a.fused = attn.fused();
  const double flops = 2.0 * a.heads * a.head_dim * static_cast<double>(a.seq) * a.seq;  // (QK + PV) causal
  a.forward_s = TimePerCall([&] { attn.Forward(blas, o.data(), lse.data(), q.data(), k.data(), v.data()); });
  a.training_s = TimePerCall([&] {
    attn.Forward(blas, o.data(), lse.data(), q.data(), k.data(), v.data());
    attn.Backward(blas, dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data());
  });
  a.forward_flop_per_s = flops / a.forward_s;
  a.training_flop_per_s = 3 * flops / a.training_s;
  return a;
}

double MeasureHbm() {
  const int64_t n = int64_t{1} << 28;  // 1 GiB of floats
  DeviceBuffer<float> src(n), dst(n);
  Fill(src.data(), n, 1.0f);
  const double seconds = TimePerCall([&] {
    Check(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  });
  return 2.0 * static_cast<double>(src.bytes()) / seconds;
}

}  // namespace

std::vector<GemmShape> ModelGemmShapes(int64_t tokens, int64_t hidden, int64_t q_width, int64_t kv_width, int64_t ffn,
                                       int64_t vocab) {
  return {{tokens, q_width, hidden, "attention q projection"}, {tokens, kv_width, hidden, "attention k or v projection"},
          {tokens, hidden, q_width, "attention output projection"}, {tokens, ffn, hidden, "mlp gate or up projection"},
          {tokens, hidden, ffn, "mlp down projection"}, {tokens, vocab, hidden, "output head"}};
}

GpuCalibration MeasureGpu(const std::vector<GemmShape>& bf16_shapes, const std::vector<AttentionMeasure>& attention_shapes) {
  GpuCalibration cal;
  cal.device = QueryDevice();
  Blas blas;
  for (const GemmShape& s : bf16_shapes) cal.gemms.push_back(MeasureGemm(blas, s, DType::kBf16));
  // The same shapes in FP8 where the tensor cores run it (cuBLASLt's FP8 needs multiples of 16).
  if (HasFp8TensorCores()) {
    for (const GemmShape& s : bf16_shapes) {
      if (s.m % 16 == 0 && s.n % 16 == 0 && s.k % 16 == 0) cal.gemms.push_back(MeasureFp8Gemm(s));
    }
  }
  cal.gemms.push_back(MeasureGemm(blas, {4096, 4096, 4096, "square, fp32 without TF32 (the equivalence path)"}, DType::kF32));
  for (const AttentionMeasure& a : attention_shapes) cal.attention.push_back(MeasureAttention(blas, a));
  cal.hbm_bytes_per_s = MeasureHbm();
  return cal;
}

}  // namespace shardsim::cuda
