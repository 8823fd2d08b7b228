// The SimGrid simulations' limits from their flags (--max-seconds, --max-host-memory): one reading
// for every command that simulates (simulate, plan --refine, validate).
#pragma once

#include <string>

#include "sim/des_budget.h"

namespace shardsim::cli {

// The defaults (sim::DesLimits) where a flag is unset: max_seconds 0, max_host_memory empty.
// Throws InputError naming --max-host-memory for a value it cannot read.
sim::DesLimits SimLimitsFrom(double max_seconds, const std::string& max_host_memory);

}  // namespace shardsim::cli
