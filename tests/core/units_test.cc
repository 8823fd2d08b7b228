#include "core/units.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace shardsim {
namespace {

TEST(ParseByteSizeTest, SuffixesFollowNcclTests) {
  EXPECT_EQ(ParseByteSize("8", "x"), 8);
  EXPECT_EQ(ParseByteSize("1K", "x"), 1024);
  EXPECT_EQ(ParseByteSize("1M", "x"), 1 << 20);
  EXPECT_EQ(ParseByteSize("2G", "x"), int64_t{2} << 30);
  EXPECT_EQ(ParseByteSize("1GiB", "x"), int64_t{1} << 30);
  EXPECT_EQ(ParseByteSize("1GB", "x"), 1000000000);
  EXPECT_EQ(ParseByteSizeList("8,1M,1G", "x"), (std::vector<int64_t>{8, 1 << 20, 1 << 30}));
}

TEST(ParseByteSizeTest, RejectsBadSizesByName) {
  for (const char* bad : {"", "0", "-1", "1X", "M", "1.5G", "99999999999999999999", "2000T"}) {
    try {
      ParseByteSize(bad, "--bytes");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "--bytes");
      EXPECT_NE(e.valid(), "") << bad;
    }
  }
}

TEST(ParseIntegerTest, RangeIsEnforced) {
  EXPECT_EQ(ParseInteger(" 42 ", "n", 1, 100), 42);
  EXPECT_THROW(ParseInteger("0", "n", 1, 100), InputError);
  EXPECT_THROW(ParseInteger("101", "n", 1, 100), InputError);
  EXPECT_THROW(ParseInteger("4x", "n", 1, 100), InputError);
}

TEST(FormatTest, UnitsAndPrefixes) {
  EXPECT_EQ(FormatSI(9.894e14, "FLOP/s"), "989.4 TFLOP/s");
  EXPECT_EQ(FormatSI(80e9, "B"), "80 GB");
  EXPECT_EQ(FormatCount(70.55e9), "70.55 B");
  EXPECT_EQ(FormatBinaryBytes(95.0 * (1 << 30)), "95 GiB");
  EXPECT_EQ(FormatSeconds(1.5e-6), "1.5 us");
}

TEST(CheckedArithmeticTest, OverflowIsAnInputError) {
  EXPECT_EQ(CheckedMul(int64_t{1} << 31, int64_t{1} << 31, "x"), int64_t{1} << 62);
  EXPECT_THROW(CheckedMul(int64_t{1} << 32, int64_t{1} << 32, "x"), InputError);
  EXPECT_THROW(CheckedAdd(INT64_MAX, 1, "x"), InputError);
}

}  // namespace
}  // namespace shardsim
