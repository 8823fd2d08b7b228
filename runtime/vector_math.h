// Elementwise math shared by the kernels: an exp that loops can vectorise, row reductions written
// in independent lanes, and the attribute that compiles hot loops for wider vector units.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

// Put on a hot elementwise function: GCC builds AVX-512, AVX2 and baseline copies and picks one
// when the program loads. The AVX copies contract a * b + c into FMA, so results can differ in the
// last bits between machines, as OpenBLAS's per-CPU kernels already do; on one machine every rank
// runs the same copy. Vectorising needs -O3 and -fno-trapping-math (runtime/CMakeLists.txt).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SHARDSIM_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SHARDSIM_VECTOR_CLONES
#endif

namespace shardsim::runtime {

// Returns exp(x), within 2e-7 relative of the true value for x in [-87, 88]; 0 for x < -87
// (including -inf, which is how masked scores arrive) and exp(88) above 88. Branch-free so loops
// over it vectorise (with -fno-trapping-math), which std::exp does not without -ffast-math.
// NaN in gives garbage out.
// (Cephes expf: x = n ln2 + r with |r| <= ln2/2, a degree-7 polynomial for exp(r), 2^n by bits.)
inline float FastExp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // few mantissa bits, so n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding then subtracting rounds to integer
  const float lo = x < -87.0f ? -87.0f : x;
  const float xc = lo > 88.0f ? 88.0f : lo;
  const float n = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  const float result = p * two_n;
  return x < -87.0f ? 0.0f : result;
}

// Lanes for reductions: enough independent accumulators for 512-bit vectors.
inline constexpr int kReduceLanes = 16;

// Returns max(x[0..n)), -inf for n == 0.
inline float RowMax(const float* x, int n) {
  float lane[kReduceLanes];
  for (int u = 0; u < kReduceLanes; ++u) lane[u] = -std::numeric_limits<float>::infinity();
  int i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    for (int u = 0; u < kReduceLanes; ++u) lane[u] = lane[u] > x[i + u] ? lane[u] : x[i + u];
  }
  for (; i < n; ++i) lane[0] = lane[0] > x[i] ? lane[0] : x[i];
  float m = lane[0];
  for (int u = 1; u < kReduceLanes; ++u) m = m > lane[u] ? m : lane[u];
  return m;
}

// Returns sum(x[0..n)) in float, lane-wise (the order differs from a plain loop).
inline float RowSum(const float* x, int n) {
  float lane[kReduceLanes] = {};
  int i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    for (int u = 0; u < kReduceLanes; ++u) lane[u] += x[i + u];
  }
  for (; i < n; ++i) lane[0] += x[i];
  float s = 0.0f;
  for (int u = 0; u < kReduceLanes; ++u) s += lane[u];
  return s;
}

}  // namespace shardsim::runtime
