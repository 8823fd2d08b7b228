#include "cli/text_table.h"

#include <algorithm>
#include <cctype>

namespace shardsim::cli {

size_t TextTable::Width() const {
  std::vector<size_t> widths(header_.size(), 0);
  for (size_t i = 0; i < header_.size(); ++i) widths[i] = header_[i].size();
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  size_t total = 0;
  for (size_t w : widths) total += w;
  return total + (widths.empty() ? 0 : 2 * (widths.size() - 1));
}

void TextTable::Print(std::ostream& out, const std::string& indent) const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line = indent;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += cell;
      if (i + 1 < widths.size()) line += std::string(widths[i] - cell.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  print(header_);
  std::string rule = indent;
  for (size_t i = 0; i < widths.size(); ++i) rule += std::string(widths[i], '-') + (i + 1 < widths.size() ? "  " : "");
  out << rule << "\n";
  for (const auto& row : rows_) print(row);
}

std::string Wrap(const std::string& text, size_t width, const std::string& first, const std::string& rest) {
  if (first.size() + text.size() <= width) return first + text + "\n";  // as written, spacing kept
  std::string out, line = first;
  bool empty = true;  // no word on the line yet
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    start = end + 1;
    if (word.empty()) continue;
    if (!empty && line.size() + 1 + word.size() > width) {
      // A number stays with its unit ("245.6 s", "8.215 GiB"): it moves to the next line too.
      const size_t last = line.rfind(' ');
      const std::string previous = last == std::string::npos ? "" : line.substr(last + 1);
      const bool unit = !word.empty() && std::isalpha(static_cast<unsigned char>(word.front())) && word.size() <= 8;
      if (unit && last != std::string::npos && last >= rest.size() && !previous.empty() &&
          std::isdigit(static_cast<unsigned char>(previous.back()))) {
        out += line.substr(0, last) + "\n";
        line = rest + previous;
      } else {
        out += line + "\n";
        line = rest;
        empty = true;
      }
    }
    line += (empty ? "" : " ") + word;
    empty = false;
  }
  return out + line + "\n";
}

}  // namespace shardsim::cli
