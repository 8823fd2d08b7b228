// Units at the edges: parsing sizes users type and formatting quantities for people. Inside the
// program every quantity is in base units (bytes, seconds, FLOP, bytes/s) and says so in its name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardsim {

// Parses a byte size: a whole number with an optional suffix. K, M, G, T and KiB, MiB, GiB, TiB
// are powers of 1024 (as nccl-tests' -b/-e); KB, MB, GB, TB are powers of 1000.
// Throws InputError naming `where` for anything else, zero or negative sizes, or sizes over 1 PiB.
int64_t ParseByteSize(std::string_view text, const std::string& where);
// Tokens per step (--global-batch-tokens): the same forms as ParseByteSize ("4M" is 4 x 1024^2
// tokens), its errors in tokens.
int64_t ParseTokensPerStep(std::string_view text, const std::string& where);

// Parses "8,1M,1G" into sizes, in order; each element as ParseByteSize.
std::vector<int64_t> ParseByteSizeList(std::string_view text, const std::string& where);

// Parses a positive whole number in [min, max]; throws InputError naming `where` otherwise.
int64_t ParseInteger(std::string_view text, const std::string& where, int64_t min, int64_t max);

// Parses a token count as people write training budgets: a number (decimals and 1e12 notation
// allowed) with an optional suffix K, M, B (or G), T, powers of 1000 in either case: "15T" is
// 15e12 tokens, "2.5T" 2.5e12, "300B" 3e11. Throws InputError naming `where` for anything else,
// for counts that are not positive and finite, and for counts over 1e18 (a typo, not a budget).
double ParseTokenCount(std::string_view text, const std::string& where);

// "70.55 B" style count with SI-like suffix (K, M, B, T), 4 significant digits.
std::string FormatCount(double count);
// "989.4 TFLOP/s", "80 GB", "3.35 TB/s": value with a decimal SI prefix and the unit.
std::string FormatSI(double value, std::string_view unit);
// "95 GiB" style binary size.
std::string FormatBinaryBytes(double bytes);
// A modelled byte count (a product and quotient of doubles, 30380628329.41) as the whole number
// of bytes output reports: rounded to the nearest byte, at most INT64_MAX.
int64_t WholeBytes(double bytes);
// Bytes in GiB (2^30 bytes), the unit memory figures are published in.
constexpr double BytesToGiB(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }
// "45.2%" for 0.452.
std::string FormatPercent(double fraction);
// `value` with `decimals` digits after the point: "0.553" for (0.5531, 3); for table columns.
std::string FormatFixed(double value, int decimals);
// "1.5 us", "2.3 ms", "4.0 s".
std::string FormatSeconds(double seconds);
// Long spans as people say them: "45 s", "12.5 minutes", "7.2 hours", "41.3 days", "3.1 years"
// (a unit once the span is at least two of it; shorter than two minutes as FormatSeconds).
std::string FormatDuration(double seconds);
// FormatSeconds, and where that is two hours or more FormatDuration beside it: "7380 s (2.05 hours)".
std::string FormatSecondsSpan(double seconds);

// Checked 64-bit arithmetic for counts derived from user input (sizes multiply quickly).
// Throws InputError(where, "... overflows ...") when the result does not fit in int64.
int64_t CheckedMul(int64_t a, int64_t b, const std::string& where);
int64_t CheckedAdd(int64_t a, int64_t b, const std::string& where);

}  // namespace shardsim
