// Starting shardsim-runtime (next to this binary) under mpirun: one rank per device, spread over
// a hostfile's hosts or oversubscribing this machine's cores, as root too. `run`, `calibrate`
// and `validate` launch through here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardsim::cli {

// The hosts of an OpenMPI hostfile ("HOST slots=N" per line, # comments; docs/multi_host.md).
struct Hostfile {
  std::vector<std::string> hosts;
  std::vector<int64_t> slots;  // per host (1 where the line gives none)
  int64_t TotalSlots() const;
  // The hosts `ranks` ranks occupy: mpirun fills each host's slots in order.
  int64_t HostsFor(int64_t ranks) const;
};
// Throws InputError naming the file and line for what mpirun would not read.
Hostfile ReadHostfile(const std::string& path);

// Throws InputError unless `hostfile` reads (ReadHostfile) and has a slot for each of `ranks`.
void CheckHostfileHolds(const std::string& hostfile, int64_t ranks);

// Runs `shardsim-runtime ARGS...` under mpirun with `ranks` ranks (over `hostfile` when not
// empty); its standard output goes to `stdout_path` when not empty. Returns its exit status.
int LaunchRuntime(const std::vector<std::string>& runtime_args, int64_t ranks, const std::string& hostfile, const std::string& stdout_path = "");

}  // namespace shardsim::cli
