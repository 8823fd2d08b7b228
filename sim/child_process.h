// A SimGrid engine per simulation: SimGrid allows one engine per process, so each simulation
// runs in a forked child that writes its result on a pipe. Several children may run at once.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace shardsim::sim {

struct Child {
  pid_t pid = -1;
  int fd = -1;  // read end of the child's pipe
};

// Forks a child that runs `work(write_fd)` and exits (status 2 with the message on stderr when
// it throws). Throws std::runtime_error when the fork or pipe fails.
Child StartChild(const std::function<void(int write_fd)>& work);

// Reads everything the child wrote, waits for it and returns its output. Throws
// std::runtime_error naming the signal or exit status when it failed.
std::string FinishChild(Child child);

// The SimGrid engine's command line for both engines (CM02 flows that match alpha-beta alone, no
// cross-traffic, TCP window off, quiet), named `program`.
std::vector<std::string> SimGridArguments(const std::string& program);

// Writes all of `data` to `fd` (the child side); exits the child with status 3 when it cannot.
void WriteAll(int fd, const std::string& data);

}  // namespace shardsim::sim
