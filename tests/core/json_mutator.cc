#include "tests/core/json_mutator.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace shardsim::testing {
namespace {

using nlohmann::json;

// Every value of the document, containers included, by JSON pointer.
void CollectPointers(const json& value, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (value.is_object()) {
    for (const auto& item : value.items()) CollectPointers(item.value(), at / item.key(), out);
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) CollectPointers(value[i], at / i, out);
  }
}

// [begin, end) of every number literal (when `numbers`) or string literal outside strings.
std::vector<std::pair<size_t, size_t>> Literals(const std::string& text, bool numbers) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, text.size());
      if (!numbers) spans.emplace_back(i, end);
      i = end;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t end = i + 1;
      while (end < text.size() && std::string("0123456789+-.eE").find(text[end]) != std::string::npos) ++end;
      if (numbers) spans.emplace_back(i, end);
      i = end;
    } else {
      ++i;
    }
  }
  return spans;
}

std::string Repeat(const std::string& unit, size_t n) {
  std::string out;
  out.reserve(unit.size() * n);
  for (size_t i = 0; i < n; ++i) out += unit;
  return out;
}

}  // namespace

json JsonMutator::OddValue() {
  const std::vector<json> values = {0,
                                    -1,
                                    1,
                                    2,
                                    3,
                                    1e308,
                                    -1e308,
                                    5e-324,
                                    0.5,
                                    1.5,
                                    4096.0,
                                    std::numeric_limits<uint64_t>::max(),
                                    uint64_t{1} << 63,
                                    std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::max(),
                                    int64_t{1} << 24,
                                    (int64_t{1} << 24) + 1,
                                    int64_t{1} << 30,
                                    int64_t{1} << 40,
                                    "12",
                                    "",
                                    "line\nbreak",
                                    "ring",
                                    true,
                                    false,
                                    nullptr,
                                    json::array(),
                                    json::object(),
                                    json::array({1, 2, 3}),
                                    json::object({{"x", 1}})};
  return values[Below(values.size())];
}

std::string JsonMutator::OddLiteral() {
  const std::vector<std::string> literals = {"0", "-1", "1e308", "-1e308", "1e999", "-1e999", "1e-999", "NaN", "nan", "Infinity",
                                             "-Infinity", "18446744073709551615", "18446744073709551616", "9223372036854775807",
                                             "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
                                             "99999999999999999999999999", "1" + std::string(400, '0'), "4096.0", "0.5", "-0",
                                             "1.7976931348623157e308", "5e-324", "\"12\"", "\"\"", "true", "null", "[]", "{}",
                                             "[1, 2]", "01", "1.", ".5", "+1", "0x10"};
  return literals[Below(literals.size())];
}

void JsonMutator::EditValue(json& value) {
  std::vector<json::json_pointer> pointers, numbers;
  CollectPointers(value, json::json_pointer(), pointers);
  for (const json::json_pointer& p : pointers) {
    if (value[p].is_number()) numbers.push_back(p);
  }
  const size_t kind = Below(20);
  // Mostly numbers rescaled to other plausible sizes: these pass the readers' own checks and
  // reach what is derived from them (products of sizes, counts, rates).
  if (kind < 6 && !numbers.empty()) {
    json& number = value[numbers[Below(numbers.size())]];
    const int shift = static_cast<int>(Below(41));
    if (Below(2) == 0) {
      number = number.get<double>() * std::ldexp(1.0, shift - 8);
    } else {
      number = static_cast<int64_t>(Below(size_t{1} << shift)) + (Below(2) == 0 ? 0 : 1);
    }
    return;
  }
  const json::json_pointer at = pointers[Below(pointers.size())];
  const bool has_parent = !at.empty();
  if (kind < 12) {  // an odd value in place of this one
    value[at] = OddValue();
  } else if (kind < 14) {  // null, which readers may take for "absent"
    value[at] = nullptr;
  } else if (kind < 16) {  // removed
    if (!has_parent) return;
    if (value[at.parent_pointer()].is_object()) {
      value[at.parent_pointer()].erase(at.back());
    } else {
      value[at.parent_pointer()].erase(static_cast<size_t>(std::stoul(at.back())));
    }
  } else if (kind < 18) {  // renamed: a typo in the key
    if (!has_parent || !value[at.parent_pointer()].is_object()) return;
    json& parent = value[at.parent_pointer()];
    std::string key = at.back();
    const json moved = parent[key];
    parent.erase(key);
    if (key.empty()) {
      key = "x";
    } else {
      key[Below(key.size())] = static_cast<char>('a' + Below(26));
    }
    parent[key] = moved;
  } else {  // an unknown key added to the nearest object
    json& target = value[at].is_object() || !has_parent ? value[at] : value[at.parent_pointer()];
    if (target.is_object()) target["unexpected_key"] = OddValue();
  }
}

void JsonMutator::EditText(std::string& text) {
  if (text.empty()) {
    text = OddLiteral();
    return;
  }
  const size_t pos = Below(text.size());
  switch (Below(9)) {
    case 0:  // a byte flipped
      text[pos] = static_cast<char>(Below(256));
      return;
    case 1:  // a few bytes deleted
      text.erase(pos, 1 + Below(8));
      return;
    case 2: {  // a token or stray byte inserted
      const std::vector<std::string> snippets = {",", "{", "}", "[", "]", ":", "\"", "\\", "null", "true", "-", "e", "0", " ",
                                                 "\xff", "\xc3\x28", "\xed\xa0\x80", "\"\\ud800\"", "\"x\": 1,", "/*c*/", "\n"};
      text.insert(pos, snippets[Below(snippets.size())]);
      return;
    }
    case 3:
    case 4: {  // a number (or, one time in three, a string) replaced by an odd literal
      const auto spans = Literals(text, Below(3) != 0);
      if (spans.empty()) return;
      const auto [begin, end] = spans[Below(spans.size())];
      text.replace(begin, end - begin, OddLiteral());
      return;
    }
    case 5: {  // a key with its value duplicated ("a": 1, "a": 1)
      const auto spans = Literals(text, false);
      if (spans.empty()) return;
      const auto [begin, end] = spans[Below(spans.size())];
      if (end >= text.size() || text.find_first_not_of(" \n", end) == std::string::npos || text[text.find_first_not_of(" \n", end)] != ':') return;
      const size_t stop = text.find_first_of(",}", end);
      if (stop == std::string::npos) return;
      text.insert(begin, text.substr(begin, stop - begin) + ",");
      return;
    }
    case 6:  // truncated
      text.resize(pos);
      return;
    case 7: {  // a value nested deeply
      const size_t depths[] = {2, 63, 64, 65, 1000, 100000};
      const size_t depth = depths[Below(std::size(depths))];
      const auto spans = Literals(text, true);
      if (spans.empty()) return;
      const auto [begin, end] = spans[Below(spans.size())];
      const bool objects = Below(2) == 0;
      const std::string open = objects ? "{\"a\": " : "[", close = objects ? "}" : "]";
      text.replace(begin, end - begin, Repeat(open, depth) + "1" + Repeat(close, depth));
      return;
    }
    default: {  // a long string value
      const auto spans = Literals(text, false);
      if (spans.empty()) return;
      const auto [begin, end] = spans[Below(spans.size())];
      text.replace(begin, end - begin, "\"" + std::string(100000, 'x') + "\"");
      return;
    }
  }
}

std::string JsonMutator::Mutate(const json& seed) {
  json value = seed;
  // Structural edits keep the text valid JSON, so they reach the checks past the parser.
  const bool structural = Below(2) == 0;
  const size_t value_edits = structural ? 1 + Below(2) + Below(2) : 0;
  for (size_t i = 0; i < value_edits; ++i) EditValue(value);
  std::string text = value.dump(Below(2) == 0 ? 2 : -1);
  const size_t edits = structural ? Below(2) : 1 + Below(3);
  for (size_t i = 0; i < edits; ++i) EditText(text);
  return text;
}

}  // namespace shardsim::testing
