// A SimGrid engine per simulation: SimGrid allows one engine per process, so each simulation
// runs in a forked child that writes its result on a pipe. Several children may run at once.
// The parent guards them: past a wall-time deadline or a memory ceiling (sim/des_budget.h's
// DesLimits) it kills every child, reaps it and throws one InputError naming the limit; a child
// also dies with its parent (PR_SET_PDEATHSIG), so no simulation outlives the command.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "sim/des_budget.h"

namespace shardsim::sim {

struct Child {
  pid_t pid = -1;
  int fd = -1;  // read end of the child's pipe
  std::chrono::steady_clock::time_point started;
  double inherited_bytes = 0;  // the parent's resident memory at the fork (shared, not the child's own)
};

// Forks a child that runs `work(write_fd)` and exits (status 2 with the message on stderr when
// it throws). Throws std::runtime_error when the fork or pipe fails.
Child StartChild(const std::function<void(int write_fd)>& work);

// How the parent guards running children.
struct ChildGuard {
  DesLimits limits;           // max_seconds: wall time since the first child started;
                              // max_memory_bytes (0: the default): resident memory the children
                              // add together, each its resident size (/proc/PID/statm, read every
                              // 50 ms) less what it shared with the parent at the fork
  std::string what;           // the simulation, in the errors ("the SimGrid step simulation")
  std::string hint;           // what to do instead, in the errors
  double estimated_seconds = 0;  // quoted in the errors (0: not quoted)
  double estimated_bytes = 0;
  bool clear_progress_line = false;  // a child may have left a progress line on stderr
};

// Reads everything each child writes, waits for all of them and returns their outputs in order.
// When a limit of `guard` is passed, kills and reaps every child and throws InputError naming the
// limit's flag. Throws std::runtime_error naming the signal or exit status when a child fails
// (after killing and reaping the others).
std::vector<std::string> FinishChildren(std::vector<Child> children, const ChildGuard& guard);

// The SimGrid engine's command line for both engines (CM02 flows that match alpha-beta alone, no
// cross-traffic, TCP window off, quiet), named `program`.
std::vector<std::string> SimGridArguments(const std::string& program);

// Writes all of `data` to `fd` (the child side); exits the child with status 3 when it cannot.
void WriteAll(int fd, const std::string& data);

}  // namespace shardsim::sim
