// What the Chrome trace and the report page of `shardsim simulate` both read from a SimReport:
// each simulated device's stage, the devices the page draws, an event's category, the plan in one
// line.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/simulate.h"

namespace shardsim::cli {

// Rank -> pipeline stage of every device in report.devices or report.events: DeviceUse's stage,
// else the first part of an event's key (stage/layer/op/microbatch), else 0.
std::map<int64_t, int64_t> DeviceStages(const sim::SimReport& report);

// The devices the page's timeline draws: the lowest rank of each stage present in report.events,
// in stage order.
std::vector<int64_t> DrawnDevices(const sim::SimReport& report);

// "wait" for a stall on communication (name "wait ..."), "pipeline" for the pipeline stream and
// for a pipeline receive (the compute stream waiting for its input: the bubble), "compute" for the
// compute stream's other ops, else "collective".
std::string EventCategory(const sim::TimelineEvent& event);

// Whether `event` is a pipeline receive (strategies/op_names.h): the compute stream waiting for a
// neighbour's activations or gradients.
bool IsPipelineReceive(const sim::TimelineEvent& event);

// "data=2 x tensor=2 x pipeline=2, 1f1b, 8 micro-batches of 1, ZeRO 1, recompute selective, bf16".
std::string PlanSummary(const strategies::StepProgram& program);

}  // namespace shardsim::cli
