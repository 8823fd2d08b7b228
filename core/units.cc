#include "core/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "core/text.h"

namespace shardsim {
namespace {

constexpr int64_t kMaxByteSize = int64_t{1} << 50;  // 1 PiB: larger is a typo, not a workload.

std::string Trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(begin, end - begin + 1));
}

std::string FormatSignificant(double value) {
  char buffer[32];
  const double magnitude = std::fabs(value);
  const int decimals = magnitude >= 100 ? 1 : magnitude >= 10 ? 2 : 3;
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  std::string text = buffer;
  if (text.find('.') != std::string::npos) {
    while (!text.empty() && text.back() == '0') text.pop_back();
    if (!text.empty() && text.back() == '.') text.pop_back();
  }
  return text;
}

}  // namespace

int64_t ParseInteger(std::string_view raw, const std::string& where, int64_t min, int64_t max) {
  const std::string text = Trim(raw);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size()) {
    throw InputError(where, "'" + text + "' is not a whole number", range);
  }
  if (ec == std::errc::result_out_of_range || value < min || value > max) {
    throw InputError(where, "'" + text + "' is out of range", range);
  }
  return value;
}

namespace {

// A whole count with an optional binary (K, M, G, T: x1024) or decimal (KB, MB, GB, TB: x1000)
// suffix, up to 2^50: bytes, or tokens per step. `noun` names what is counted ("bytes").
int64_t ParseScaledCount(std::string_view raw, const std::string& where, const std::string& noun, const std::string& kind) {
  const std::string text = Trim(raw);
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string valid = "a whole number of " + noun + " with an optional suffix K, M, G, T (x1024) or KB, MB, GB, TB (x1000), e.g. 8, 1M, 1G";
  if (digits == 0) throw InputError(where, "'" + text + "' is not a " + kind, valid);
  const std::string suffix = text.substr(digits);
  struct Unit {
    const char* name;
    int64_t factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"B", 1},
      {"K", int64_t{1} << 10},
      {"M", int64_t{1} << 20},
      {"G", int64_t{1} << 30},
      {"T", int64_t{1} << 40},
      {"KiB", int64_t{1} << 10},
      {"MiB", int64_t{1} << 20},
      {"GiB", int64_t{1} << 30},
      {"TiB", int64_t{1} << 40},
      {"KB", 1000},
      {"MB", 1000000},
      {"GB", 1000000000},
      {"TB", 1000000000000},
  };
  for (const Unit& unit : kUnits) {
    if (suffix != unit.name) continue;
    const std::string number = text.substr(0, digits);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    (void)end;
    if (ec == std::errc::result_out_of_range || value > kMaxByteSize / unit.factor) {
      throw InputError(where, "'" + text + "' is larger than 2^50 " + noun + (noun == "bytes" ? " (1 PiB)" : ""), "from 1 to 2^50 " + noun);
    }
    if (value <= 0) throw InputError(where, "'" + text + "' must be positive", valid);
    return value * unit.factor;
  }
  throw InputError(where, "unknown size suffix '" + suffix + "' in '" + text + "'", valid);
}

}  // namespace

int64_t ParseByteSize(std::string_view raw, const std::string& where) { return ParseScaledCount(raw, where, "bytes", "byte size"); }

int64_t ParseTokensPerStep(std::string_view raw, const std::string& where) { return ParseScaledCount(raw, where, "tokens", "token count"); }

double ParseTokenCount(std::string_view raw, const std::string& where) {
  const std::string text = Trim(raw);
  const std::string valid = "a positive number of tokens up to 1e18 with an optional suffix K, M, B (or G), T (x1000), e.g. 15T, 2.5T, 300B, 1e12";
  // The number is the longest prefix from_chars reads; what follows (spaces allowed) is the suffix.
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::general);
  if (text.empty() || ec == std::errc::invalid_argument || end == text.data()) {
    throw InputError(where, "'" + text + "' is not a token count", valid);
  }
  const std::string suffix = Trim(std::string_view(end, static_cast<size_t>(text.data() + text.size() - end)));
  double factor = 0;
  if (suffix.empty()) {
    factor = 1;
  } else if (suffix.size() == 1) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K': factor = 1e3; break;
      case 'M': factor = 1e6; break;
      case 'B':
      case 'G': factor = 1e9; break;
      case 'T': factor = 1e12; break;
      default: break;
    }
  }
  if (factor == 0) throw InputError(where, "unknown suffix '" + suffix + "' in '" + text + "'", valid);
  const double tokens = value * factor;
  if (std::isnan(tokens)) throw InputError(where, "'" + text + "' is not a number", valid);
  if (ec == std::errc::result_out_of_range) throw InputError(where, "'" + text + "' is out of range", valid);
  if (!(tokens > 0)) throw InputError(where, "'" + text + "' must be positive", valid);
  if (tokens > 1e18) throw InputError(where, "'" + text + "' is more than 1e18 tokens", valid);
  return tokens;
}

std::vector<int64_t> ParseByteSizeList(std::string_view text, const std::string& where) {
  std::vector<int64_t> sizes;
  for (const std::string& part : Split(text, ',')) sizes.push_back(ParseByteSize(part, where));
  return sizes;
}

std::string FormatCount(double count) {
  static constexpr struct {
    double factor;
    const char* suffix;
  } kSteps[] = {{1e12, " T"}, {1e9, " B"}, {1e6, " M"}, {1e3, " K"}};
  for (const auto& step : kSteps) {
    if (std::fabs(count) >= step.factor) return FormatSignificant(count / step.factor) + step.suffix;
  }
  return FormatSignificant(count);
}

std::string FormatSI(double value, std::string_view unit) {
  static constexpr struct {
    double factor;
    const char* prefix;
  } kPrefixes[] = {{1e18, "E"}, {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& prefix : kPrefixes) {
    if (std::fabs(value) >= prefix.factor) {
      return FormatSignificant(value / prefix.factor) + " " + prefix.prefix + std::string(unit);
    }
  }
  return FormatSignificant(value) + " " + std::string(unit);
}

int64_t WholeBytes(double bytes) {
  constexpr double kMax = 9.2e18;  // below INT64_MAX (9.22e18), where llround is defined
  if (!(bytes < kMax)) return std::numeric_limits<int64_t>::max();
  return std::llround(std::max(bytes, 0.0));
}

std::string FormatBinaryBytes(double bytes) {
  static constexpr struct {
    double factor;
    const char* suffix;
  } kSteps[] = {{1099511627776.0, " TiB"}, {1073741824.0, " GiB"}, {1048576.0, " MiB"}, {1024.0, " KiB"}};
  for (const auto& step : kSteps) {
    if (std::fabs(bytes) >= step.factor) return FormatSignificant(bytes / step.factor) + step.suffix;
  }
  return FormatSignificant(bytes) + " B";
}

std::string FormatPercent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f%%", 100 * fraction);
  return buffer;
}

std::string FormatFixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string FormatSeconds(double seconds) {
  const double magnitude = std::fabs(seconds);
  if (magnitude >= 1 || magnitude == 0) return FormatSignificant(seconds) + " s";
  if (magnitude >= 1e-3) return FormatSignificant(seconds * 1e3) + " ms";
  if (magnitude >= 1e-6) return FormatSignificant(seconds * 1e6) + " us";
  return FormatSignificant(seconds * 1e9) + " ns";
}

std::string FormatDuration(double seconds) {
  static constexpr struct {
    double seconds;
    const char* name;
  } kUnits[] = {{365.25 * 86400, " years"}, {86400, " days"}, {3600, " hours"}, {60, " minutes"}};
  for (const auto& unit : kUnits) {
    if (std::fabs(seconds) >= 2 * unit.seconds) return FormatSignificant(seconds / unit.seconds) + unit.name;
  }
  return FormatSeconds(seconds);
}

std::string FormatSecondsSpan(double seconds) {
  return FormatSeconds(seconds) + (std::fabs(seconds) >= 7200 ? " (" + FormatDuration(seconds) + ")" : "");
}

int64_t CheckedMul(int64_t a, int64_t b, const std::string& where) {
  int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) {
    throw InputError(where, "size overflows 64 bits (" + std::to_string(a) + " x " + std::to_string(b) + ")",
                     "", "check for a typo in a size field");
  }
  return result;
}

int64_t CheckedAdd(int64_t a, int64_t b, const std::string& where) {
  int64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) {
    throw InputError(where, "size overflows 64 bits", "", "check for a typo in a size field");
  }
  return result;
}

}  // namespace shardsim
