#include "core/units.h"

#include <gtest/gtest.h>
#include <limits>

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

TEST(ParseTokenCountTest, SuffixesArePowersOfAThousand) {
  EXPECT_EQ(ParseTokenCount("15T", "x"), 15e12);
  EXPECT_EQ(ParseTokenCount("2.5T", "x"), 2.5e12);
  EXPECT_EQ(ParseTokenCount("300B", "x"), 300e9);
  EXPECT_EQ(ParseTokenCount("300G", "x"), 300e9);
  EXPECT_EQ(ParseTokenCount("4M", "x"), 4e6);
  EXPECT_EQ(ParseTokenCount("8k", "x"), 8e3);
  EXPECT_EQ(ParseTokenCount("15 t", "x"), 15e12);
  EXPECT_EQ(ParseTokenCount("1e12", "x"), 1e12);
  EXPECT_EQ(ParseTokenCount(" 1000000 ", "x"), 1e6);
  EXPECT_EQ(ParseTokenCount("1e18", "x"), 1e18);
}

TEST(ParseTokenCountTest, RejectsBadCountsByName) {
  for (const char* bad : {"", "T", "abc", "0", "-1", "-2T", "0T", "nan", "inf", "-inf", "1e19", "2000000T", "1e400", "15X", "15TB", "15 T x", "1,5T"}) {
    try {
      ParseTokenCount(bad, "--train-tokens");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "--train-tokens") << bad;
      EXPECT_NE(e.valid(), "") << bad;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << bad;
    }
  }
}

TEST(FormatDurationTest, PicksTheUnitPeopleSay) {
  EXPECT_EQ(FormatDuration(45), "45 s");
  EXPECT_EQ(FormatDuration(750), "12.5 minutes");
  EXPECT_EQ(FormatDuration(7.5 * 3600), "7.5 hours");
  EXPECT_EQ(FormatDuration(41.3 * 86400), "41.3 days");
  EXPECT_EQ(FormatDuration(1.5 * 86400), "36 hours");
  EXPECT_EQ(FormatDuration(3 * 365.25 * 86400), "3 years");
}

TEST(CheckedArithmeticTest, OverflowIsAnInputError) {
  EXPECT_EQ(CheckedMul(int64_t{1} << 31, int64_t{1} << 31, "x"), int64_t{1} << 62);
  EXPECT_THROW(CheckedMul(int64_t{1} << 32, int64_t{1} << 32, "x"), InputError);
  EXPECT_THROW(CheckedAdd(INT64_MAX, 1, "x"), InputError);
}

TEST(WholeBytesTest, RoundsToTheNearestByteWithinInt64) {
  EXPECT_EQ(WholeBytes(30380628329.411766), 30380628329);
  EXPECT_EQ(WholeBytes(0.5), 1);
  EXPECT_EQ(WholeBytes(-3.0), 0);
  EXPECT_EQ(WholeBytes(1e30), std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace shardsim
