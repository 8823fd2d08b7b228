// Deterministic parameter initialisation that does not depend on the sharding: element (r, c)
// of the global tensor `name` is a function of (seed, name, r, c) only, so every shard of every
// plan starts from the same model as the single-rank reference.
#pragma once

#include <cstdint>
#include <string>

namespace shardsim::runtime {

// A normal(0, stddev) draw for element (row, col) of tensor `name` (counter-based: SplitMix64
// of the key, then Box-Muller).
float InitNormal(uint64_t seed, const std::string& name, int64_t row, int64_t col, float stddev);

// A parameter's starting value: one where `stddev` is 0 (norm weights), else InitNormal's draw.
// Every device's model starts from these (the CPU stage model, the GPU path).
float InitialValue(uint64_t seed, const std::string& name, int64_t row, int64_t col, float stddev);

}  // namespace shardsim::runtime
