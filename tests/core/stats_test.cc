#include "core/stats.h"

#include <gtest/gtest.h>

namespace shardsim {
namespace {

TEST(StatsTest, MediansOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(UpperMedian({4, 1, 3, 2}), 3);  // a measured value, the higher middle one
  EXPECT_DOUBLE_EQ(UpperMedian({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(Median({}), 0);
  EXPECT_DOUBLE_EQ(UpperMedian({}), 0);
}

// Nearest rank: the p90 of 10 values is the 9th smallest, of 11 the 10th, of 1 the one.
TEST(StatsTest, NearestRankQuantile) {
  std::vector<double> ten = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(NearestRankQuantile(ten, 0.9), 9);
  ten.push_back(11);
  EXPECT_DOUBLE_EQ(NearestRankQuantile(ten, 0.9), 10);
  EXPECT_DOUBLE_EQ(NearestRankQuantile({7}, 0.9), 7);
  EXPECT_DOUBLE_EQ(NearestRankQuantile(ten, 1.0), 11);
  EXPECT_DOUBLE_EQ(NearestRankQuantile({}, 0.9), 0);
}

}  // namespace
}  // namespace shardsim
