#include "sim/child_process.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "core/error.h"
#include "core/units.h"

namespace shardsim::sim {
namespace {

constexpr int kPollMs = 50;  // how often the parent looks at the deadline and the children's memory

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Resident bytes of a running process (0 once it has exited or cannot be read).
double ResidentBytes(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/statm", static_cast<int>(pid));
  FILE* file = std::fopen(path, "r");
  if (file == nullptr) return 0;
  long long pages = 0, resident = 0;
  const int got = std::fscanf(file, "%lld %lld", &pages, &resident);
  std::fclose(file);
  return got == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : 0;
}

// The children of one FinishChildren call: whatever is still running when it is destroyed
// (a limit passed, a child failed, an exception) is killed and reaped, and every pipe closed.
class Running {
 public:
  explicit Running(std::vector<Child> children) : children_(std::move(children)) {}
  ~Running() { KillAll(); }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;

  std::vector<Child>& children() { return children_; }

  void Close(size_t i) {
    if (children_[i].fd >= 0) close(children_[i].fd);
    children_[i].fd = -1;
  }
  // Kills every child still running, waits for each and closes every pipe.
  void KillAll() {
    for (Child& c : children_) {
      if (c.pid >= 0) kill(c.pid, SIGKILL);
    }
    for (size_t i = 0; i < children_.size(); ++i) {
      int status = 0;
      while (children_[i].pid >= 0 && waitpid(children_[i].pid, &status, 0) < 0 && errno == EINTR) {
      }
      children_[i].pid = -1;
      Close(i);
    }
  }
  // Resident memory the running children added since their fork.
  double Resident() const {
    double total = 0;
    for (const Child& c : children_) total += c.pid >= 0 ? std::max(0.0, ResidentBytes(c.pid) - c.inherited_bytes) : 0;
    return total;
  }

 private:
  std::vector<Child> children_;
};

std::string Estimated(double value, const std::string& text) { return value > 0 ? " (estimated beforehand: " + text + ")" : ""; }

}  // namespace

Child StartChild(const std::function<void(int write_fd)>& work) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("cannot create a pipe for the simulation");
  std::cout.flush();
  std::cerr.flush();
  const pid_t parent = getpid();
  const double inherited = ResidentBytes(parent);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error("cannot fork the simulation process");
  }
  if (pid == 0) {
    close(fds[0]);
    // Die with the parent (killed by a signal, a timeout, Ctrl-C): no simulation outlives it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    try {
      work(fds[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardsim: the simulation failed: %s\n", e.what());
      _exit(2);
    }
    _exit(0);
  }
  close(fds[1]);
  return {pid, fds[0], std::chrono::steady_clock::now(), inherited};
}

std::vector<std::string> FinishChildren(std::vector<Child> children, const ChildGuard& guard) {
  std::vector<std::string> outputs(children.size());
  if (children.empty()) return outputs;
  auto start = children.front().started;
  for (const Child& c : children) start = std::min(start, c.started);
  Running running(std::move(children));
  const double max_seconds = guard.limits.max_seconds;
  const double max_bytes = MemoryLimitBytes(guard.limits);
  auto clear_line = [&] {
    if (guard.clear_progress_line) std::fprintf(stderr, "\r%60s\r", "");
  };
  auto last_memory_check = start;
  auto check_limits = [&] {
    const double elapsed = Since(start);
    if (max_seconds > 0 && elapsed >= max_seconds) {
      running.KillAll();
      clear_line();
      throw InputError(guard.limits.seconds_flag,
                       guard.what + " was stopped after " + FormatSeconds(elapsed) + " of wall time, its limit" +
                           Estimated(guard.estimated_seconds, FormatSeconds(guard.estimated_seconds)),
                       "at most " + DescribeTimeLimit(guard.limits), guard.hint + "; or raise " + guard.limits.seconds_flag);
    }
    if (Since(last_memory_check) * 1000 < kPollMs) return;
    last_memory_check = std::chrono::steady_clock::now();
    const double resident = running.Resident();
    if (resident > max_bytes) {
      running.KillAll();
      clear_line();
      throw InputError(guard.limits.memory_flag,
                       guard.what + " was stopped at " + FormatBinaryBytes(resident) + " of its own resident memory, past its limit" +
                           Estimated(guard.estimated_bytes, FormatBinaryBytes(guard.estimated_bytes)),
                       "at most " + DescribeMemoryLimit(guard.limits), guard.hint + "; or raise " + guard.limits.memory_flag);
    }
  };

  std::vector<Child>& kids = running.children();
  // Child i closed its pipe, so it is ending: reap it (still under the limits) and throw when it
  // failed (the others are then killed).
  auto reap = [&](size_t i) {
    while (kids[i].pid >= 0) {
      int status = 0;
      const pid_t done = waitpid(kids[i].pid, &status, WNOHANG);
      if (done == kids[i].pid) {
        kids[i].pid = -1;
        if (WIFSIGNALED(status)) {
          throw std::runtime_error(std::string("the simulation process was killed by signal ") + strsignal(WTERMSIG(status)));
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          throw std::runtime_error("the simulation process failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
        }
      } else if (done < 0 && errno != EINTR) {
        throw std::runtime_error("cannot wait for the simulation process");
      } else {
        check_limits();
        usleep(1000);
      }
    }
  };
  char buffer[1 << 16];
  size_t open = kids.size();
  while (open > 0) {
    check_limits();
    std::vector<pollfd> polled;
    std::vector<size_t> index;
    for (size_t i = 0; i < kids.size(); ++i) {
      if (kids[i].fd < 0) continue;
      polled.push_back({kids[i].fd, POLLIN, 0});
      index.push_back(i);
    }
    int wait_ms = kPollMs;
    if (max_seconds > 0) wait_ms = std::clamp(static_cast<int>((max_seconds - Since(start)) * 1000) + 1, 1, kPollMs);
    const int ready = poll(polled.data(), polled.size(), wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot wait for the simulation process");
    }
    for (size_t k = 0; k < polled.size(); ++k) {
      if (polled[k].revents == 0) continue;
      const size_t i = index[k];
      const ssize_t got = read(kids[i].fd, buffer, sizeof buffer);
      if (got > 0) {
        outputs[i].append(buffer, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        running.Close(i);
        --open;
        reap(i);
      }
    }
  }
  return outputs;
}

std::vector<std::string> SimGridArguments(const std::string& program) {
  std::vector<std::string> args = {program, "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0", "--cfg=network/TCP-gamma:0",
                                   "--log=root.thres:critical"};
#ifdef SHARDSIM_SANITIZE
  // AddressSanitizer cannot follow SimGrid's hand-made stack switches; system threads it can.
  args.push_back("--cfg=contexts/factory:thread");
#endif
  return args;
}

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t wrote = write(fd, data.data() + done, data.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) _exit(3);
    done += static_cast<size_t>(wrote);
  }
}

}  // namespace shardsim::sim
