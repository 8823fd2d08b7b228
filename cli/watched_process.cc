#include "cli/watched_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "core/error.h"

namespace shardsim::cli {
namespace {

// A signal handler reaches only what is static: the child to forward to and the signal received.
// Set around one RunWatched call at a time (shardsim runs one job at a time).
volatile sig_atomic_t forward_to = 0;
volatile sig_atomic_t received = 0;

void Forward(int signal) {
  received = signal;
  if (forward_to > 0) kill(static_cast<pid_t>(forward_to), signal);
}

// Installs Forward for the signals a user or a scheduler sends, and restores the old handlers.
class ForwardSignals {
 public:
  ForwardSignals() {
    struct sigaction action {};
    action.sa_handler = Forward;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: poll() returns so the grace period starts at once
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &old_[i]);
  }
  ~ForwardSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
};

[[noreturn]] void ExecChild(const std::vector<std::string>& argv, const std::string& stdout_path, int stderr_fd) {
  setpgid(0, 0);  // its own group: killed as one, and no terminal signals of its own
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  if (!stdout_path.empty()) {
    const int fd = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(126);
    close(fd);
  }
  dup2(stderr_fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  std::perror("shardsim: exec");
  _exit(127);
}

}  // namespace

WatchedEnd RunWatched(const std::vector<std::string>& argv, const std::string& stdout_path,
                      const std::function<void(const std::string&)>& on_line) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw InputError(argv.front(), "cannot be started (no pipe)");
  std::cout.flush();
  std::cerr.flush();
  ForwardSignals forwarding;
  received = 0;
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    throw InputError(argv.front(), "cannot be started (fork failed)");
  }
  if (child == 0) ExecChild(argv, stdout_path, fds[1]);
  setpgid(child, child);  // also here, so the group exists before any signal is forwarded
  forward_to = child;
  close(fds[1]);
  WatchedEnd end;
  std::string pending;
  std::chrono::steady_clock::time_point signalled, reaped_at;
  int status = 0;
  bool reaped = false;
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (received && !end.forwarded) end.forwarded = received, signalled = now;
    if (end.forwarded && !end.escalated && now - signalled > std::chrono::seconds(kGraceSeconds)) {
      kill(-child, SIGKILL);  // mpirun and the ranks it started here
      end.escalated = true;
    }
    if (!reaped && waitpid(child, &status, WNOHANG) == child) reaped = true, reaped_at = now;
    // A rank that outlives mpirun keeps the pipe open: it gets a moment to finish writing.
    if (reaped && now - reaped_at > std::chrono::seconds(2)) break;
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buffer[4096];
    const ssize_t got = read(fds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    pending.append(buffer, static_cast<size_t>(got));
    for (size_t newline; (newline = pending.find('\n')) != std::string::npos;) {
      on_line(pending.substr(0, newline));
      pending.erase(0, newline + 1);
    }
  }
  if (!pending.empty()) on_line(pending);
  close(fds[0]);
  while (!reaped && waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  forward_to = 0;
  if (received && !end.forwarded) end.forwarded = received;
  // Whatever of the group is left (a rank mpirun lost track of) goes with it.
  kill(-child, SIGKILL);
  if (WIFEXITED(status)) end.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) end.killed_by = WTERMSIG(status);
  return end;
}

}  // namespace shardsim::cli
