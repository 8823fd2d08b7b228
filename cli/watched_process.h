// Running a child program (mpirun) so that nothing outlives shardsim and every fault is seen: the
// child gets its own process group and no terminal input; its stderr comes back line by line;
// SIGINT, SIGTERM and SIGHUP sent to shardsim are forwarded to it, and if it has not ended
// kGraceSeconds later its whole process group is killed.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace shardsim::cli {

inline constexpr int kGraceSeconds = 10;

struct WatchedEnd {
  int exit_code = 0;        // the child's exit status when it exited
  int killed_by = 0;        // the signal that ended the child, or 0
  int forwarded = 0;        // the signal shardsim received and forwarded, or 0
  bool escalated = false;   // the grace period passed and the process group was killed
};

// Runs `argv` (argv[0] a path) with stdout to `stdout_path` (copied to std::cout when empty) and
// each line of its stderr handed to `on_line`. Throws InputError when it cannot be started.
WatchedEnd RunWatched(const std::vector<std::string>& argv, const std::string& stdout_path,
                      const std::function<void(const std::string&)>& on_line);

}  // namespace shardsim::cli
