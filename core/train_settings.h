// The training settings `shardsim run` passes to the runtime, checked in one place by both: a
// value out of range is a one-line error naming the flag, never a crash mid-training.
#pragma once

#include <cstdint>
#include <string>

namespace shardsim {

// AdamW's learning rate: finite, above 0 and at most this (larger steps diverge at once).
inline constexpr double kMaxLearningRate = 1.0;

// Throws InputError naming `flag` unless 0 < lr <= kMaxLearningRate.
void CheckLearningRate(double lr, const std::string& flag);
// Throws InputError naming `flag` unless 0 <= seed (the runtime's initialisation seed).
void CheckSeed(int64_t seed, const std::string& flag);

}  // namespace shardsim
