// Costs of the runtime's CPU kernels at the tiny dense model's sizes (D=256, H=8, G=4, K=32,
// F=768): attention forward and backward against the per-layer matmuls they sit beside.
// Run with OPENBLAS_NUM_THREADS=1, as each MPI rank does.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/attention.h"
#include "runtime/gemm.h"
#include "runtime/linear.h"
#include "runtime/swiglu.h"

namespace shardsim::runtime {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = dist(rng);
  return x;
}

AttentionShape ModelShape(int seq) {
  return {.batch = 1, .q_len = seq, .kv_len = seq, .heads = 8, .kv_heads = 4, .head_dim = 32};
}

void BM_AttentionForwardCausal(benchmark::State& state) {
  const AttentionShape s = ModelShape(static_cast<int>(state.range(0)));
  const auto q = Random(size_t{1} * s.q_len * s.heads * s.head_dim, 1);
  const auto k = Random(size_t{1} * s.kv_len * s.kv_heads * s.head_dim, 2);
  const auto v = Random(k.size(), 3);
  std::vector<float> o(q.size()), lse(size_t{1} * s.heads * s.q_len);
  for (auto _ : state) {
    AttentionForward(o.data(), lse.data(), q.data(), k.data(), v.data(), s, true,
                     1.0f / std::sqrt(32.0f));
    benchmark::DoNotOptimize(o.data());
  }
}
BENCHMARK(BM_AttentionForwardCausal)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_AttentionBackwardCausal(benchmark::State& state) {
  const AttentionShape s = ModelShape(static_cast<int>(state.range(0)));
  const float scale = 1.0f / std::sqrt(32.0f);
  const auto q = Random(size_t{1} * s.q_len * s.heads * s.head_dim, 1);
  const auto k = Random(size_t{1} * s.kv_len * s.kv_heads * s.head_dim, 2);
  const auto v = Random(k.size(), 3);
  const auto d_o = Random(q.size(), 4);
  std::vector<float> o(q.size()), lse(size_t{1} * s.heads * s.q_len);
  AttentionForward(o.data(), lse.data(), q.data(), k.data(), v.data(), s, true, scale);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  for (auto _ : state) {
    AttentionBackward(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(),
                      d_o.data(), lse.data(), s, true, scale);
    benchmark::DoNotOptimize(dq.data());
  }
}
BENCHMARK(BM_AttentionBackwardCausal)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

// One layer's forward matmuls at T tokens: QKV (256 -> 512), output (256 -> 256), gate and up
// (256 -> 768 each), down (768 -> 256); plus the SwiGLU between them.
void BM_DenseLayerMatmulsForward(benchmark::State& state) {
  const int t = static_cast<int>(state.range(0));
  const int d = 256, qkv = 512, f = 768;
  const auto x = Random(size_t{1} * t * f, 1);
  const auto w = Random(size_t{1} * f * f, 2);
  std::vector<float> y(size_t{1} * t * f), gate(size_t{1} * t * f), up(size_t{1} * t * f);
  for (auto _ : state) {
    LinearForward(y.data(), x.data(), w.data(), t, d, qkv);
    LinearForward(y.data(), x.data(), w.data(), t, d, d);
    LinearForward(gate.data(), x.data(), w.data(), t, d, f);
    LinearForward(up.data(), x.data(), w.data(), t, d, f);
    SwigluForward(gate.data(), gate.data(), up.data(), t, f);
    LinearForward(y.data(), gate.data(), w.data(), t, f, d);
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_DenseLayerMatmulsForward)->Arg(512)->Unit(benchmark::kMillisecond);

// Single-core sgemm, square n x n x n: the reference rate for the runtime's model FLOP/s target.
void BM_Sgemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto a = Random(size_t{1} * n * n, 3), b = Random(size_t{1} * n * n, 4);
  std::vector<float> c(size_t{1} * n * n);
  for (auto _ : state) {
    Gemm(c.data(), a.data(), b.data(), n, n, n, Transpose::kNo, Transpose::kNo, 1.0f, 0.0f);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["flop_per_s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Sgemm)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardsim::runtime

BENCHMARK_MAIN();
