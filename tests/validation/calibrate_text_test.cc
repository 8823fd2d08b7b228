// calibrate's summary: the sections whose repeats disagree (a busy machine), which its warning
// line and the JSON's spread.noisy name; repeats that agree are not.
#include "validation/calibrate_text.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace shardsim::validation {
namespace {

TEST(CalibrateSpreadTest, SectionsWhoseRepeatsDisagreeAreNoisy) {
  SpreadSummary calm{.gemm = {0.01, 0.03, 0.02}, .kernels = {0.05}, .p2p = {}, .collectives = {0.1, 0.15, 20.8}, .triad = 0.05};
  EXPECT_TRUE(calm.Noisy().empty()) << "one wild figure (2080%) among agreeing ones is not a busy machine";
  SpreadSummary busy = calm;
  busy.collectives = {0.3, 0.45, 20.8};
  busy.triad = 1.82;
  const std::map<std::string, double> noisy = busy.Noisy();
  ASSERT_EQ(noisy.size(), 2u);
  EXPECT_DOUBLE_EQ(noisy.at("collectives"), 0.45);  // the upper median of the three
  EXPECT_DOUBLE_EQ(noisy.at("triad"), 1.82);
  // Exactly at the threshold is not above it.
  SpreadSummary edge = calm;
  edge.gemm = {kNoisySpread};
  EXPECT_TRUE(edge.Noisy().empty());
}

}  // namespace
}  // namespace shardsim::validation
