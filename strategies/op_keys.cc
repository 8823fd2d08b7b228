#include "strategies/op_keys.h"

#include <algorithm>

#include "strategies/op_names.h"

namespace shardsim::strategies {

std::string ChunkLayer(int64_t chunk) { return "chunk" + std::to_string(chunk); }
std::string DecoderLayer(int64_t layer) { return std::to_string(layer); }

std::string OpKey(int64_t stage, std::string_view layer, std::string_view op, int64_t microbatch) {
  std::string key = std::to_string(stage);
  key += '/';
  key += layer;
  key += '/';
  key += op;
  key += '/';
  key += microbatch < 0 ? std::string("-") : std::to_string(microbatch);
  return key;
}

std::vector<std::string> SplitOpKey(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t slash = key.find('/'); slash != std::string::npos; slash = key.find('/', start)) {
    parts.push_back(key.substr(start, slash - start));
    start = slash + 1;
  }
  parts.push_back(key.substr(start));
  return parts;
}

std::vector<KeyedOp> StageOps(const StepProgram& program, int64_t s) {
  const Stage& stage = program.stages[static_cast<size_t>(s)];
  std::vector<KeyedOp> out;
  auto transfer = [&](std::string_view name, Phase phase, int64_t chunk, int64_t mb) {
    Op op = program.pipeline_send;
    op.name = std::string(name);
    op.phase = phase;
    out.push_back({OpKey(s, ChunkLayer(chunk), name, mb), op});
  };
  for (const Task& task : StageTasks(program, s)) {
    const Chunk& chunk = stage.chunks[static_cast<size_t>(task.chunk)];
    // The chunk's layers in order, each with its layer program and key label (multi-token-
    // prediction modules continue the decoder layers' numbering, as DeepSeek-V3's checkpoint names
    // its module layer 61).
    std::vector<std::pair<const LayerProgram*, std::string>> layers;
    int64_t next = chunk.layout.first_layer;
    for (const LayerRun& run : chunk.layers) {
      for (int64_t i = 0; i < run.count; ++i) {
        const std::string label = run.kind == LayerKind::kEmbedding ? std::string(kEmbeddingLayer)
                                  : run.kind == LayerKind::kHead    ? std::string(kHeadLayer)
                                                                    : DecoderLayer(next++);
        layers.push_back({&program.Layer(run), label});
      }
    }
    const bool forward = task.phase == Phase::kForward;
    if (!forward) std::reverse(layers.begin(), layers.end());
    if (forward && !chunk.layout.embedding)
      transfer(ops::kRecvForward, Phase::kForward, task.chunk, task.microbatch);
    if (task.phase == Phase::kBackwardInput && !chunk.layout.head)
      transfer(ops::kRecvBackward, Phase::kBackwardInput, task.chunk, task.microbatch);
    for (const auto& [layer, label] : layers) {
      for (const Op& op : layer->ops) {
        const bool in_task = op.phase == task.phase ||
                             (task.phase == Phase::kBackwardInput && op.phase == Phase::kRecompute);
        if (in_task) out.push_back({OpKey(s, label, op.name, task.microbatch), op});
      }
    }
    if (forward && !chunk.layout.head)
      transfer(ops::kSendForward, Phase::kForward, task.chunk, task.microbatch);
    if (task.phase == Phase::kBackwardInput && !chunk.layout.embedding)
      transfer(ops::kSendBackward, Phase::kBackwardInput, task.chunk, task.microbatch);
  }
  for (const Op& op : stage.step_ops) out.push_back({OpKey(s, kStepLayer, op.name, -1), op});
  return out;
}

}  // namespace shardsim::strategies
