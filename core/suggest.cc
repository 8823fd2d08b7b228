#include "core/suggest.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace shardsim {

int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

std::vector<std::string> ClosestNames(std::string_view name, const std::vector<std::string>& candidates,
                                      size_t max_results) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::vector<std::pair<int, std::string>> scored;
  for (const std::string& candidate : candidates) {
    int distance = EditDistance(lower, candidate);
    // One a prefix of the other ("llama3" for "llama3-8b") counts as close whatever the distance.
    const bool shares_prefix = std::min(lower.size(), candidate.size()) >= 3 &&
                               (candidate.rfind(lower, 0) == 0 || lower.rfind(candidate, 0) == 0);
    const int allowed = std::max<int>(2, static_cast<int>(candidate.size()) / 3);
    if (distance <= allowed || shares_prefix) {
      if (shares_prefix) distance = std::min(distance, allowed);
      scored.emplace_back(distance, candidate);
    }
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (const auto& [distance, candidate] : scored) {
    if (out.size() == max_results || distance > scored.front().first + 1) break;
    out.push_back(candidate);
  }
  return out;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::vector<std::string> close = ClosestNames(name, candidates);
  if (close.empty()) return "";
  std::string text = "did you mean '" + close[0] + "'";
  for (size_t i = 1; i < close.size(); ++i) text += (i + 1 == close.size() ? " or '" : ", '") + close[i] + "'";
  return text + "?";
}

std::string JoinNames(const std::vector<std::string>& names, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += separator;
    out += names[i];
  }
  return out;
}

}  // namespace shardsim
