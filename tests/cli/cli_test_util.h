// Helpers for end-to-end tests of the `shardsim` binary: run it as a subprocess with stdout and
// stderr captured separately, write input files into a fresh temporary folder per test, and
// check the CLI's contract for bad input (exit status 2, one `shardsim: error: ` line).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace shardsim::cli_test {

// How one run of the binary ended.
struct CliResult {
  bool exited = false;  // ended by exit(); false when killed by a signal (crash, abort, hang guard)
  int exit_code = -1;   // valid when `exited`
  int signal = 0;       // valid when !`exited`
  std::string out;      // everything written to stdout
  std::string err;      // everything written to stderr
  std::string command;  // the command line, for failure messages
};

// Runs the shardsim binary (SHARDSIM_BIN) with `args`, stdin from /dev/null. A run that takes
// longer than a generous guard (minutes, far beyond any normal run) is killed by SIGALRM, so a
// hang shows up as a failed test rather than a stuck suite.
CliResult RunShardsim(const std::vector<std::string>& args);
// RunShardsim over `base` followed by `extra` (a test's fixed command and what each case adds).
CliResult RunShardsimWith(const std::vector<std::string>& base, const std::vector<std::string>& extra);

// Lines in `text`: '\n'-terminated lines, plus a final unterminated one.
int CountLines(std::string_view text);

// Success when `result` is a bad-input failure per the CLI contract: exit status exactly 2,
// nothing on stdout, and exactly one stderr line that starts with "shardsim: error: " and
// contains every string of `words`. Failure messages show the command and what it printed.
::testing::AssertionResult IsInputError(const CliResult& result, const std::vector<std::string>& words);

// Success when `result` exited 0 with nothing on stderr and stdout is exactly one JSON object;
// that object is stored in `*parsed`.
::testing::AssertionResult IsJsonSuccess(const CliResult& result, nlohmann::json* parsed);

// A fresh temporary folder, removed with everything in it when the object is destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Absolute path of `name` inside the folder (not created).
  std::string PathOf(const std::string& name) const;
  // Writes `content` to `name` (creating parent folders) and returns its absolute path.
  std::string Write(const std::string& name, const std::string& content) const;

 private:
  std::filesystem::path path_;
};

// Fixture: each test gets its own temporary folder.
class CliTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) { return dir_.Write(name, content); }
  std::string WriteJson(const std::string& name, const nlohmann::json& value) { return dir_.Write(name, value.dump(2)); }
  std::string PathOf(const std::string& name) const { return dir_.PathOf(name); }

  TempDir dir_;
};

}  // namespace shardsim::cli_test
