#include "core/json_input.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

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

// Input bytes in messages: printable ASCII as is, anything else as \xHH, so that a message stays
// one line of valid text whatever the file held.
std::string Printable(const std::string& bytes) {
  std::string out;
  for (const unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    }
  }
  return out;
}

// Spec files are a few levels deep. The limit keeps every later recursive walk of a value (dump,
// copy, compare) far from the stack's end, whatever the file holds.
constexpr size_t kMaxJsonDepth = 64;

// Byte offset of the bracket that first opens nesting level `level` (1 = the outermost), outside
// strings; text.size() when none does.
size_t OffsetOfLevel(const std::string& text, size_t level) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth == level) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return text.size();
}

// Builds the value as nlohmann's own parser does, and keeps what its errors lack: the JSON
// pointer of the value being read (its number-overflow error has no position), a nesting limit,
// and duplicate keys (which nlohmann would silently resolve to the last one).
class DomBuilder : public json::json_sax_t {
 public:
  struct Failure {
    enum Kind { kSyntax, kNumberOutOfRange, kTooDeep, kDuplicateKey } kind = kSyntax;
    size_t position = 0;   // bytes read when the parser stopped (syntax and number errors)
    std::string token;     // the offending literal, or the duplicate key
    std::string message;   // nlohmann's message
    std::string pointer;   // where in the document ("/mesh/tensor")
  };

  bool null() override { return Add(json(nullptr)); }
  bool boolean(bool value) override { return Add(json(value)); }
  bool number_integer(number_integer_t value) override { return Add(json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return Add(json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return Add(json(value)); }
  bool string(string_t& value) override { return Add(json(std::move(value))); }
  bool binary(binary_t& value) override { return Add(json::binary(std::move(value))); }  // never from JSON text
  bool start_object(std::size_t) override { return Open(json::object()); }
  bool start_array(std::size_t) override { return Open(json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& key) override {
    key_ = std::move(key);
    if (open_.back()->contains(key_)) return Fail(Failure::kDuplicateKey, 0, key_, "");
    return true;
  }
  bool parse_error(std::size_t position, const std::string& token, const json::exception& e) override {
    return Fail(e.id == 406 ? Failure::kNumberOutOfRange : Failure::kSyntax, position, token, e.what());
  }

  json TakeRoot() { return std::move(root_); }
  const Failure& failure() const { return failure_; }

 private:
  // The pointer of the value the parser reads next: the open containers' tokens and its own.
  std::string NextPointer() const {
    std::string pointer;
    for (const std::string& token : path_) pointer += "/" + token;
    if (!open_.empty()) pointer += "/" + NextToken();
    return pointer;
  }
  std::string NextToken() const {
    if (open_.back()->is_array()) return std::to_string(open_.back()->size());
    std::string token;  // RFC 6901 escapes
    for (const char c : key_) token += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
    return token;
  }

  bool Fail(Failure::Kind kind, size_t position, const std::string& token, const std::string& message) {
    failure_ = {kind, position, token, message, NextPointer()};
    return false;
  }

  // Places `value` in the open container (or as the root) and returns where it now lives.
  json* Place(json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    return &(parent[key_] = std::move(value));
  }
  bool Add(json&& value) {
    Place(std::move(value));
    return true;
  }
  bool Open(json&& container) {
    if (open_.size() >= kMaxJsonDepth) return Fail(Failure::kTooDeep, 0, "", "");
    std::string token = open_.empty() ? "" : NextToken();
    open_.push_back(Place(std::move(container)));
    if (open_.size() > 1) path_.push_back(std::move(token));
    return true;
  }
  bool Close() {
    if (open_.size() > 1) path_.pop_back();
    open_.pop_back();
    return true;
  }

  json root_;
  std::vector<json*> open_;        // the containers being filled, outermost first
  std::vector<std::string> path_;  // the pointer tokens of open_[1..]
  std::string key_;                // the key of the object's next value
  Failure failure_;
};

}  // namespace

std::string ReadTextFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw InputError(path, "cannot be read: " + ec.message(), "", "check the path and its folders' permissions");
  }
  if (ec || !fs::exists(status)) {
    throw InputError(path, "file not found", "", "check the path");
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
  DomBuilder builder;
  if (json::sax_parse(text, &builder)) return builder.TakeRoot();
  const DomBuilder::Failure& f = builder.failure();
  const std::string at = f.pointer.empty() ? "/" : f.pointer;
  switch (f.kind) {
    case DomBuilder::Failure::kTooDeep: {
      const auto [line, column] = LineColumn(text, OffsetOfLevel(text, kMaxJsonDepth + 1));
      throw InputError(source + ":" + std::to_string(line) + ":" + std::to_string(column),
                       "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (at " + at + ")",
                       "at most " + std::to_string(kMaxJsonDepth) + " levels of objects and arrays", "spec files are a few levels deep; check the brackets");
    }
    case DomBuilder::Failure::kDuplicateKey:
      throw InputError(source + ":" + at, "key '" + Printable(f.token) + "' appears twice in the same object", "each key once",
                       "remove one of them");
    case DomBuilder::Failure::kNumberOutOfRange: {
      // The parser stops just past the literal: step back onto its first byte.
      const size_t found = text.rfind(f.token, f.position);
      const auto [line, column] = LineColumn(text, found == std::string::npos ? f.position : found);
      std::string literal = Printable(f.token);
      if (literal.size() > 40) literal = literal.substr(0, 37) + "...";
      throw InputError(source + ":" + at,
                       "number " + literal + " (line " + std::to_string(line) + ", column " + std::to_string(column) + ") is out of range",
                       "a finite number, at most about 1.8e308 in magnitude", "check the value for a typo");
    }
    case DomBuilder::Failure::kSyntax: break;
  }
  // nlohmann reports the byte just past the offending token; step back onto it.
  const auto [line, column] = LineColumn(text, f.position > 0 ? f.position - 1 : 0);
  // Keep nlohmann's explanation, drop its "[json.exception.parse_error.101] parse error at..."
  std::string reason = f.message;
  const size_t colon = reason.find(": ", reason.find("parse error"));
  if (colon != std::string::npos) reason = reason.substr(colon + 2);
  throw InputError(source + ":" + std::to_string(line) + ":" + std::to_string(column), "malformed JSON: " + Printable(reason), "",
                   "fix the JSON syntax at that position");
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
                     "expected a JSON object, got " + JsonTypeName(value_), "an object {\"key\": value, ...}",
                     "the docs of the flag that read it (docs/cli.md) show the object's keys");
  }
}

std::string JsonReader::Where(std::string_view key) const {
  return where_ + ":" + pointer_ + "/" + std::string(key);
}

void JsonReader::Fail(std::string_view key, const std::string& what, const std::string& valid,
                      const std::string& hint) const {
  // Without a hint of its own, where the input's fields are described (SetFieldDocs).
  throw InputError(Where(key), what, valid, hint.empty() ? docs_ : hint);
}

const json& JsonReader::Get(std::string_view key) {
  known_.emplace(key);
  static const json kNull;
  const auto it = value_.find(key);
  return it == value_.end() ? kNull : *it;
}

const json& JsonReader::Required(std::string_view key, const std::string& valid) {
  const json& v = Get(key);
  if (!v.is_null()) return v;
  // A missing key is often a misspelt one: name the unknown key it was probably meant to be. Only
  // a near spelling (two edits at most): keys not read yet are not known to be valid either, and
  // a valid key further off ('mtp_layers' for 'num_layers') is not a typo of it.
  std::vector<std::string> unknown;
  for (const auto& item : value_.items()) {
    if (!known_.count(item.key())) unknown.push_back(item.key());
  }
  const std::vector<std::string> close = ClosestNames(key, unknown, 1);
  if (!close.empty() && EditDistance(close[0], key) <= 2) {
    throw InputError(Where(close[0]), "unknown key '" + close[0] + "'; did you mean '" + std::string(key) + "'?",
                     "", "'" + std::string(key) + "' is required");
  }
  Fail(key, "missing required key '" + std::string(key) + "'", valid, "add '" + std::string(key) + "'");
}

bool JsonReader::Has(std::string_view key) { return !Get(key).is_null(); }

int64_t JsonReader::Int(std::string_view key, int64_t min, int64_t max) {
  const json& v = Required(key, Range(min, max));
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
  std::ostringstream valid;
  valid << min << " to " << max;
  const json& v = Required(key, valid.str());
  if (!v.is_number()) Fail(key, "expected a number, got " + JsonTypeName(v) + " " + ShortValue(v), valid.str());
  const double value = v.get<double>();
  if (!std::isfinite(value) || value < min || value > max) {
    Fail(key, std::string(key) + "=" + ShortValue(v) + " is out of range", valid.str());
  }
  return value;
}

double JsonReader::NumberOr(std::string_view key, double fallback, double min, double max) {
  return Has(key) ? Number(key, min, max) : fallback;
}

bool JsonReader::Bool(std::string_view key) {
  const json& v = Required(key, "true, false");
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
  const json& v = Required(key, JoinNames(allowed));
  if (!v.is_string()) Fail(key, "expected a string, got " + JsonTypeName(v) + " " + ShortValue(v), JoinNames(allowed));
  std::string value = v.get<std::string>();
  for (const std::string& a : allowed) {
    if (a == value) return value;
  }
  // A near spelling is its own hint; otherwise where the input's fields are described.
  const std::string near = DidYouMean(value, allowed);
  if (!near.empty()) throw InputError(Where(key), "unknown value '" + value + "'; " + near, JoinNames(allowed), "");
  Fail(key, "unknown value '" + value + "'", JoinNames(allowed));
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
  const json& v = Required(key, "an array of integers " + Range(min, max));
  if (!v.is_array()) Fail(key, "expected an array of integers, got " + JsonTypeName(v), "integers " + Range(min, max));
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
  JsonReader child(v, where_, pointer_ + "/" + std::string(key));
  child.docs_ = docs_;
  return child;
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
