#include "runtime/init.h"

#include <cmath>

namespace shardsim::runtime {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t HashName(const std::string& name) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ULL;
  return h;
}

}  // namespace

float InitNormal(uint64_t seed, const std::string& name, int64_t row, int64_t col, float stddev) {
  const uint64_t key = SplitMix(seed ^ SplitMix(HashName(name) ^ SplitMix(static_cast<uint64_t>(row) * 0x100000001b3ULL + static_cast<uint64_t>(col))));
  const uint64_t a = SplitMix(key), b = SplitMix(key + 1);
  const double u1 = (static_cast<double>(a >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
  const double u2 = static_cast<double>(b >> 11) / 9007199254740992.0;
  return static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

float InitialValue(uint64_t seed, const std::string& name, int64_t row, int64_t col, float stddev) {
  return stddev == 0 ? 1.0f : InitNormal(seed, name, row, col, stddev);
}

}  // namespace shardsim::runtime
