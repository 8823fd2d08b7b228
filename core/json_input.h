// Strict JSON input: reading files, parsing with line and column in errors, and reading objects
// field by field so that unknown keys, wrong types and out-of-range values are rejected by name.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace shardsim {

// Returns the whole content of `path`. Throws InputError naming `path` when it does not exist,
// is a directory or not a regular file, is over 64 MiB, cannot be read, or is empty.
std::string ReadTextFile(const std::string& path);

// Parses `text` as JSON. Throws InputError "<source>:LINE:COL: ..." on malformed input.
nlohmann::json ParseJsonText(const std::string& text, const std::string& source);

// Reads a JSON file: ReadTextFile then ParseJsonText.
nlohmann::json ReadJsonFile(const std::string& path);

// Names the JSON type of a value for messages: "string", "integer", "number", "object", ...
std::string JsonTypeName(const nlohmann::json& value);

// Reads one JSON object strictly. Each accessor names a key; Finish() then rejects every key
// that no accessor named, with the closest known key. Errors carry `where` + JSON pointer,
// e.g. "plan.json:/mesh/tensor".
class JsonReader {
 public:
  // REQUIRES: `value` outlives the reader. Throws InputError when `value` is not an object.
  JsonReader(const nlohmann::json& value, std::string where, std::string pointer = "");

  bool Has(std::string_view key);  // present and not null; marks the key as known

  int64_t Int(std::string_view key, int64_t min, int64_t max);
  int64_t IntOr(std::string_view key, int64_t fallback, int64_t min, int64_t max);
  double Number(std::string_view key, double min, double max);
  double NumberOr(std::string_view key, double fallback, double min, double max);
  bool Bool(std::string_view key);
  bool BoolOr(std::string_view key, bool fallback);
  std::string String(std::string_view key);
  std::string StringOr(std::string_view key, std::string fallback);
  // A string that must be one of `allowed`.
  std::string Enum(std::string_view key, const std::vector<std::string>& allowed);
  std::string EnumOr(std::string_view key, std::string fallback, const std::vector<std::string>& allowed);
  std::vector<std::string> StringList(std::string_view key);
  std::vector<int64_t> IntList(std::string_view key, int64_t min, int64_t max);
  // A nested object (nullopt when absent or null).
  std::optional<JsonReader> Object(std::string_view key);
  // The raw value of a key (marks it known); REQUIRES: Has(key).
  const nlohmann::json& Raw(std::string_view key);

  // Throws InputError for the first key that no accessor named.
  void Finish() const;
  // Where this input's fields are described: the hint of an error that has none of its own (an
  // unknown enum value with no near spelling, a number out of range; nested objects inherit it).
  void SetFieldDocs(std::string docs) { docs_ = std::move(docs); }

  // Error helpers naming a key of this object.
  [[noreturn]] void Fail(std::string_view key, const std::string& what, const std::string& valid = "",
                         const std::string& hint = "") const;
  std::string Where(std::string_view key) const;

 private:
  const nlohmann::json& Get(std::string_view key);
  // The key's value; a missing key fails naming `valid`, what the key takes.
  const nlohmann::json& Required(std::string_view key, const std::string& valid = "");

  const nlohmann::json& value_;
  std::string where_;
  std::string pointer_;
  std::set<std::string, std::less<>> known_;
  std::string docs_;
};

}  // namespace shardsim
