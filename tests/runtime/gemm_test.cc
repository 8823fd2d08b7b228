#include "runtime/gemm.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "tests/runtime/kernel_test_util.h"

namespace shardsim::runtime {
namespace {

using testing::ExpectAllNear;
using testing::RandomVector;

// C = alpha op(A) op(B) + beta C in double, with row strides.
std::vector<double> NaiveGemm(const std::vector<float>& c, int ldc, const std::vector<float>& a,
                              int lda, const std::vector<float>& b, int ldb, int m, int n,
                              int inner, bool ta, bool tb, double alpha, double beta) {
  std::vector<double> out(c.begin(), c.end());
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int p = 0; p < inner; ++p) {
        const double av = ta ? a[p * lda + i] : a[i * lda + p];
        const double bv = tb ? b[j * ldb + p] : b[p * ldb + j];
        sum += av * bv;
      }
      out[i * ldc + j] = alpha * sum + beta * c[i * ldc + j];
    }
  }
  return out;
}

TEST(GemmTest, AllTransposesWithAlphaAndBeta) {
  const int m = 7, n = 5, inner = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const auto a = RandomVector(m * inner, 1);
      const auto b = RandomVector(inner * n, 2);
      auto c = RandomVector(m * n, 3);
      const auto want =
          NaiveGemm(c, n, a, ta ? m : inner, b, tb ? inner : n, m, n, inner, ta, tb, 0.5, 2.0);
      Gemm(c.data(), a.data(), b.data(), m, n, inner, ta ? Transpose::kYes : Transpose::kNo,
           tb ? Transpose::kYes : Transpose::kNo, 0.5f, 2.0f);
      ExpectAllNear(c, want, 1e-5, 1e-5, "C");
    }
  }
}

TEST(GemmTest, BetaZeroIgnoresGarbageInC) {
  const auto a = RandomVector(4 * 3, 4);
  const auto b = RandomVector(3 * 2, 5);
  std::vector<float> c(4 * 2, std::numeric_limits<float>::quiet_NaN());
  Gemm(c.data(), a.data(), b.data(), 4, 2, 3, Transpose::kNo, Transpose::kNo, 1.0f, 0.0f);
  const auto want =
      NaiveGemm(std::vector<float>(8, 0.0f), 2, a, 3, b, 2, 4, 2, 3, false, false, 1.0, 0.0);
  ExpectAllNear(c, want, 1e-6, 1e-6, "C");
}

TEST(GemmTest, StridedSubMatricesLeaveTheRestAlone) {
  // One "head" of width 4 inside rows of width 10, as attention reads Q [T, H*K].
  const int m = 6, n = 4, inner = 4, ld = 10;
  const auto a = RandomVector(m * ld, 6);
  const auto b = RandomVector(n * ld, 7);
  auto c = RandomVector(m * ld, 8);
  const auto before = c;
  const auto want = NaiveGemm(c, ld, a, ld, b, ld, m, n, inner, false, true, 1.0, 1.0);
  GemmStrided(c.data(), ld, a.data(), ld, b.data(), ld, m, n, inner, Transpose::kNo,
              Transpose::kYes, 1.0f, 1.0f);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < ld; ++j) {
      if (j < n) {
        EXPECT_NEAR(c[i * ld + j], want[i * ld + j], 1e-5);
      } else {
        EXPECT_EQ(c[i * ld + j], before[i * ld + j]);
      }
    }
  }
}

TEST(GemmTest, EmptyInnerDimensionScalesC) {
  std::vector<float> c = {1.0f, 2.0f};
  Gemm(c.data(), nullptr, nullptr, 1, 2, 0, Transpose::kNo, Transpose::kNo, 1.0f, 3.0f);
  EXPECT_FLOAT_EQ(c[0], 3.0f);
  EXPECT_FLOAT_EQ(c[1], 6.0f);
}

TEST(GemmTest, BlasConfigNamesOpenBlas) {
  EXPECT_NE(BlasConfig().find("OpenBLAS"), std::string::npos);
}

}  // namespace
}  // namespace shardsim::runtime
