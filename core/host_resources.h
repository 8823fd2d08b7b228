// What this machine has free, for refusing work that would not fit before starting it.
#pragma once

#include <cstdint>

namespace shardsim {

// MemAvailable from /proc/meminfo in bytes (what can be allocated without swapping), or -1 when
// it cannot be read.
int64_t AvailableMemoryBytes();

// Cores this process may run on (at least 1).
int64_t UsableCores();

// This process's resident set now (VmRSS in /proc/self/status) and its peak since the process
// started or the last ResetProcessPeakResident (VmHWM), in bytes; -1 when they cannot be read.
int64_t ProcessResidentBytes();
int64_t ProcessPeakResidentBytes();
// Restarts the peak from the resident set now (writes 5 to /proc/self/clear_refs, Linux 4.0 and
// later); false where that is refused, the peak then running from the process's start.
bool ResetProcessPeakResident();

}  // namespace shardsim
