// What this machine has free, for refusing work that would not fit before starting it.
#pragma once

#include <cstdint>

namespace shardsim {

// MemAvailable from /proc/meminfo in bytes (what can be allocated without swapping), or -1 when
// it cannot be read.
int64_t AvailableMemoryBytes();

// Cores this process may run on (at least 1).
int64_t UsableCores();

}  // namespace shardsim
