#include "sim/child_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>

namespace shardsim::sim {

Child StartChild(const std::function<void(int write_fd)>& work) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("cannot create a pipe for the simulation");
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error("cannot fork the simulation process");
  }
  if (pid == 0) {
    close(fds[0]);
    try {
      work(fds[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardsim: the simulation failed: %s\n", e.what());
      _exit(2);
    }
    _exit(0);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

std::string FinishChild(Child child) {
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(child.fd, buffer, sizeof buffer);
    if (got > 0) {
      text.append(buffer, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(child.fd);
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) throw std::runtime_error(std::string("the simulation process was killed by signal ") + strsignal(WTERMSIG(status)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("the simulation process failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
  }
  return text;
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
