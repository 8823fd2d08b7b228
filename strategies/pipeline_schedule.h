// Pipeline schedules as explicit per-stage task orders (not a bubble formula): the bubble comes
// out of playing them. GPipe (Huang et al. 2019); 1F1B (PipeDream-Flush, Narayanan et al. 2019);
// interleaved 1F1B with v model chunks per stage (Narayanan et al. 2021, Megatron's order);
// ZB-H1 (Qi et al. 2023: backward split into B and W, W deferred to fill the cooldown bubble at
// 1F1B's activation memory); DualPipe (DeepSeek-V3: two directions, two model copies per stage).
// Collectives: a point-to-point send of the [B, S, D] activation (S/t with sequence parallel)
// between neighbouring stages per micro-batch and chunk, forward; its gradient backward.
#pragma once

#include <cstdint>
#include <vector>

#include "core/plan_spec.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// The task order of `stage` (0-based, of `stages`) for `microbatches` micro-batches and
// `chunks` model chunks per stage. Backward appears as B then W; schedules that do not split
// the backward put each W right after its B. REQUIRES: the plan checks of ValidatePlan (for
// interleaving, microbatches a multiple of stages; for DualPipe, an even number of stages and of
// micro-batches, at least twice the stages). DualPipe's tasks use chunk 0 for the micro-batches
// [0, m/2) flowing down and chunk 1 for [m/2, m) flowing up.
std::vector<Task> ScheduleStage(PipelineSchedule schedule, int64_t stages, int64_t microbatches, int64_t chunks, int64_t stage);

}  // namespace shardsim::strategies
