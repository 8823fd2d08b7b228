// Small text helpers for parsing what users type on the command line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shardsim {

// Splits `text` at every `separator`: "a,b,,c" -> {"a", "b", "", "c"}; "" -> {""}.
inline std::vector<std::string> Split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(separator, start);
    parts.emplace_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

}  // namespace shardsim
