#include "core/train_settings.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace shardsim {

void CheckLearningRate(double lr, const std::string& flag) {
  if (std::isfinite(lr) && lr > 0 && lr <= kMaxLearningRate) return;
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", lr);
  throw InputError(flag, std::string(text) + " is not a learning rate", "a finite number in (0, 1]", "AdamW's usual range is 1e-5 to 1e-2");
}

void CheckSeed(int64_t seed, const std::string& flag) {
  if (seed >= 0) return;
  throw InputError(flag, std::to_string(seed) + " is negative", "a whole number from 0 to 2^63-1");
}

}  // namespace shardsim
