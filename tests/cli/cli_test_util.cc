#include "tests/cli/cli_test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>

namespace shardsim::cli_test {
namespace {

// Seconds before a run is killed as hung: far beyond any normal run, even under sanitizers.
constexpr unsigned kHangGuardSeconds = 300;

std::string Quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t'\"\\$`*?;&|<>(){}") == std::string::npos) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string Describe(const CliResult& r) {
  std::string status = r.exited ? "exit status " + std::to_string(r.exit_code)
                                 : "killed by signal " + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")";
  return "\n  command: " + r.command + "\n  " + status + "\n  stdout: [" + r.out.substr(0, 2000) + "]\n  stderr: [" +
         r.err.substr(0, 4000) + "]";
}

}  // namespace

CliResult RunShardsimWith(const std::vector<std::string>& base, const std::vector<std::string>& extra) {
  std::vector<std::string> args = base;
  args.insert(args.end(), extra.begin(), extra.end());
  return RunShardsim(args);
}

CliResult RunShardsim(const std::vector<std::string>& args) {
  CliResult result;
  result.command = SHARDSIM_BIN;
  for (const std::string& arg : args) result.command += " " + Quote(arg);

  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  std::vector<std::string> argv_storage = {SHARDSIM_BIN};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(out_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[0]);
    close(err_pipe[1]);
    alarm(kHangGuardSeconds);  // survives exec: a hung binary dies of SIGALRM
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);

  // Drain both pipes together so neither can fill up and block the child.
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }

  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

int CountLines(std::string_view text) {
  int lines = 0;
  for (char c : text) lines += c == '\n' ? 1 : 0;
  if (!text.empty() && text.back() != '\n') ++lines;
  return lines;
}

::testing::AssertionResult IsInputError(const CliResult& r, const std::vector<std::string>& words) {
  constexpr std::string_view kPrefix = "shardsim: error: ";
  if (!r.exited) return ::testing::AssertionFailure() << "crashed instead of exiting with status 2" << Describe(r);
  if (r.exit_code != 2) return ::testing::AssertionFailure() << "expected exit status 2" << Describe(r);
  if (!r.out.empty()) return ::testing::AssertionFailure() << "expected nothing on stdout" << Describe(r);
  if (CountLines(r.err) != 1 || r.err.back() != '\n') {
    return ::testing::AssertionFailure() << "expected exactly one newline-terminated stderr line, got " << CountLines(r.err)
                                         << Describe(r);
  }
  if (!r.err.starts_with(kPrefix)) return ::testing::AssertionFailure() << "expected '" << kPrefix << "' first" << Describe(r);
  for (const std::string& word : words) {
    if (r.err.find(word) == std::string::npos) {
      return ::testing::AssertionFailure() << "expected the message to contain '" << word << "'" << Describe(r);
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult IsJsonSuccess(const CliResult& r, nlohmann::json* parsed) {
  if (!r.exited || r.exit_code != 0) return ::testing::AssertionFailure() << "expected exit status 0" << Describe(r);
  if (!r.err.empty()) return ::testing::AssertionFailure() << "expected nothing on stderr" << Describe(r);
  nlohmann::json value = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) {
    return ::testing::AssertionFailure() << "expected stdout to be exactly one JSON object" << Describe(r);
  }
  *parsed = std::move(value);
  return ::testing::AssertionSuccess();
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "shardsim_cli_test_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::system_error(errno, std::generic_category(), "mkdtemp");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::PathOf(const std::string& name) const { return (path_ / name).string(); }

std::string TempDir::Write(const std::string& name, const std::string& content) const {
  const std::filesystem::path file = path_ / name;
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out << content;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + file.string());
  return file.string();
}

}  // namespace shardsim::cli_test
