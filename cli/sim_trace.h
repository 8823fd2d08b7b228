// The simulated step as a Chrome trace (`shardsim simulate --trace`), in the conventions of
// PyTorch profiler (Kineto) traces, for Perfetto or chrome://tracing: one process per simulated
// device, one thread per stream, one complete event per timeline event, flow arrows for the
// pipeline's transfers.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "sim/simulate.h"

namespace shardsim::cli {

// {"traceEvents": [...], "displayTimeUnit": "ms", "shardsim": {...}}. Per device (pid = rank):
// process_name "rank R (stage S)" (", stands for N devices" when folded) and process_sort_index R;
// per stream it used (tid = the strategies::Stream value, compute first): thread_name and
// thread_sort_index. Every TimelineEvent is one "X" event: name its key, cat EventCategory
// (cli/sim_view.h), ts and dur in microseconds, args with the op's name and key parts, and for
// communication the collective, bytes, group_size, group_ranks, axes and uncontended_us. An event
// with a flow_id adds a flow event of cat "pipeline" and that id at its start: "s" on the send,
// "f" with "bp":"e" on the receiving task. "shardsim" holds the model, the plan in one line and as
// JSON, the step time, each device's stage and what was folded.
nlohmann::json ChromeTrace(const sim::SimReport& report, const strategies::StepProgram& program);

}  // namespace shardsim::cli
