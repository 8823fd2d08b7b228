// Column-aligned plain-text tables for the readable (non --json) output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace shardsim::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Writes the header, a rule, and the rows, columns separated by two spaces, `indent` first.
  void Print(std::ostream& out, const std::string& indent = "") const;
  // Columns the widest line takes (without an indent).
  size_t Width() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// `text` broken at spaces into lines of at most `width` columns (a longer word stays whole): the
// first line starts with `first`, the others with `rest`; each line ends with a newline. Text
// that fits on one line is kept as written (runs of spaces too).
std::string Wrap(const std::string& text, size_t width, const std::string& first, const std::string& rest);

}  // namespace shardsim::cli
