#include "core/suggest.h"

#include <gtest/gtest.h>

namespace shardsim {
namespace {

TEST(EditDistanceTest, KnownDistances) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("abc", ""), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("tensr", "tensor"), 1);
}

TEST(ClosestNamesTest, SuggestsNearNamesBestFirst) {
  const std::vector<std::string> presets = {"llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b"};
  const auto close = ClosestNames("llama3-7b", presets);
  ASSERT_FALSE(close.empty());
  EXPECT_EQ(close[0], "llama3-8b");
  EXPECT_TRUE(ClosestNames("zzzzzzzz", presets).empty());
  EXPECT_EQ(DidYouMean("num_layer", {"num_layers", "num_heads"}), "did you mean 'num_layers'?");
}

}  // namespace
}  // namespace shardsim
