// The SimGrid side of the step simulation (internal to sim/): plays one step of a prepared
// StepSetup over `microbatches` micro-batches in this process, and the result it hands back to
// the parent, as plain records.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/step_setup.h"

namespace shardsim::sim {

// One span of the timeline, compact (the parent names it).
struct RawEvent {
  enum What : int8_t { kLayerOp, kStepOp, kSend, kReceive } what = kLayerOp;
  int8_t waited = 0;      // 1: the compute stream waiting for this (overlapped) collective
  int8_t stream = 0;      // strategies::Stream
  int8_t layer_program = 0;  // kLayerOp: its index in StepProgram::layer_programs (LayerRun::program)
  int8_t phase = 0;       // kLayerOp: strategies::Phase
  int32_t set = 0;
  int32_t op = -1;        // kLayerOp: index in the layer program; kStepOp: in the stage's step ops
  int32_t label = 0;      // decoder layer index, or -1 embedding, -2 head; kSend/kReceive: chunk
  int32_t microbatch = -1;
  int32_t comm = -1;      // the set's CommPlan, or the PipeSend for kSend
  int32_t waited_kind = -1;  // waits: ExposedByKind index
  int64_t flow_id = -1;   // kSend/kReceive
  double start_s = 0, end_s = 0;
};

struct SetResult {
  double end_s = 0;
  double compute_s = 0;
  double bubble_s = 0;
  std::array<double, strategies::kStreams> stream_busy_s{};  // collectives' durations per stream
  ExposedByKind exposed;                   // compute stream blocked, per (stream, collective)
  double comm_waited_s = 0;                // of which waits on overlapped collectives
  double overlapped_issued_s = 0;          // durations of overlapped collectives
};

struct EngineResult {
  std::vector<SetResult> sets;
  // Per set, per CommPlan: executions this set launched (the last of a group to arrive launches
  // the group's flows) and their simulated seconds summed.
  std::vector<std::vector<int64_t>> comm_runs;
  std::vector<std::vector<double>> comm_seconds;
  std::vector<std::vector<int64_t>> send_runs;        // per set, per PipeSend
  std::vector<std::vector<double>> send_seconds;
  int64_t flows = 0, activities = 0;
  double wall_s = 0;
  int64_t peak_rss_bytes = 0;
  std::vector<RawEvent> events;
};

// Runs the engine (call in a child process: one SimGrid engine per process). `timeline`: keep
// events. `progress`: a progress line on stderr after a second of wall time.
EngineResult RunStepEngine(const StepSetup& setup, int64_t microbatches, bool timeline, bool progress, int64_t direct_flows);

std::string Serialize(const EngineResult& result);
EngineResult Deserialize(const std::string& bytes);

}  // namespace shardsim::sim
