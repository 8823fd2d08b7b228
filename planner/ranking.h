// How the search orders plans: by predicted throughput, then memory headroom, then simplicity,
// and which plans are on the Pareto frontier of throughput against memory per device.
#pragma once

#include <vector>

#include "planner/search.h"

namespace shardsim::planner {

// A strict, deterministic order (whatever the threads' merge order): faster first; equal
// throughput goes to less memory, then to fewer parallel axes (the simpler plan), then to the
// default mesh order, then to the plan fields.
bool Better(const RankedPlan& a, const RankedPlan& b);

// Near misses closest to fitting first; equal ones in the plan fields' order (deterministic).
bool Closer(const Miss& a, const Miss& b);

// Plans that predict the same step exactly (ZeRO-3 over data and ZeRO-0 over fsdp, say).
bool SameOutcome(const RankedPlan& a, const RankedPlan& b);

// Adds `plan` to a frontier of plans no other beats on both tokens/s and memory (one plan per
// outcome), dropping those it beats.
void AddToFrontier(std::vector<RankedPlan>& frontier, const RankedPlan& plan);

}  // namespace shardsim::planner
