// What one play of the step simulation will create on SimGrid (sim/des_budget.h's DesLoad),
// counted from the prepared step before any engine starts (internal to sim/): the hosts and routes
// of the platform, the actors of every actor set, and every launch of flows the play makes (each
// collective once per layer and micro-batch, step-level ones once or once per layer bucket, the
// pipeline transfers once per micro-batch and stage boundary), with the size of each launch.
#pragma once

#include <cstdint>

#include "sim/des_budget.h"
#include "sim/step_setup.h"

namespace shardsim::sim {

// `microbatches`: the play's micro-batches; `timeline`: every op's events are kept.
DesLoad StepLoad(const StepSetup& setup, int64_t microbatches, bool timeline, int64_t direct_flows);

}  // namespace shardsim::sim
