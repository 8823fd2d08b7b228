#include "runtime/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "tests/runtime/kernel_test_util.h"

namespace shardsim::runtime {
namespace {

using testing::ExpectAllNear;
using testing::NumericGradient;
using testing::Probe;
using testing::RandomVector;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Inputs {
  AttentionShape shape;
  std::vector<float> q, k, v, d_o;
  std::vector<int32_t> q_pos, kv_pos;
  bool causal = true;
  float scale = 0.0f;
};

Inputs MakeInputs(AttentionShape shape, bool causal, uint32_t seed) {
  Inputs in;
  in.shape = shape;
  in.causal = causal;
  in.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const size_t q_size = size_t{1} * shape.batch * shape.q_len * shape.heads * shape.head_dim;
  const size_t kv_size = size_t{1} * shape.batch * shape.kv_len * shape.kv_heads * shape.head_dim;
  in.q = RandomVector(q_size, seed);
  in.k = RandomVector(kv_size, seed + 1);
  in.v = RandomVector(kv_size, seed + 2);
  in.d_o = RandomVector(q_size, seed + 3);
  in.q_pos.resize(shape.q_len);
  in.kv_pos.resize(shape.kv_len);
  std::iota(in.q_pos.begin(), in.q_pos.end(), 0);
  std::iota(in.kv_pos.begin(), in.kv_pos.end(), 0);
  return in;
}

size_t QIndex(const AttentionShape& s, int b, int i, int h, int d) {
  return ((size_t{1} * b * s.q_len + i) * s.heads + h) * s.head_dim + d;
}
size_t KvIndex(const AttentionShape& s, int b, int j, int g, int d) {
  return ((size_t{1} * b * s.kv_len + j) * s.kv_heads + g) * s.head_dim + d;
}
size_t LseIndex(const AttentionShape& s, int b, int h, int i) {
  return (size_t{1} * b * s.heads + h) * s.q_len + i;
}

// Softmax attention materialised in double, with the GQA mapping g = h / (H / G).
struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

Reference Naive(const Inputs& in) {
  const AttentionShape& s = in.shape;
  Reference ref;
  ref.o.assign(in.q.size(), 0.0);
  ref.lse.assign(size_t{1} * s.batch * s.heads * s.q_len, -kInf);
  ref.dq.assign(in.q.size(), 0.0);
  ref.dk.assign(in.k.size(), 0.0);
  ref.dv.assign(in.v.size(), 0.0);
  const int group = s.heads / s.kv_heads;
  std::vector<double> p(s.kv_len), dp(s.kv_len);
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / group;
      for (int i = 0; i < s.q_len; ++i) {
        double m = -kInf;
        for (int j = 0; j < s.kv_len; ++j) {
          p[j] = -kInf;
          if (in.causal && in.kv_pos[j] > in.q_pos[i]) continue;
          double dot = 0.0;
          for (int d = 0; d < s.head_dim; ++d) {
            dot += double{in.q[QIndex(s, b, i, h, d)]} * in.k[KvIndex(s, b, j, g, d)];
          }
          p[j] = in.scale * dot;
          m = std::max(m, p[j]);
        }
        if (m == -kInf) continue;
        double sum = 0.0;
        for (int j = 0; j < s.kv_len; ++j) sum += std::exp(p[j] - m);
        ref.lse[LseIndex(s, b, h, i)] = m + std::log(sum);
        for (int j = 0; j < s.kv_len; ++j) p[j] = std::exp(p[j] - m) / sum;
        double delta = 0.0;
        for (int j = 0; j < s.kv_len; ++j) {
          dp[j] = 0.0;
          for (int d = 0; d < s.head_dim; ++d) {
            ref.o[QIndex(s, b, i, h, d)] += p[j] * in.v[KvIndex(s, b, j, g, d)];
            ref.dv[KvIndex(s, b, j, g, d)] += p[j] * in.d_o[QIndex(s, b, i, h, d)];
            dp[j] += double{in.d_o[QIndex(s, b, i, h, d)]} * in.v[KvIndex(s, b, j, g, d)];
          }
          delta += p[j] * dp[j];
        }
        for (int j = 0; j < s.kv_len; ++j) {
          const double ds = p[j] * (dp[j] - delta) * in.scale;
          for (int d = 0; d < s.head_dim; ++d) {
            ref.dq[QIndex(s, b, i, h, d)] += ds * in.k[KvIndex(s, b, j, g, d)];
            ref.dk[KvIndex(s, b, j, g, d)] += ds * in.q[QIndex(s, b, i, h, d)];
          }
        }
      }
    }
  }
  return ref;
}

struct Result {
  std::vector<float> o, lse, dq, dk, dv;
};

// The kernel in one block: forward, prepare, backward.
Result OneBlock(const Inputs& in) {
  Result r;
  r.o.assign(in.q.size(), std::numeric_limits<float>::quiet_NaN());
  r.lse.assign(size_t{1} * in.shape.batch * in.shape.heads * in.shape.q_len, 0.0f);
  AttentionForwardBlock(r.o.data(), r.lse.data(), in.q.data(), in.k.data(), in.v.data(),
                        in.q_pos.data(), in.kv_pos.data(), in.shape, in.causal, in.scale);
  std::vector<float> delta(r.lse.size());
  AttentionBackwardPrepare(delta.data(), r.o.data(), in.d_o.data(), in.shape);
  r.dq.assign(in.q.size(), 0.0f);
  r.dk.assign(in.k.size(), 0.0f);
  r.dv.assign(in.v.size(), 0.0f);
  AttentionBackwardBlock(r.dq.data(), r.dk.data(), r.dv.data(), in.q.data(), in.k.data(),
                         in.v.data(), in.d_o.data(), r.lse.data(), delta.data(), in.q_pos.data(),
                         in.kv_pos.data(), in.shape, in.causal, in.scale);
  return r;
}

// Keys [begin, begin + len) of a [B, Skv, G, K] tensor.
std::vector<float> SliceKeys(const std::vector<float>& x, const AttentionShape& s, int begin,
                             int len) {
  const size_t row = size_t{1} * s.kv_heads * s.head_dim;
  std::vector<float> out;
  for (int b = 0; b < s.batch; ++b) {
    const auto from = x.begin() + (size_t{1} * b * s.kv_len + begin) * row;
    out.insert(out.end(), from, from + len * row);
  }
  return out;
}

void AddSliceKeys(std::vector<float>& x, const std::vector<float>& part, const AttentionShape& s,
                  int begin, int len) {
  const size_t row = size_t{1} * s.kv_heads * s.head_dim;
  for (int b = 0; b < s.batch; ++b) {
    for (size_t e = 0; e < len * row; ++e) {
      x[(size_t{1} * b * s.kv_len + begin) * row + e] += part[b * len * row + e];
    }
  }
}

// The kernel with K/V cut into blocks of the given lengths, in order: forward per block merged by
// log-sum-exp (starting from "nothing seen" with garbage in o), then each block's backward with the
// final lse, the key gradients put back in place.
Result SplitBlocks(const Inputs& in, const std::vector<int>& lengths) {
  const AttentionShape& s = in.shape;
  Result r;
  r.o.assign(in.q.size(), std::numeric_limits<float>::quiet_NaN());
  r.lse.assign(size_t{1} * s.batch * s.heads * s.q_len, -std::numeric_limits<float>::infinity());
  int begin = 0;
  for (int len : lengths) {
    AttentionShape bs = s;
    bs.kv_len = len;
    const auto k = SliceKeys(in.k, s, begin, len);
    const auto v = SliceKeys(in.v, s, begin, len);
    std::vector<float> o(in.q.size()), lse(r.lse.size());
    AttentionForwardBlock(o.data(), lse.data(), in.q.data(), k.data(), v.data(), in.q_pos.data(),
                          in.kv_pos.data() + begin, bs, in.causal, in.scale);
    AttentionMerge(r.o.data(), r.lse.data(), o.data(), lse.data(), s);
    begin += len;
  }
  EXPECT_EQ(begin, s.kv_len);
  std::vector<float> delta(r.lse.size());
  AttentionBackwardPrepare(delta.data(), r.o.data(), in.d_o.data(), s);
  r.dq.assign(in.q.size(), 0.0f);
  r.dk.assign(in.k.size(), 0.0f);
  r.dv.assign(in.v.size(), 0.0f);
  begin = 0;
  for (int len : lengths) {
    AttentionShape bs = s;
    bs.kv_len = len;
    const auto k = SliceKeys(in.k, s, begin, len);
    const auto v = SliceKeys(in.v, s, begin, len);
    std::vector<float> dk(k.size(), 0.0f), dv(v.size(), 0.0f);
    AttentionBackwardBlock(r.dq.data(), dk.data(), dv.data(), in.q.data(), k.data(), v.data(),
                           in.d_o.data(), r.lse.data(), delta.data(), in.q_pos.data(),
                           in.kv_pos.data() + begin, bs, in.causal, in.scale);
    AddSliceKeys(r.dk, dk, s, begin, len);
    AddSliceKeys(r.dv, dv, s, begin, len);
    begin += len;
  }
  return r;
}

void ExpectMatches(const Result& r, const Reference& ref, double tol, const std::string& what) {
  ExpectAllNear(r.o, ref.o, tol, tol, what + " o");
  ExpectAllNear(r.lse, ref.lse, tol, tol, what + " lse");
  ExpectAllNear(r.dq, ref.dq, tol, tol, what + " dq");
  ExpectAllNear(r.dk, ref.dk, tol, tol, what + " dk");
  ExpectAllNear(r.dv, ref.dv, tol, tol, what + " dv");
}

void ExpectMatches(const Result& r, const Result& ref, double tol, const std::string& what) {
  ExpectMatches(
      r,
      Reference{testing::ToDouble(ref.o), testing::ToDouble(ref.lse), testing::ToDouble(ref.dq),
                testing::ToDouble(ref.dk), testing::ToDouble(ref.dv)},
      tol, what);
}

struct Case {
  int batch, seq, heads, kv_heads, head_dim;
  bool causal;
};

TEST(AttentionTest, OneBlockMatchesNaiveSoftmaxAttention) {
  const Case cases[] = {
      {1, 37, 6, 2, 8, true},                              // GQA, length not a multiple of the tile
      {2, 100, 6, 2, 16, false},                           // GQA, full attention, two batch rows
      {2, 100, 6, 2, 16, true},  {1, 100, 3, 3, 8, true},  // MHA with an odd head count
      {1, 37, 3, 1, 4, false},                             // MQA
      {1, 130, 8, 4, 32, true},  // the model's heads, three query and key tiles
      {1, 1, 2, 1, 4, true},
  };
  for (const Case& c : cases) {
    const Inputs in = MakeInputs({.batch = c.batch,
                                  .q_len = c.seq,
                                  .kv_len = c.seq,
                                  .heads = c.heads,
                                  .kv_heads = c.kv_heads,
                                  .head_dim = c.head_dim},
                                 c.causal, 11);
    const std::string what = "B" + std::to_string(c.batch) + " S" + std::to_string(c.seq) + " H" +
                             std::to_string(c.heads) + " G" + std::to_string(c.kv_heads) +
                             (c.causal ? " causal" : " full");
    ExpectMatches(OneBlock(in), Naive(in), 1e-5, what);
  }
}

TEST(AttentionTest, ConvenienceWrappersEqualOneBlock) {
  const Inputs in = MakeInputs(
      {.batch = 2, .q_len = 70, .kv_len = 70, .heads = 4, .kv_heads = 2, .head_dim = 8}, true, 5);
  const Result want = OneBlock(in);
  Result r;
  r.o.resize(in.q.size());
  r.lse.resize(want.lse.size());
  AttentionForward(r.o.data(), r.lse.data(), in.q.data(), in.k.data(), in.v.data(), in.shape, true,
                   in.scale);
  r.dq.assign(in.q.size(), 0.0f);
  r.dk.assign(in.k.size(), 0.0f);
  r.dv.assign(in.v.size(), 0.0f);
  AttentionBackward(r.dq.data(), r.dk.data(), r.dv.data(), in.q.data(), in.k.data(), in.v.data(),
                    r.o.data(), in.d_o.data(), r.lse.data(), in.shape, true, in.scale);
  ExpectMatches(r, want, 0.0, "wrapper");
}

// A context-parallel rank's queries: two zigzag chunks of the sequence [0, 200).
Inputs ZigzagInputs(AttentionShape shape, bool causal, uint32_t seed) {
  shape.q_len = 100;
  shape.kv_len = 200;
  Inputs in = MakeInputs(shape, causal, seed);
  for (int i = 0; i < 50; ++i) {
    in.q_pos[i] = i;
    in.q_pos[50 + i] = 150 + i;
  }
  // Keys in a shuffled order, so no tile's positions are sorted.
  std::mt19937 rng(seed);
  std::shuffle(in.kv_pos.begin(), in.kv_pos.end(), rng);
  return in;
}

TEST(AttentionTest, SplitKeyBlocksMergeToOneBlock) {
  for (bool causal : {true, false}) {
    for (auto [heads, kv_heads] : {std::pair{6, 2}, std::pair{3, 3}}) {
      const Inputs in = ZigzagInputs(
          {.batch = 2, .heads = heads, .kv_heads = kv_heads, .head_dim = 8}, causal, 21);
      const Result one = OneBlock(in);
      ExpectMatches(one, Naive(in), 1e-5, "one block");
      for (const std::vector<int>& lengths :
           {std::vector<int>{130, 70}, {70, 60, 70}, {50, 50, 50, 50}, {1, 64, 65, 70}}) {
        ExpectMatches(SplitBlocks(in, lengths), one, 1e-5,
                      "split into " + std::to_string(lengths.size()));
      }
    }
  }
}

TEST(AttentionTest, RingOfContiguousChunksWithZigzagQueries) {
  // Keys arrive as the ring passes them: each block a contiguous chunk of positions, some blocks
  // entirely in the future of some (or all) queries.
  Inputs in = ZigzagInputs({.batch = 1, .heads = 8, .kv_heads = 4, .head_dim = 32}, true, 31);
  std::iota(in.kv_pos.begin(), in.kv_pos.end(), 0);
  std::reverse(in.kv_pos.begin(), in.kv_pos.end());
  const Reference ref = Naive(in);
  ExpectMatches(SplitBlocks(in, {50, 50, 50, 50}), ref, 1e-5, "ring");
  ExpectMatches(SplitBlocks(in, {100, 100}), ref, 1e-5, "ring");
}

TEST(AttentionTest, QueriesThatSeeNoKeyGetZeroAndMinusInfinity) {
  Inputs in = MakeInputs(
      {.batch = 1, .q_len = 5, .kv_len = 70, .heads = 2, .kv_heads = 1, .head_dim = 4}, true, 41);
  in.q_pos = {0, 1, 2, 3, 80};
  std::iota(in.kv_pos.begin(), in.kv_pos.end(), 10);  // positions 10..79: only query 4 sees them
  const Result r = OneBlock(in);
  const AttentionShape& s = in.shape;
  for (int h = 0; h < s.heads; ++h) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(r.lse[LseIndex(s, 0, h, i)], -std::numeric_limits<float>::infinity());
      for (int d = 0; d < s.head_dim; ++d) {
        EXPECT_EQ(r.o[QIndex(s, 0, i, h, d)], 0.0f);
        EXPECT_EQ(r.dq[QIndex(s, 0, i, h, d)], 0.0f);
      }
    }
    EXPECT_TRUE(std::isfinite(r.lse[LseIndex(s, 0, h, 4)]));
  }
  ExpectMatches(r, Naive(in), 1e-5, "partly blind");
  // Merging two blind partials stays blind; merging a seen one into a blind one copies it.
  std::vector<float> o_acc(r.o.size(), 1.0f), lse_acc(r.lse.size(), -INFINITY);
  AttentionMerge(o_acc.data(), lse_acc.data(), r.o.data(), r.lse.data(), s);
  EXPECT_EQ(lse_acc, r.lse);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(o_acc[QIndex(s, 0, i, 0, 0)], 1.0f);
  EXPECT_EQ(o_acc[QIndex(s, 0, 4, 0, 0)], r.o[QIndex(s, 0, 4, 0, 0)]);
}

TEST(AttentionTest, KeyTileStartingAtTheLastQueryPositionIsNotSkipped) {
  // The key tile's smallest position equals the query tile's largest: only that query sees it.
  Inputs in = MakeInputs(
      {.batch = 1, .q_len = 10, .kv_len = 12, .heads = 2, .kv_heads = 1, .head_dim = 4}, true, 45);
  std::iota(in.kv_pos.begin(), in.kv_pos.end(), 9);
  const Result r = OneBlock(in);
  EXPECT_TRUE(std::isfinite(r.lse[LseIndex(in.shape, 0, 0, 9)]));
  ExpectMatches(r, Naive(in), 1e-5, "boundary");
}

TEST(AttentionTest, BackwardMatchesFiniteDifferences) {
  Inputs in = MakeInputs(
      {.batch = 1, .q_len = 6, .kv_len = 6, .heads = 2, .kv_heads = 1, .head_dim = 4}, true, 51);
  const auto probe = in.d_o;
  auto loss = [&] {
    std::vector<float> o(in.q.size()), lse(in.shape.heads * in.shape.q_len);
    AttentionForwardBlock(o.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(),
                          in.q_pos.data(), in.kv_pos.data(), in.shape, in.causal, in.scale);
    return Probe(o, probe);
  };
  const Result r = OneBlock(in);
  ExpectAllNear(r.dq, NumericGradient(in.q, loss, 1e-2f), 1e-3, 1e-2, "dq");
  ExpectAllNear(r.dk, NumericGradient(in.k, loss, 1e-2f), 1e-3, 1e-2, "dk");
  ExpectAllNear(r.dv, NumericGradient(in.v, loss, 1e-2f), 1e-3, 1e-2, "dv");
}

TEST(AttentionTest, BackwardAccumulatesIntoGradients) {
  const Inputs in = MakeInputs(
      {.batch = 1, .q_len = 9, .kv_len = 9, .heads = 2, .kv_heads = 2, .head_dim = 4}, true, 61);
  const Result r = OneBlock(in);
  std::vector<float> delta(r.lse.size());
  AttentionBackwardPrepare(delta.data(), r.o.data(), in.d_o.data(), in.shape);
  std::vector<float> dq(in.q.size(), 1.0f), dk(in.k.size(), 1.0f), dv(in.v.size(), 1.0f);
  AttentionBackwardBlock(dq.data(), dk.data(), dv.data(), in.q.data(), in.k.data(), in.v.data(),
                         in.d_o.data(), r.lse.data(), delta.data(), in.q_pos.data(),
                         in.kv_pos.data(), in.shape, true, in.scale);
  for (size_t i = 0; i < dq.size(); ++i) EXPECT_FLOAT_EQ(dq[i], 1.0f + r.dq[i]);
  for (size_t i = 0; i < dk.size(); ++i) EXPECT_FLOAT_EQ(dk[i], 1.0f + r.dk[i]);
  for (size_t i = 0; i < dv.size(); ++i) EXPECT_FLOAT_EQ(dv[i], 1.0f + r.dv[i]);
}

}  // namespace
}  // namespace shardsim::runtime
