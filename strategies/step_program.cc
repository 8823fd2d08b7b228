#include "strategies/step_program.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "strategies/op_names.h"
#include "strategies/schedule.h"

namespace shardsim::strategies {

std::string ToString(Stream stream) {
  switch (stream) {
    case Stream::kCompute: return "compute";
    case Stream::kTensor: return "tensor";
    case Stream::kData: return "data";
    case Stream::kPipeline: return "pipeline";
    case Stream::kExpert: return "expert";
    case Stream::kContext: return "context";
    case Stream::kHost: return "host";
  }
  return "compute";
}

std::string ToString(Phase phase) {
  switch (phase) {
    case Phase::kForward: return "F";
    case Phase::kBackwardInput: return "B";
    case Phase::kBackwardWeight: return "W";
    case Phase::kRecompute: return "R";
  }
  return "F";
}

std::string ToString(ComputeKind kind) {
  switch (kind) {
    case ComputeKind::kMatmul: return "matmul";
    case ComputeKind::kAttention: return "attention";
    case ComputeKind::kScan: return "scan";
    case ComputeKind::kElementwise: return "elementwise";
    case ComputeKind::kOptimizer: return "optimizer";
  }
  return "elementwise";
}

std::string ToString(LayerKind kind) {
  switch (kind) {
    case LayerKind::kDense: return "dense";
    case LayerKind::kMoe: return "moe";
    case LayerKind::kEmbedding: return "embedding";
    case LayerKind::kHead: return "head";
    case LayerKind::kDenseLocal: return "dense-local";
    case LayerKind::kMoeLocal: return "moe-local";
    case LayerKind::kMtp: return "mtp";
    case LayerKind::kMamba: return "mamba";
    case LayerKind::kAttentionOnly: return "attention";
    case LayerKind::kMlpOnly: return "mlp";
    case LayerKind::kMoeOnly: return "experts";
  }
  return "dense";
}

LayerKind HybridBlockKind(char symbol) {
  switch (symbol) {
    case kHybridMamba: return LayerKind::kMamba;
    case kHybridAttention: return LayerKind::kAttentionOnly;
    case kHybridMlp: return LayerKind::kMlpOnly;
    default: return LayerKind::kMoeOnly;
  }
}

std::string ProgramName(LayerKind kind, bool sixteen_bit) { return ToString(kind) + (sixteen_bit ? "-16bit" : ""); }

const LayerProgram& StepProgram::ProgramOfLayer(int64_t layer) const {
  return Layer(LayerRun{.kind = LayerKindOf(model, layer), .sixteen_bit = SixteenBitLayer(plan, model.num_layers, layer)});
}

LayerKind LayerKindOf(const ModelSpec& model, int64_t layer) {
  if (IsHybrid(model)) return HybridBlockKind(model.hybrid_pattern[static_cast<size_t>(layer)]);
  return TransformerLayerKind(IsMoeLayer(model, layer), IsLocalAttentionLayer(model, layer));
}

int64_t ScheduleRound(const StepProgram& program, int64_t count) {
  const int64_t m = count < 0 ? program.microbatches : count;
  return std::min(m, program.microbatches / std::max<int64_t>(1, program.plan.pipeline_rounds));
}

std::vector<Task> StageTasks(const StepProgram& program, int64_t stage, int64_t microbatches) {
  const int64_t m = microbatches < 0 ? program.microbatches : microbatches;
  return RoundTasks(*program.schedule, program.layout.stages, m, ScheduleRound(program, m), program.layout.chunks, stage);
}

int64_t DirectionOf(const StepProgram& program, int64_t mb, int64_t microbatches) {
  const int64_t round = ScheduleRound(program, microbatches);
  return program.schedule->DirectionOf(program.layout.stages, mb % round, round);
}

std::vector<int64_t> MicrobatchesPerDirection(const StepProgram& program, int64_t microbatches) {
  const int64_t round = ScheduleRound(program, microbatches);
  std::vector<int64_t> counts(std::max<size_t>(1, program.layout.paths.size()), 0);
  const int64_t stages = program.layout.stages;
  auto add = [&](const std::vector<int64_t>& part, int64_t times) {
    for (size_t d = 0; d < part.size() && d < counts.size(); ++d) counts[d] += part[d] * times;
  };
  add(program.schedule->DirectionCounts(stages, round, round), microbatches / round);
  if (microbatches % round != 0) add(program.schedule->DirectionCounts(stages, microbatches % round, round), 1);
  return counts;
}

Op ComputeOp(std::string name, Phase phase, ComputeKind kind, double flops, double bytes) {
  Op op;
  op.name = std::move(name);
  op.phase = phase;
  op.kind = kind;
  op.flops = flops;
  op.bytes = bytes;
  return op;
}

Op CommOp(std::string name, Phase phase, Stream stream, CollectiveOp collective, std::vector<std::string> axes, double bytes,
          bool overlapped) {
  Op op;
  op.name = std::move(name);
  op.phase = phase;
  op.stream = stream;
  op.collective = collective;
  op.axes = std::move(axes);
  op.comm_bytes = bytes;
  op.overlapped = overlapped;
  return op;
}

double PhaseFlops(const LayerProgram& layer, Phase phase) {
  double flops = 0;
  for (const Op& op : layer.ops) {
    if (op.phase == phase && !op.is_comm()) flops += op.flops;
  }
  return flops;
}

std::string ValidateSchedule(const StepProgram& program, int64_t microbatches) {
  const int64_t m = microbatches < 0 ? program.microbatches : microbatches;
  for (size_t s = 0; s < program.stages.size(); ++s) {
    const int64_t chunks = static_cast<int64_t>(program.stages[s].chunks.size());
    int64_t expected = 0;
    std::map<std::tuple<int64_t, int64_t, int>, size_t> position;
    const std::vector<Task> tasks = StageTasks(program, static_cast<int64_t>(s), m);
    for (size_t i = 0; i < tasks.size(); ++i) {
      const auto key = std::make_tuple(tasks[i].microbatch, tasks[i].chunk, static_cast<int>(tasks[i].phase));
      if (!position.emplace(key, i).second) {
        return "stage " + std::to_string(s) + " runs " + ToString(tasks[i].phase) + " of micro-batch " + std::to_string(tasks[i].microbatch) +
               " chunk " + std::to_string(tasks[i].chunk) + " twice";
      }
    }
    for (int64_t mb = 0; mb < m; ++mb) {
      for (int64_t c = 0; c < chunks; ++c) {
        if (program.stages[s].chunks[static_cast<size_t>(c)].layout.direction != DirectionOf(program, mb, m)) continue;
        expected += 3;
        const auto f = position.find({mb, c, static_cast<int>(Phase::kForward)});
        const auto b = position.find({mb, c, static_cast<int>(Phase::kBackwardInput)});
        const auto w = position.find({mb, c, static_cast<int>(Phase::kBackwardWeight)});
        const std::string where = "stage " + std::to_string(s) + " micro-batch " + std::to_string(mb) + " chunk " + std::to_string(c);
        if (f == position.end() || b == position.end() || w == position.end()) return where + " is missing a task";
        if (!(f->second < b->second && b->second < w->second)) return where + " does not run F before B before W";
      }
    }
    if (static_cast<int64_t>(tasks.size()) != expected) return "stage " + std::to_string(s) + " has extra tasks";
  }
  return "";
}

std::string DumpProgram(const StepProgram& program) {
  std::ostringstream out;
  char number[64];
  auto g = [&](double v) {
    std::snprintf(number, sizeof number, "%.9g", v);
    return std::string(number);
  };
  out << "step model=" << program.model.name << " schedule=" << program.plan.pipeline_schedule << " microbatches=" << program.microbatches
      << " tokens_per_microbatch=" << program.tokens_per_microbatch << " model_flops=" << g(program.model_flops_per_step) << "\n";
  for (const LayerProgram& layer : program.layer_programs) {
    if (layer.ops.empty()) continue;
    out << "layer " << ProgramName(layer.kind, layer.sixteen_bit) << "\n";
    for (const Op& op : layer.ops) {
      out << "  " << ToString(op.phase) << " " << ToString(op.stream) << " " << op.name;
      if (op.is_comm()) {
        out << " " << ToString(op.collective) << " axes=";
        for (const auto& a : op.axes) out << a << ";";
        out << " bytes=" << g(op.comm_bytes) << (op.overlapped ? " overlapped" : "");
      } else {
        out << " " << ToString(op.kind) << " flops=" << g(op.flops) << " bytes=" << g(op.bytes);
        if (op.kind == ComputeKind::kMatmul) out << " mnk=" << op.m << "x" << op.n << "x" << op.k << (op.sixteen_bit ? " sixteen_bit" : "");
      }
      out << "\n";
    }
  }
  for (size_t s = 0; s < program.stages.size(); ++s) {
    const Stage& stage = program.stages[s];
    out << "stage " << s << " params=" << g(stage.params()) << "\n";
    for (size_t c = 0; c < stage.chunks.size(); ++c) {
      const ChunkLayout& l = stage.chunks[c].layout;
      out << "  chunk " << c << " direction=" << l.direction << " position=" << l.position << " layers=" << l.first_layer << "+" << l.layers << ":";
      for (const LayerRun& run : stage.chunks[c].layers) out << " " << ProgramName(run.kind, run.sixteen_bit) << "x" << run.count;
      out << "\n";
    }
    out << "  tasks:";
    for (const Task& t : StageTasks(program, static_cast<int64_t>(s))) out << " " << ToString(t.phase) << t.microbatch << (stage.chunks.size() > 1 ? "." + std::to_string(t.chunk) : "");
    out << "\n";
    for (const Op& op : stage.step_ops) {
      out << "  step " << op.name << " " << (op.is_comm() ? ToString(op.collective) + " bytes=" + g(op.comm_bytes) : "bytes=" + g(op.bytes)) << "\n";
    }
  }
  return out.str();
}

int64_t OffloadedLayers(const PlanSpec& plan, const Chunk& chunk) {
  int64_t layers = 0;
  for (const auto& [kind, count, sixteen_bit] : chunk.layers) layers += IsTransformerLayer(kind) ? count : 0;
  return std::min(plan.offload_layers, layers);
}

std::vector<int64_t> OffloadedPerRun(const PlanSpec& plan, const Chunk& chunk) {
  int64_t left = OffloadedLayers(plan, chunk);
  std::vector<int64_t> runs;
  runs.reserve(chunk.layers.size());
  for (const auto& [kind, count, sixteen_bit] : chunk.layers) {
    const int64_t off = IsTransformerLayer(kind) ? std::min(left, count) : 0;
    left -= off;
    runs.push_back(off);
  }
  return runs;
}

namespace {

bool OverlappedCollective(const Op& op) { return op.is_comm() && op.collective != CollectiveOp::kPermute && op.overlapped; }

}  // namespace

int64_t OverlapPartner(const std::vector<Op>& ops, size_t index) {
  const Op& op = ops[index];
  if (OverlappedCollective(op) && op.stream == Stream::kContext) {
    // The attention after a K/V gather, before a dK/dV reduce-scatter.
    const bool gather = op.collective == CollectiveOp::kAllGather;
    for (size_t j = index; gather ? ++j < ops.size() : j-- > 0;) {
      if (ops[j].phase != op.phase || ops[j].is_comm()) continue;
      return ops[j].kind == ComputeKind::kAttention ? static_cast<int64_t>(j) : -1;
    }
    return -1;
  }
  if (!OverlappedCollective(op) || op.stream != Stream::kTensor) return -1;
  // The nearest compute op of the phase that way (other collectives in between are skipped): the
  // partner if it is a matrix product, else none (a loss reduction is not a product's output).
  auto nearest = [&](size_t j) -> int64_t {
    if (ops[j].phase != op.phase || ops[j].is_comm()) return -2;  // keep looking
    return ops[j].kind == ComputeKind::kMatmul ? static_cast<int64_t>(j) : -1;
  };
  // The sequence-parallel input gathered again in the backward runs beside the input-gradient
  // product issued before it (its weight gradient, in the W phase, reads what it gathers).
  if (op.collective == CollectiveOp::kAllGather && !ops::IsRegather(op.name)) {
    for (size_t j = index + 1; j < ops.size(); ++j) {
      if (const int64_t found = nearest(j); found != -2) return found;
    }
    return -1;
  }
  for (size_t j = index; j-- > 0;) {
    if (const int64_t found = nearest(j); found != -2) return found;
  }
  return -1;
}

StepProgram WithBlockingCollectives(StepProgram program) {
  auto block = [](std::vector<Op>& ops) {
    for (Op& op : ops) {
      if (OverlappedCollective(op)) op.overlapped = false;
    }
  };
  for (LayerProgram& layer : program.layer_programs) block(layer.ops);
  for (Stage& stage : program.stages) block(stage.step_ops);
  return program;
}

bool OverlapsCollectives(const StepProgram& program) {
  auto any = [](const std::vector<Op>& ops) { return std::any_of(ops.begin(), ops.end(), OverlappedCollective); };
  return std::any_of(program.layer_programs.begin(), program.layer_programs.end(), [&](const LayerProgram& l) { return any(l.ops); }) ||
         std::any_of(program.stages.begin(), program.stages.end(), [&](const Stage& s) { return any(s.step_ops); });
}

}  // namespace shardsim::strategies
