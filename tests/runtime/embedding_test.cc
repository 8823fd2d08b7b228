#include "runtime/embedding.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/runtime/kernel_test_util.h"

namespace shardsim::runtime {
namespace {

using testing::RandomVector;

constexpr int kV = 5, kD = 3;

TEST(EmbeddingTest, ForwardCopiesRowsAndBackwardScatterAdds) {
  const auto table = RandomVector(kV * kD, 1);
  const std::vector<int32_t> ids = {4, 0, 4, 2};
  const int t = static_cast<int>(ids.size());
  std::vector<float> out(t * kD);
  EmbeddingForward(out.data(), ids.data(), table.data(), t, kV, kD);
  for (int i = 0; i < t; ++i)
    for (int d = 0; d < kD; ++d) EXPECT_EQ(out[i * kD + d], table[ids[i] * kD + d]);

  const auto d_out = RandomVector(t * kD, 2);
  std::vector<float> d_table(kV * kD, 1.0f);
  EmbeddingBackward(d_table.data(), d_out.data(), ids.data(), t, kV, kD);
  for (int d = 0; d < kD; ++d) {
    EXPECT_FLOAT_EQ(d_table[4 * kD + d], 1.0f + d_out[0 * kD + d] + d_out[2 * kD + d]);
    EXPECT_FLOAT_EQ(d_table[0 * kD + d], 1.0f + d_out[1 * kD + d]);
    EXPECT_FLOAT_EQ(d_table[2 * kD + d], 1.0f + d_out[3 * kD + d]);
    EXPECT_EQ(d_table[1 * kD + d], 1.0f);
    EXPECT_EQ(d_table[3 * kD + d], 1.0f);
  }
}

// Two row shards (rows 0-1 and 2-4): their lookups add up to the whole lookup, and each shard's
// backward touches only its rows, as the whole backward does.
TEST(EmbeddingTest, RowShardsAddUpToTheWholeTable) {
  const auto table = RandomVector(kV * kD, 4);
  const std::vector<int32_t> ids = {4, 0, 4, 2, 1};
  const int t = static_cast<int>(ids.size());
  std::vector<float> whole(t * kD), sum(t * kD, 0.0f), part(t * kD);
  EmbeddingForward(whole.data(), ids.data(), table.data(), t, kV, kD);
  const auto d_out = RandomVector(t * kD, 5);
  std::vector<float> d_whole(kV * kD, 0.0f), d_shards(kV * kD, 0.0f);
  EmbeddingBackward(d_whole.data(), d_out.data(), ids.data(), t, kV, kD);
  for (const auto& [row0, rows] : {std::pair{0, 2}, std::pair{2, 3}}) {
    EmbeddingShardForward(part.data(), ids.data(), table.data() + row0 * kD, t, kV, row0, rows, kD);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    EmbeddingShardBackward(d_shards.data() + row0 * kD, d_out.data(), ids.data(), t, kV, row0, rows, kD);
  }
  for (size_t i = 0; i < sum.size(); ++i) EXPECT_EQ(sum[i], whole[i]);
  for (size_t i = 0; i < d_whole.size(); ++i) EXPECT_FLOAT_EQ(d_shards[i], d_whole[i]);
}

TEST(EmbeddingDeathTest, IdOutsideVocabAborts) {
  const auto table = RandomVector(kV * kD, 3);
  const std::vector<int32_t> ids = {kV};
  std::vector<float> out(kD);
  EXPECT_DEATH(EmbeddingForward(out.data(), ids.data(), table.data(), 1, kV, kD), "outside vocab");
}

}  // namespace
}  // namespace shardsim::runtime
