// Mutations of JSON spec files for the readers' fuzz test: the ways a hand-edited, truncated,
// corrupted or hostile file differs from a good one, drawn from a fixed-seed generator so that
// every run tries the same cases.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

namespace shardsim::testing {

class JsonMutator {
 public:
  explicit JsonMutator(uint64_t seed) : rng_(seed) {}

  // The text of `seed` after a few edits: half the time first one to three structural edits of
  // the value (a field replaced by an odd value, removed, renamed or added), then edits of the text
  // (byte flips, deletions, insertions, numbers replaced by 0, -1, 1e308, 1e999, NaN, huge
  // integers or strings, duplicated keys, truncation, deep nesting).
  std::string Mutate(const nlohmann::json& seed);

  // A value a field may be set to: odd numbers, wrong types, empty containers.
  nlohmann::json OddValue();
  // Literal text a number may be replaced by, including what JSON cannot hold (1e999, NaN).
  std::string OddLiteral();

  // Uniform in [0, n).
  size_t Below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

 private:
  void EditValue(nlohmann::json& value);
  void EditText(std::string& text);

  std::mt19937_64 rng_;
};

}  // namespace shardsim::testing
