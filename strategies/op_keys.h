// Op keys: every op of a step named the same way by the program and the runtime's trace,
// stage/layer/op/microbatch. The layer is a decoder layer's index, E for the embedding, L for the
// loss head, chunkN for a chunk's pipeline transfers, - for step-level ops (whose micro-batch is
// - too).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strategies/step_program.h"

namespace shardsim::strategies {

inline constexpr std::string_view kEmbeddingLayer = "E", kHeadLayer = "L", kStepLayer = "-";
std::string ChunkLayer(int64_t chunk);
std::string DecoderLayer(int64_t layer);
// "stage/layer/op/microbatch"; microbatch -1 writes "-".
std::string OpKey(int64_t stage, std::string_view layer, std::string_view op, int64_t microbatch);
// The parts of a key between its slashes (four for a well-formed key).
std::vector<std::string> SplitOpKey(const std::string& key);

struct KeyedOp {
  std::string key;
  Op op;  // the program's op (the pipeline transfers: copies of StepProgram::pipeline_send)
};

// Every op `stage` runs in one step, task by task: per task, the chunk's pipeline receive, its
// layers' ops of the task's phase (forward in layer order; backward in reverse layer order, each
// layer's ops in program order, recomputation with B), its pipeline send; then the step-level
// ops. The list names what runs, not the exact order inside a task. Keys repeat where the program
// repeats an op per micro-batch (the ring's K/V passes); a trace may also split one op into
// several spans (a bucket at a time, a loss reduction between the kernel's parts).
std::vector<KeyedOp> StageOps(const StepProgram& program, int64_t stage);

}  // namespace shardsim::strategies
