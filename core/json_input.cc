#include "core/json_input.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/suggest.h"

namespace shardsim {
namespace {

using nlohmann::json;

// Line and column (1-based) of byte offset `offset` in `text`.
std::pair<int, int> LineColumn(const std::string& text, size_t offset) {
  int line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

std::string Range(int64_t min, int64_t max) { return std::to_string(min) + " to " + std::to_string(max); }

std::string ShortValue(const json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

}  // namespace

std::string ReadTextFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    throw InputError(path, "file not found", "", "give a preset name or the path of an existing file");
  }
  if (fs::is_directory(status)) {
    throw InputError(path, "is a directory, not a file", "", "name the JSON file inside it");
  }
  // Devices and pipes could block or never end: specs are regular files of modest size.
  if (!fs::is_regular_file(status)) {
    throw InputError(path, "is not a regular file", "a JSON file", "save the spec to a file first");
  }
  constexpr uintmax_t kMaxSpecBytes = 64u << 20;
  if (fs::file_size(path, ec) > kMaxSpecBytes && !ec) {
    throw InputError(path, "is larger than 64 MiB, too large for a spec file", "a JSON file under 64 MiB");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot be opened for reading", "", "check its permissions");
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw InputError(path, "could not be read", "", "check the file");
  std::string text = content.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw InputError(path, "file is empty", "a JSON object", "write the spec into the file");
  }
  return text;
}

json ParseJsonText(const std::string& text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // nlohmann reports the byte just past the offending token; step back onto it.
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    const auto [line, column] = LineColumn(text, offset);
    std::string reason = e.what();
    // Keep nlohmann's explanation, drop its "[json.exception.parse_error.101] parse error at..."
    const size_t colon = reason.find(": ", reason.find("parse error"));
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    throw InputError(source + ":" + std::to_string(line) + ":" + std::to_string(column),
                     "malformed JSON: " + reason, "", "fix the JSON syntax at that position");
  }
}

json ReadJsonFile(const std::string& path) { return ParseJsonText(ReadTextFile(path), path); }

std::string JsonTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    default: return "value";
  }
}

JsonReader::JsonReader(const json& value, std::string where, std::string pointer)
    : value_(value), where_(std::move(where)), pointer_(std::move(pointer)) {
  if (!value_.is_object()) {
    throw InputError(where_ + ":" + (pointer_.empty() ? "/" : pointer_),
                     "expected a JSON object, got " + JsonTypeName(value_), "an object {\"key\": value, ...}");
  }
}

std::string JsonReader::Where(std::string_view key) const {
  return where_ + ":" + pointer_ + "/" + std::string(key);
}

void JsonReader::Fail(std::string_view key, const std::string& what, const std::string& valid,
                      const std::string& hint) const {
  throw InputError(Where(key), what, valid, hint);
}

const json& JsonReader::Get(std::string_view key) {
  known_.emplace(key);
  static const json kNull;
  const auto it = value_.find(key);
  return it == value_.end() ? kNull : *it;
}

const json& JsonReader::Required(std::string_view key) {
  const json& v = Get(key);
  if (!v.is_null()) return v;
  // A missing key is often a misspelt one: name the unknown key it was probably meant to be.
  std::vector<std::string> unknown;
  for (const auto& item : value_.items()) {
    if (!known_.count(item.key())) unknown.push_back(item.key());
  }
  const std::vector<std::string> close = ClosestNames(key, unknown, 1);
  if (!close.empty()) {
    throw InputError(Where(close[0]), "unknown key '" + close[0] + "'; did you mean '" + std::string(key) + "'?",
                     "", "'" + std::string(key) + "' is required");
  }
  Fail(key, "missing required key '" + std::string(key) + "'");
}

bool JsonReader::Has(std::string_view key) { return !Get(key).is_null(); }

int64_t JsonReader::Int(std::string_view key, int64_t min, int64_t max) {
  const json& v = Required(key);
  int64_t value = 0;
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    value = v.get<int64_t>();
  } else if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) Fail(key, ShortValue(v) + " is too large", Range(min, max));
    value = static_cast<int64_t>(u);
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= 9.0e15) {
      value = static_cast<int64_t>(d);  // 4096.0 or 1e3 are whole numbers; accept them.
    } else {
      Fail(key, "expected a whole number, got " + ShortValue(v), Range(min, max));
    }
  } else {
    Fail(key, "expected an integer, got " + JsonTypeName(v) + " " + ShortValue(v), Range(min, max));
  }
  if (value < min) {
    Fail(key, std::string(key) + "=" + std::to_string(value) + (value <= 0 && min > 0 ? " must be positive" : " is too small"),
         Range(min, max));
  }
  if (value > max) Fail(key, std::string(key) + "=" + std::to_string(value) + " is too large", Range(min, max));
  return value;
}

int64_t JsonReader::IntOr(std::string_view key, int64_t fallback, int64_t min, int64_t max) {
  return Has(key) ? Int(key, min, max) : fallback;
}

double JsonReader::Number(std::string_view key, double min, double max) {
  const json& v = Required(key);
  if (!v.is_number()) Fail(key, "expected a number, got " + JsonTypeName(v) + " " + ShortValue(v));
  const double value = v.get<double>();
  if (!std::isfinite(value) || value < min || value > max) {
    std::ostringstream valid;
    valid << min << " to " << max;
    Fail(key, std::string(key) + "=" + ShortValue(v) + " is out of range", valid.str());
  }
  return value;
}

double JsonReader::NumberOr(std::string_view key, double fallback, double min, double max) {
  return Has(key) ? Number(key, min, max) : fallback;
}

bool JsonReader::Bool(std::string_view key) {
  const json& v = Required(key);
  if (!v.is_boolean()) Fail(key, "expected true or false, got " + JsonTypeName(v) + " " + ShortValue(v), "true, false");
  return v.get<bool>();
}

bool JsonReader::BoolOr(std::string_view key, bool fallback) { return Has(key) ? Bool(key) : fallback; }

std::string JsonReader::String(std::string_view key) {
  const json& v = Required(key);
  if (!v.is_string()) Fail(key, "expected a string, got " + JsonTypeName(v) + " " + ShortValue(v));
  return v.get<std::string>();
}

std::string JsonReader::StringOr(std::string_view key, std::string fallback) {
  return Has(key) ? String(key) : fallback;
}

std::string JsonReader::Enum(std::string_view key, const std::vector<std::string>& allowed) {
  std::string value = String(key);
  for (const std::string& a : allowed) {
    if (a == value) return value;
  }
  Fail(key, "unknown value '" + value + "'" + (DidYouMean(value, allowed).empty() ? "" : "; " + DidYouMean(value, allowed)),
       JoinNames(allowed));
}

std::string JsonReader::EnumOr(std::string_view key, std::string fallback, const std::vector<std::string>& allowed) {
  return Has(key) ? Enum(key, allowed) : fallback;
}

std::vector<std::string> JsonReader::StringList(std::string_view key) {
  const json& v = Required(key);
  if (!v.is_array()) Fail(key, "expected an array of strings, got " + JsonTypeName(v));
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      Fail(std::string(key) + "/" + std::to_string(i), "expected a string, got " + JsonTypeName(v[i]));
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

std::vector<int64_t> JsonReader::IntList(std::string_view key, int64_t min, int64_t max) {
  const json& v = Required(key);
  if (!v.is_array()) Fail(key, "expected an array of integers, got " + JsonTypeName(v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = std::string(key) + "/" + std::to_string(i);
    if (!v[i].is_number_integer()) Fail(item, "expected an integer, got " + JsonTypeName(v[i]), Range(min, max));
    if (v[i].is_number_unsigned() && v[i].get<uint64_t>() > static_cast<uint64_t>(max)) {
      Fail(item, "value is too large", Range(min, max));
    }
    const int64_t x = v[i].get<int64_t>();
    if (x < min || x > max) Fail(item, "value " + std::to_string(x) + " is out of range", Range(min, max));
    out.push_back(x);
  }
  return out;
}

std::optional<JsonReader> JsonReader::Object(std::string_view key) {
  const json& v = Get(key);
  if (v.is_null()) return std::nullopt;
  return JsonReader(v, where_, pointer_ + "/" + std::string(key));
}

const json& JsonReader::Raw(std::string_view key) { return Required(key); }

void JsonReader::Finish() const {
  std::vector<std::string> known(known_.begin(), known_.end());
  for (const auto& item : value_.items()) {
    if (known_.count(item.key())) continue;
    const std::string suggestion = DidYouMean(item.key(), known);
    throw InputError(Where(item.key()),
                     "unknown key '" + item.key() + "'" + (suggestion.empty() ? "" : "; " + suggestion),
                     JoinNames(known), "remove it or fix its spelling");
  }
}

}  // namespace shardsim
