// Closest-name suggestions for unknown keys, presets and options ("did you mean ...?").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shardsim {

// Levenshtein distance between a and b (case-sensitive), in edits.
int EditDistance(std::string_view a, std::string_view b);

// Returns up to `max_results` candidates close to `name` (by edit distance, or sharing a
// prefix), best first; empty when none is plausibly meant.
std::vector<std::string> ClosestNames(std::string_view name, const std::vector<std::string>& candidates,
                                      size_t max_results = 3);

// "did you mean 'x'?" or "did you mean 'x' or 'y'?"; empty when there is no close candidate.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates);

// Joins names with ", ".
std::string JoinNames(const std::vector<std::string>& names, std::string_view separator = ", ");

}  // namespace shardsim
