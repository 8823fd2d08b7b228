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
  // stderr always comes back; stdout too unless it goes to a file, so that a write to ours that
  // fails (a full disk, a closed pipe) is seen here rather than lost inside mpirun.
  int err_pipe[2], out_pipe[2] = {-1, -1};
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw InputError(argv.front(), "cannot be started (no pipe)");
  if (stdout_path.empty() && pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(err_pipe[0]);
    close(err_pipe[1]);
    throw InputError(argv.front(), "cannot be started (no pipe)");
  }
  std::cout.flush();
  std::cerr.flush();
  ForwardSignals forwarding;
  received = 0;
  const pid_t child = fork();
  if (child < 0) {
    for (int fd : {err_pipe[0], err_pipe[1], out_pipe[0], out_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
    throw InputError(argv.front(), "cannot be started (fork failed)");
  }
  if (child == 0) {
    if (out_pipe[1] >= 0) dup2(out_pipe[1], STDOUT_FILENO);
    ExecChild(argv, stdout_path, err_pipe[1]);
  }
  setpgid(child, child);  // also here, so the group exists before any signal is forwarded
  forward_to = child;
  if (received) kill(child, received);  // a signal that came before there was a child to forward to
  close(err_pipe[1]);
  if (out_pipe[1] >= 0) close(out_pipe[1]);
  WatchedEnd end;
  std::string pending;
  std::chrono::steady_clock::time_point signalled, reaped_at;
  int status = 0;
  bool reaped = false;
  std::vector<pollfd> open_fds = {{err_pipe[0], POLLIN, 0}};
  if (out_pipe[0] >= 0) open_fds.push_back({out_pipe[0], POLLIN, 0});
  while (!open_fds.empty()) {
    const auto now = std::chrono::steady_clock::now();
    if (received && !end.forwarded) end.forwarded = received, signalled = now;
    if (end.forwarded && !end.escalated && now - signalled > std::chrono::seconds(kGraceSeconds)) {
      kill(-child, SIGKILL);  // mpirun and the ranks it started here
      end.escalated = true;
    }
    if (!reaped && waitpid(child, &status, WNOHANG) == child) reaped = true, reaped_at = now;
    // A rank that outlives mpirun keeps the pipes open: it gets a moment to finish writing.
    if (reaped && now - reaped_at > std::chrono::seconds(2)) break;
    if (poll(open_fds.data(), open_fds.size(), 200) <= 0) continue;
    for (size_t i = 0; i < open_fds.size();) {
      if (!(open_fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        ++i;
        continue;
      }
      char buffer[4096];
      const ssize_t got = read(open_fds[i].fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(open_fds[i].fd);
        open_fds.erase(open_fds.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (open_fds[i].fd == err_pipe[0]) {
        pending.append(buffer, static_cast<size_t>(got));
        for (size_t newline; (newline = pending.find('\n')) != std::string::npos;) {
          on_line(pending.substr(0, newline));
          pending.erase(0, newline + 1);
        }
      } else {
        std::cout.write(buffer, got);  // shardsim's stdout is checked when the command returns
        std::cout.flush();
      }
      ++i;
    }
  }
  if (!pending.empty()) on_line(pending);
  for (const pollfd& p : open_fds) close(p.fd);
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
