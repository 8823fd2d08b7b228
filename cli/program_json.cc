#include "cli/program_json.h"

#include <string>

#include "core/plan_json.h"
#include "core/units.h"
#include "strategies/schedule.h"

namespace shardsim::cli {

using nlohmann::json;

json OpJson(const strategies::Op& op) {
  json j = {{"name", op.name},
            {"phase", strategies::ToString(op.phase)},
            {"stream", strategies::ToString(op.stream)}};
  if (op.is_comm()) {
    j["collective"] = ToString(op.collective);
    j["axes"] = op.axes;
    j["bytes"] = WholeBytes(op.comm_bytes);
    j["overlapped"] = op.overlapped;
    if (op.comm_units > 0) j["comm_units"] = op.comm_units;
    if (op.routing.deduplicated()) {
      j["routing"] = {{"experts", op.routing.experts}, {"top_k", op.routing.top_k}, {"groups", op.routing.groups}, {"group_top_k", op.routing.group_top_k},
                      {"round_robin", op.routing.round_robin}};
    }
  } else {
    j["kind"] = strategies::ToString(op.kind);
    j["flops"] = op.flops;
    j["bytes"] = WholeBytes(op.bytes);
    j["m"] = op.m;
    j["n"] = op.n;
    j["k"] = op.k;
    if (op.sixteen_bit) j["sixteen_bit"] = true;
  }
  return j;
}

namespace {

json OpsJson(const std::vector<strategies::Op>& ops) {
  json out = json::array();
  for (const strategies::Op& op : ops) out.push_back(OpJson(op));
  return out;
}

json ChunkJson(int64_t index, const strategies::Chunk& chunk) {
  const strategies::ChunkLayout& l = chunk.layout;
  json runs = json::array();
  for (const strategies::LayerRun& run : chunk.layers) {
    json r = {{"kind", strategies::ToString(run.kind)}, {"count", run.count}};
    if (run.sixteen_bit) r["sixteen_bit"] = true;  // decoder layers an fp8 plan keeps at 16 bits
    runs.push_back(std::move(r));
  }
  return {{"chunk", index},         {"direction", l.direction},
          {"position", l.position}, {"embedding", l.embedding},
          {"head", l.head},         {"first_layer", l.first_layer},
          {"layers", l.layers},     {"layer_runs", std::move(runs)}};
}

}  // namespace

json ProgramJson(const strategies::StepProgram& program) {
  json layers = json::array();
  for (const strategies::LayerProgram& layer : program.layer_programs) {
    if (layer.ops.empty()) continue;
    json l = {{"kind", strategies::ToString(layer.kind)}, {"ops", OpsJson(layer.ops)}};
    if (layer.sixteen_bit) l["sixteen_bit"] = true;  // the kind's 16-bit twin
    layers.push_back(std::move(l));
  }
  json stages = json::array();
  for (size_t s = 0; s < program.stages.size(); ++s) {
    const strategies::Stage& stage = program.stages[s];
    json chunks = json::array();
    for (size_t c = 0; c < stage.chunks.size(); ++c)
      chunks.push_back(ChunkJson(static_cast<int64_t>(c), stage.chunks[c]));
    json tasks = json::array();
    for (const strategies::Task& t : strategies::StageTasks(program, static_cast<int64_t>(s))) {
      tasks.push_back({{"microbatch", t.microbatch},
                       {"chunk", t.chunk},
                       {"phase", strategies::ToString(t.phase)}});
    }
    stages.push_back({{"stage", static_cast<int64_t>(s)},
                      {"dense_params", stage.dense_params},
                      {"expert_params", stage.expert_params},
                      {"activation_peak_bytes", WholeBytes(stage.activation_peak_bytes)},
                      {"chunks", std::move(chunks)},
                      {"tasks", std::move(tasks)},
                      {"step_ops", OpsJson(stage.step_ops)}});
  }
  return {{"model", program.model.name},
          {"plan", PlanToJson(program.plan)},
          {"schedule", std::string(program.schedule->name())},
          {"microbatches", program.microbatches},
          {"tokens_per_microbatch", program.tokens_per_microbatch},
          {"model_flops_per_step", program.model_flops_per_step},
          {"palm_flops_per_step", program.palm_flops_per_step},
          {"layer_programs", std::move(layers)},
          {"stages", std::move(stages)},
          {"pipeline_send", OpJson(program.pipeline_send)}};
}

}  // namespace shardsim::cli
