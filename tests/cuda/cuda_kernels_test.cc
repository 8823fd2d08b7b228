// The CUDA path against the CPU reference kernels (runtime/), in fp32 without TF32: products,
// norms, RoPE, SwiGLU, cross-entropy, AdamW and the blockwise attention forward and backward with
// grouped-query heads and a sequence that is not a multiple of the tile. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/attention.h"
#include "cuda/blas.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "cuda/fp8_gemm.h"
#include "cuda/kernels.h"
#include "runtime/adamw.h"
#include "runtime/attention.h"
#include "runtime/cross_entropy.h"
#include "runtime/gemm.h"
#include "runtime/rmsnorm.h"
#include "runtime/rope.h"
#include "runtime/swiglu.h"

namespace shardsim::cuda {
namespace {

class CudaKernelsTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  }
};

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Largest |a - b| / (1e-3 + max |b|) over the arrays: relative to the reference's scale.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double scale = 1e-3, worst = 0;
  for (float x : b) scale = std::max(scale, static_cast<double>(std::fabs(x)));
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst / scale;
}

TEST_F(CudaKernelsTest, GemmMatchesTheCpuInEveryTransposition) {
  Blas blas;
  const int m = 37, n = 53, k = 29;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2), c0 = Random(m * n, 3);
      std::vector<float> cpu = c0;
      runtime::Gemm(cpu.data(), a.data(), b.data(), m, n, k, ta ? runtime::Transpose::kYes : runtime::Transpose::kNo,
                    tb ? runtime::Transpose::kYes : runtime::Transpose::kNo, 0.5f, 1.0f);
      DeviceBuffer<float> da = ToDevice(a), db = ToDevice(b), dc = ToDevice(c0);
      blas.Gemm({dc.data(), DType::kF32, n, 0}, {da.data(), DType::kF32, ta ? m : k, ta ? Op::kYes : Op::kNo, 0},
                {db.data(), DType::kF32, tb ? k : n, tb ? Op::kYes : Op::kNo, 0}, m, n, k, 0.5f, 1.0f);
      EXPECT_LT(RelativeError(dc.Download(), cpu), 1e-5) << "trans_a " << ta << " trans_b " << tb;
    }
  }
}

// The FP8 product calibrate times computes x W^T of its E4M3 inputs, row-major, the weight stored
// [n,k] as a linear layer keeps it (checked against a double-precision product of the same
// rounded values; bf16 output).
TEST_F(CudaKernelsTest, Fp8ProductIsTheRowMajorProduct) {
  if (!HasFp8TensorCores()) GTEST_SKIP() << "no FP8 tensor cores (compute capability below 8.9)";
  const int64_t m = 48, n = 64, k = 32;
  Fp8Product product(m, n, k);
  product.Run();
  Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const std::vector<float> out = product.Output();
  // E4M3's rounding of the fill value: 3 mantissa bits, to nearest even, normal down to 2^-6.
  auto rounded = [](int64_t i, uint32_t seed) {
    const double x = Fp8FillValue(i, seed);
    if (x == 0) return 0.0;
    int e = 0;
    std::frexp(x, &e);
    const double step = std::ldexp(1.0, std::max(e, -5) - 4);
    return std::nearbyint(x / step) * step;
  };
  double worst = 0, scale = 0;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double want = 0;
      for (int64_t i = 0; i < k; ++i) want += rounded(r * k + i, 11) * rounded(c * k + i, 12);  // the weight stored [n,k]
      worst = std::max(worst, std::fabs(out[static_cast<size_t>(r * n + c)] - want));
      scale = std::max(scale, std::fabs(want));
    }
  }
  EXPECT_LT(worst, 1e-2 * scale);  // bf16's 8 bits of mantissa
  EXPECT_THROW(Fp8Product(48, 64, 40), CudaError);  // not a multiple of 16
}

TEST_F(CudaKernelsTest, RmsNormForwardAndBackward) {
  const int t = 19, d = 300;
  const std::vector<float> x = Random(t * d, 4), w = Random(d, 5), dy = Random(t * d, 6);
  std::vector<float> y(t * d), rstd(t), dx(t * d, 0.25f), dw(d, 0.5f);
  runtime::RmsNormForward(y.data(), rstd.data(), x.data(), w.data(), t, d, 1e-5f);
  runtime::RmsNormBackward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), t, d);
  DeviceBuffer<float> gx = ToDevice(x), gw = ToDevice(w), gdy = ToDevice(dy), gy(t * d), grstd(t);
  DeviceBuffer<float> gdx = ToDevice(std::vector<float>(t * d, 0.25f)), gdw = ToDevice(std::vector<float>(d, 0.5f));
  RmsNormForward(gy.data(), grstd.data(), gx.data(), gw.data(), t, d, 1e-5f);
  RmsNormBackward(gdx.data(), gdw.data(), gdy.data(), gx.data(), gw.data(), grstd.data(), t, d);
  EXPECT_LT(RelativeError(gy.Download(), y), 1e-5);
  EXPECT_LT(RelativeError(grstd.Download(), rstd), 1e-5);
  EXPECT_LT(RelativeError(gdx.Download(), dx), 1e-5);
  EXPECT_LT(RelativeError(gdw.Download(), dw), 1e-5);
}

TEST_F(CudaKernelsTest, RopeForwardAndBackward) {
  const int t = 23, heads = 3, k = 16;
  const std::vector<float> x = Random(t * heads * k, 7);
  std::vector<int32_t> pos(t);
  for (int i = 0; i < t; ++i) pos[i] = 5 + 3 * i;  // non-contiguous, as a context-parallel rank holds
  std::vector<float> y(x.size()), back(x.size());
  runtime::RopeForward(y.data(), x.data(), pos.data(), t, heads, k, 10000.0f);
  runtime::RopeBackward(back.data(), x.data(), pos.data(), t, heads, k, 10000.0f);
  DeviceBuffer<float> g = ToDevice(x), gb = ToDevice(x);
  DeviceBuffer<int32_t> gp = ToDevice(pos);
  RopeForward(g.data(), gp.data(), t, heads, k, 10000.0f);
  RopeBackward(gb.data(), gp.data(), t, heads, k, 10000.0f);
  EXPECT_LT(RelativeError(g.Download(), y), 1e-5);
  EXPECT_LT(RelativeError(gb.Download(), back), 1e-5);
}

TEST_F(CudaKernelsTest, SwigluForwardAndBackward) {
  const int n = 1000;
  const std::vector<float> gate = Random(n, 8, 3.0f), up = Random(n, 9), dh = Random(n, 10);
  std::vector<float> h(n), dg(n), du(n);
  runtime::SwigluForward(h.data(), gate.data(), up.data(), 1, n);
  runtime::SwigluBackward(dg.data(), du.data(), dh.data(), gate.data(), up.data(), 1, n);
  DeviceBuffer<float> gg = ToDevice(gate), gu = ToDevice(up), gdh = ToDevice(dh), gh(n), gdg(n), gdu(n);
  SwigluForward(gh.data(), gg.data(), gu.data(), n);
  SwigluBackward(gdg.data(), gdu.data(), gdh.data(), gg.data(), gu.data(), n);
  EXPECT_LT(RelativeError(gh.Download(), h), 1e-5);
  EXPECT_LT(RelativeError(gdg.Download(), dg), 1e-5);
  EXPECT_LT(RelativeError(gdu.Download(), du), 1e-5);
}

TEST_F(CudaKernelsTest, CrossEntropyLossAndGradient) {
  const int t = 13, v = 5000;
  const std::vector<float> logits = Random(t * v, 11, 4.0f);
  std::vector<int32_t> targets(t);
  for (int i = 0; i < t; ++i) targets[i] = i == 4 ? -1 : (i * 389) % v;  // one ignored token
  std::vector<float> dl(t * v);
  const double loss = runtime::CrossEntropyForwardBackward(dl.data(), logits.data(), targets.data(), t, v, 12.0);
  DeviceBuffer<float> g = ToDevice(logits);
  DeviceBuffer<int32_t> gt = ToDevice(targets);
  const double gpu_loss = CrossEntropy(g.data(), g.data(), gt.data(), t, v, 12.0);
  EXPECT_NEAR(gpu_loss, loss, 1e-5 * std::fabs(loss));
  EXPECT_LT(RelativeError(g.Download(), dl), 1e-5);
}

std::vector<float> RoundToBf16(std::vector<float> x) {
  for (float& v : x) v = __bfloat162float(__float2bfloat16(v));
  return x;
}

DeviceBuffer<bf16> ToDeviceBf16(const std::vector<float>& x) {
  DeviceBuffer<float> f = ToDevice(x);
  DeviceBuffer<bf16> out(static_cast<int64_t>(x.size()));
  Convert(out.data(), f.data(), f.size());
  return out;
}

std::vector<float> Download(const DeviceBuffer<bf16>& x) {
  DeviceBuffer<float> f(x.size());
  Convert(f.data(), x.data(), x.size());
  return f.Download();
}

TEST_F(CudaKernelsTest, AdamWSteps) {
  const int n = 777;
  std::vector<float> p = Random(n, 12), m(n, 0), v(n, 0);
  DeviceBuffer<float> gp = ToDevice(p), gm = ToDevice(m), gv = ToDevice(v);
  runtime::AdamWConfig cfg;
  DeviceBuffer<bf16> weights(n);
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> g = Random(n, 100 + step);
    DeviceBuffer<float> gg = ToDevice(g);
    const float clip = step == 2 ? 0.25f : 1.0f;  // the clipping factor, applied in the same pass
    for (float& x : g) x *= clip;
    runtime::AdamWStep(p.data(), m.data(), v.data(), g.data(), n, cfg, step);
    AdamW(gp.data(), gm.data(), gv.data(), gg.data(), n, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, step, clip, weights.data());
    EXPECT_EQ(gg.Download(), std::vector<float>(n, 0.0f)) << "the gradient is zeroed for the next step";
  }
  EXPECT_LT(RelativeError(gp.Download(), p), 1e-6);
  EXPECT_LT(RelativeError(gv.Download(), v), 1e-5);
  EXPECT_LT(RelativeError(Download(weights), RoundToBf16(p)), 1e-6) << "the bf16 copy of the updated parameters";
}

// Blockwise attention on the GPU against the CPU's, causal and full, with grouped heads, two
// sequences and a tile that does not divide the sequence.
void CheckAttention(bool causal) {
  const int b = 2, s = 50, h = 4, g = 2, k = 8;
  const float scale = 1.0f / std::sqrt(static_cast<float>(k));
  const std::vector<float> q = Random(b * s * h * k, 20), kk = Random(b * s * g * k, 21), v = Random(b * s * g * k, 22),
                           d_o = Random(b * s * h * k, 23);
  runtime::AttentionShape shape{b, s, s, h, g, k};
  std::vector<float> o(q.size()), lse(b * h * s), dq(q.size(), 0), dk(kk.size(), 0), dv(v.size(), 0);
  runtime::AttentionForward(o.data(), lse.data(), q.data(), kk.data(), v.data(), shape, causal, scale);
  runtime::AttentionBackward(dq.data(), dk.data(), dv.data(), q.data(), kk.data(), v.data(), o.data(), d_o.data(), lse.data(),
                             shape, causal, scale);
  Blas blas;
  GpuAttention<float> attn({b, s, h, g, k, 16}, causal, scale);
  DeviceBuffer<float> gq = ToDevice(q), gk = ToDevice(kk), gv = ToDevice(v), gdo = ToDevice(d_o), go(q.size()), glse(b * h * s),
                      gdq(q.size()), gdk(kk.size()), gdv(v.size());
  attn.Forward(blas, go.data(), glse.data(), gq.data(), gk.data(), gv.data());
  attn.Backward(blas, gdq.data(), gdk.data(), gdv.data(), gq.data(), gk.data(), gv.data(), go.data(), gdo.data(), glse.data());
  EXPECT_LT(RelativeError(go.Download(), o), 1e-5);
  EXPECT_LT(RelativeError(glse.Download(), lse), 1e-5);
  EXPECT_LT(RelativeError(gdq.Download(), dq), 1e-5);
  EXPECT_LT(RelativeError(gdk.Download(), dk), 1e-5);
  EXPECT_LT(RelativeError(gdv.Download(), dv), 1e-5);
}

TEST_F(CudaKernelsTest, CausalAttentionForwardAndBackward) { CheckAttention(true); }

// Rows [b][at[i]] of x [B, S, W], for each batch row: [B, at.size(), W].
std::vector<float> Rows(const std::vector<float>& x, int batch, int seq, const std::vector<int32_t>& at) {
  const size_t w = x.size() / static_cast<size_t>(batch * seq);
  std::vector<float> out;
  for (int b = 0; b < batch; ++b) {
    for (const int32_t i : at) out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(b * seq + i)) * w),
                                          x.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(b * seq + i) + 1) * w));
  }
  return out;
}

// Context parallelism's attention: one rank's queries (zigzag chunks 1 and 2 of 4) against the
// whole sequence's keys in the ranks' order (chunks 0, 3, 1, 2), masked by position, equal to
// those rows of the whole sequence's attention; dK and dV are the local queries' share (the CPU's
// backward with the other rows' output gradients zero). Tiles of 16 straddle the chunks.
TEST_F(CudaKernelsTest, AttentionByPositionMatchesThoseRowsOfTheWholeSequence) {
  const int b = 2, s = 48, h = 4, g = 2, k = 8, c = 12;
  const float scale = 1.0f / std::sqrt(static_cast<float>(k));
  std::vector<int32_t> mine, keys;
  for (int i = c; i < 3 * c; ++i) mine.push_back(i);
  for (const int chunk : {0, 3, 1, 2}) {
    for (int i = 0; i < c; ++i) keys.push_back(chunk * c + i);
  }
  const std::vector<float> q = Random(b * s * h * k, 40), kk = Random(b * s * g * k, 41), v = Random(b * s * g * k, 42);
  std::vector<float> d_o = Random(b * s * h * k, 43);
  for (int r = 0; r < b; ++r) {
    for (int i = 0; i < s; ++i) {
      if (i < c || i >= 3 * c) std::fill_n(d_o.begin() + (static_cast<std::ptrdiff_t>(r) * s + i) * h * k, h * k, 0.0f);
    }
  }
  runtime::AttentionShape shape{b, s, s, h, g, k};
  std::vector<float> o(q.size()), lse(b * h * s), dq(q.size(), 0), dk(kk.size(), 0), dv(v.size(), 0);
  runtime::AttentionForward(o.data(), lse.data(), q.data(), kk.data(), v.data(), shape, true, scale);
  runtime::AttentionBackward(dq.data(), dk.data(), dv.data(), q.data(), kk.data(), v.data(), o.data(), d_o.data(), lse.data(), shape,
                             true, scale);
  const int sl = static_cast<int>(mine.size());
  AttentionDims dims{b, sl, h, g, k, 16};
  dims.kv_seq = s;
  GpuAttention<float> attn(dims, true, scale);
  attn.SetPositions(mine, keys);
  Blas blas;
  DeviceBuffer<float> gq = ToDevice(Rows(q, b, s, mine)), gk = ToDevice(Rows(kk, b, s, keys)), gv = ToDevice(Rows(v, b, s, keys)),
                      gdo = ToDevice(Rows(d_o, b, s, mine)), go(b * sl * h * k), glse(b * h * sl), gdq(b * sl * h * k), gdk(kk.size()),
                      gdv(v.size());
  attn.Forward(blas, go.data(), glse.data(), gq.data(), gk.data(), gv.data());
  attn.Backward(blas, gdq.data(), gdk.data(), gdv.data(), gq.data(), gk.data(), gv.data(), go.data(), gdo.data(), glse.data());
  std::vector<float> lse_rows;  // lse [B, H, S] at the local positions
  for (int r = 0; r < b * h; ++r) {
    for (const int32_t i : mine) lse_rows.push_back(lse[static_cast<size_t>(r * s + i)]);
  }
  EXPECT_LT(RelativeError(go.Download(), Rows(o, b, s, mine)), 1e-5);
  EXPECT_LT(RelativeError(glse.Download(), lse_rows), 1e-5);
  EXPECT_LT(RelativeError(gdq.Download(), Rows(dq, b, s, mine)), 1e-5);
  EXPECT_LT(RelativeError(gdk.Download(), Rows(dk, b, s, keys)), 1e-5);
  EXPECT_LT(RelativeError(gdv.Download(), Rows(dv, b, s, keys)), 1e-5);
}

// bf16 attention (fused kernels, or the tiled products) against the CPU's fp32 on the same
// bf16-rounded inputs: within bf16's precision (probabilities and outputs rounded to 8 bits).
void CheckBf16Attention(bool causal, int head_dim, bool fused) {
  const int b = 2, s = 192, h = 4, g = 2, k = head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(k));
  const std::vector<float> q = RoundToBf16(Random(b * s * h * k, 30)), kk = RoundToBf16(Random(b * s * g * k, 31)),
                           v = RoundToBf16(Random(b * s * g * k, 32)), d_o = RoundToBf16(Random(b * s * h * k, 33));
  runtime::AttentionShape shape{b, s, s, h, g, k};
  std::vector<float> o(q.size()), lse(b * h * s), dq(q.size(), 0), dk(kk.size(), 0), dv(v.size(), 0);
  runtime::AttentionForward(o.data(), lse.data(), q.data(), kk.data(), v.data(), shape, causal, scale);
  // The backward from the output the GPU will hold (bf16-rounded), as the GPU's delta reads it.
  const std::vector<float> o16 = RoundToBf16(o);
  runtime::AttentionBackward(dq.data(), dk.data(), dv.data(), q.data(), kk.data(), v.data(), o16.data(), d_o.data(), lse.data(), shape,
                             causal, scale);
  Blas blas;
  AttentionDims dims{b, s, h, g, k, 64};
  dims.fused = fused;
  GpuAttention<bf16> attn(dims, causal, scale);
  DeviceBuffer<bf16> gq = ToDeviceBf16(q), gk = ToDeviceBf16(kk), gv = ToDeviceBf16(v), gdo = ToDeviceBf16(d_o), go(q.size()), gdq(q.size()),
                     gdk(kk.size()), gdv(v.size());
  DeviceBuffer<float> glse(b * h * s);
  attn.Forward(blas, go.data(), glse.data(), gq.data(), gk.data(), gv.data());
  attn.Backward(blas, gdq.data(), gdk.data(), gdv.data(), gq.data(), gk.data(), gv.data(), go.data(), gdo.data(), glse.data());
  const std::string what = std::string(fused ? "fused" : "tiled") + (causal ? " causal" : " full") + " head dim " + std::to_string(k);
  EXPECT_LT(RelativeError(Download(go), o), 2e-2) << what;
  EXPECT_LT(RelativeError(glse.Download(), lse), 1e-3) << what;
  EXPECT_LT(RelativeError(Download(gdq), dq), 3e-2) << what;
  EXPECT_LT(RelativeError(Download(gdk), dk), 3e-2) << what;
  EXPECT_LT(RelativeError(Download(gdv), dv), 3e-2) << what;
}

TEST_F(CudaKernelsTest, Bf16AttentionFusedAndTiledMatchTheCpu) {
  for (const bool causal : {true, false}) {
    for (const int head_dim : {64, 128}) {
      CheckBf16Attention(causal, head_dim, true);
      CheckBf16Attention(causal, head_dim, false);
    }
  }
}
TEST_F(CudaKernelsTest, FullAttentionForwardAndBackward) { CheckAttention(false); }

}  // namespace
}  // namespace shardsim::cuda
