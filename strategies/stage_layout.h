// Which model layers each chunk of each pipeline stage holds, decided once: the step program,
// the memory model, the runtime and the exports all read this. Either the default (consecutive
// layers as even as possible, see DefaultPartLayers) or the plan's `pipeline_layout` in
// Megatron-core's syntax (`--pipeline-model-parallel-layout`): `E` the embedding, `t` a decoder
// layer, `L` the loss (final norm, output head), `m` a multi-token-prediction layer, `|` between
// chunks in pipeline order, `X*N` or `(...)*N` repeats. `E|(t|)*126L` puts 126 layers on
// 16 stages x 8 chunks with the embedding and the loss alone in the first and last chunks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::strategies {

// One chunk: where it sits and what it holds.
struct ChunkLayout {
  int64_t direction = 0;    // which micro-batches pass through it (DualPipe has two)
  int64_t position = 0;     // its place along their path, 0 first
  bool embedding = false;   // holds the embedding (first on its path)
  bool head = false;        // holds the final norm, output head and loss (last on its path)
  int64_t first_layer = 0;  // decoder layers [first_layer, first_layer + layers)
  int64_t layers = 0;
  // Multi-token-prediction modules it runs, after its decoder layers (all of the model's in one
  // chunk: the head's by default, or where the layout's `m` symbols put them).
  int64_t mtp = 0;
};

struct StageLayout {
  int64_t stages = 1;
  int64_t chunks = 1;                        // per stage
  std::vector<std::vector<ChunkLayout>> at;  // [stage][chunk]
  // Per direction, the (stage, chunk) at each position of the path.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> paths;
  const ChunkLayout& Chunk(int64_t stage, int64_t chunk) const {
    return at[static_cast<size_t>(stage)][static_cast<size_t>(chunk)];
  }
  int64_t positions() const { return static_cast<int64_t>(paths.front().size()); }
};

// Layers held by each of `parts` consecutive model parts, first part first: as even as possible,
// the parts that hold one layer fewer at the ends (first, last, second, second to last, ...)
// because the first and last parts also hold the embedding and the output head. This is Llama 3
// 405B's layout (126 layers on 16 stages: 7, then 8 x 14, then 7). REQUIRES: 1 <= parts <= layers.
std::vector<int64_t> DefaultPartLayers(int64_t num_layers, int64_t parts);

// Why the plan's stage layout cannot hold `model`, or nothing: more model parts than layers, or a
// `pipeline_layout` that does not parse, has the wrong number of chunks, does not add up to the
// model's layers, or names layers the model lacks. REQUIRES: a known schedule.
std::optional<Infeasibility> CheckLayout(const ModelSpec& model, const PlanSpec& plan);

// The layout. REQUIRES: CheckLayout passed.
StageLayout LayOut(const ModelSpec& model, const PlanSpec& plan);

// The layout in Megatron-core's syntax, runs of equal chunks collapsed: "Et*7|(t*8|)*14t*7L".
std::string LayoutText(const StageLayout& layout);

// The layout of one chunk per part, in pipeline order, holding `layers` decoder layers each, the
// embedding with the first and the loss with the last, after `mtp` multi-token-prediction
// modules: {16, 16, 16, 15} is "Et*16|(t*16|)*2t*15L", with one module "Et*16|(t*16|)*2t*15mL".
std::string PartLayersText(const std::vector<int64_t>& layers, int64_t mtp = 0);

// "7, 8 x 14, 7": the decoder layers per position, runs collapsed.
std::string DescribePartLayers(const StageLayout& layout);

}  // namespace shardsim::strategies
