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

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace shardsim::cli
