#include "cli/report_json.h"

#include "core/cluster_json.h"
#include "core/mesh.h"
#include "core/plan_json.h"
#include "core/units.h"
#include "planner/frameworks.h"

namespace shardsim::cli {

std::optional<sim::NetworkRows> DispatchRows(const topologies::Cluster& graph, const ModelSpec& model, const PlanSpec& plan) {
  if (!DeduplicatesDispatch(plan)) return std::nullopt;
  return sim::NetworkRowsPerToken(graph, sim::DeviceGroup{LogicalMesh(plan.mesh, plan.mesh_order).Group(0, ExpertAxes(plan))}, DispatchRouting(model, plan));
}

namespace {

// One memory breakdown's parts (a stage's, or the peak's), in whole bytes.
nlohmann::json PartsJson(const strategies::MemoryBreakdown& b) {
  return {{"params", WholeBytes(b.params)},         {"grads", WholeBytes(b.grads)},
          {"optimizer", WholeBytes(b.optimizer)},   {"activations", WholeBytes(b.activations)},
          {"buffers", WholeBytes(b.buffers)},       {"pipeline_buffers", WholeBytes(b.pipeline)},
          {"fp8_weight_cache", WholeBytes(b.fp8_weight_cache)}, {"host_activations", WholeBytes(b.host)},
          {"loss_shared", WholeBytes(b.loss_shared)}};
}

}  // namespace

nlohmann::json ReportJson(const ModelSpec& model, const ClusterSpec& cluster, const PlanSpec& plan, const sim::StepReport& r) {
  nlohmann::json exposed = nlohmann::json::object();
  // Each key as the text names it, by the mesh axes its collectives ran over (sim::ExposedLabel).
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [key, seconds] : r.exposed_comm_s) exposed[key] = seconds, labels[key] = sim::ExposedLabel(r, key);
  const strategies::MemoryBreakdown& peak = r.memory.peak;
  nlohmann::json collectives = nlohmann::json::array();
  for (const sim::CollectiveCost& c : r.collectives) {
    collectives.push_back({{"op", c.op},
                           {"layer", c.layer},
                           {"phase", strategies::ToString(c.phase)},
                           {"stream", strategies::ToString(c.stream)},
                           {"collective", ToString(c.collective)},
                           {"axes", c.axes},
                           {"bytes", WholeBytes(c.bytes)},
                           {"seconds", c.seconds},
                           {"exposed_s", c.exposed_s},
                           {"per_step", c.per_step},
                           {"exposed_per_step_s", c.exposed_s * c.per_step}});
    if (c.sixteen_bit) collectives.back()["sixteen_bit"] = true;
  }
  // Each pipeline stage's memory (the peak is the largest; torchtitan's published peaks are the
  // maximum over ranks).
  nlohmann::json stages = nlohmann::json::array();
  for (const strategies::MemoryBreakdown& b : r.memory.stages) {
    nlohmann::json stage = PartsJson(b);
    stage["bytes_per_device"] = WholeBytes(b.total());
    stages.push_back(std::move(stage));
  }
  nlohmann::json memory = PartsJson(peak);
  memory.update({{"peak_bytes_per_device", WholeBytes(peak.total())}, {"stages", stages}, {"hbm_bytes", WholeBytes(r.hbm_bytes)},
                 {"peak_stage", r.memory.peak_stage}});
  nlohmann::json j = {{"engine", "analytic"},
          {"model", model.name},
          {"cluster", cluster.name},
          {"plan", PlanToJson(plan)},
          {"step_time_s", r.step_time_s},
          {"tokens_per_s", r.tokens_per_s},
          {"mfu", r.mfu},
          {"mfu_palm", r.mfu_palm},
          {"hfu", r.hfu},
          {"flops_convention",
           "model FLOPs = 6 x active matmul parameters x tokens + causal attention (half of PaLM's 12 L H Q T); mfu_palm counts PaLM's full attention term; hfu counts all executed FLOPs"},
          {"model_flops_per_step", r.model_flops_per_step},
          {"hardware_flops_per_step", r.hardware_flops_per_step},
          {"peak_flop_per_s", r.peak_flop_per_s}, {"peak_dtype", MatmulPeakDtype(plan.dtype, Fp8RecipeOf(plan))},
          {"efficiency", EfficiencyToJson(cluster.efficiency)},
          {"attention_efficiency", cluster.efficiency.Attention(AttentionKernelOf(plan))},
          {"fits", r.fits},
          {"host_bytes", WholeBytes(r.host_bytes)},
          {"host_fits", r.host_fits},
          {"memory", memory},
          {"breakdown", {{"compute_s", r.compute_s}, {"compute_borrowed_s", r.compute_borrowed_s}, {"exposed_comm_s", exposed}, {"exposed_comm_labels", labels}, {"bubble_s", r.bubble_s}, {"critical_stage", r.critical_stage},
                         {"heaviest_stage", r.heaviest_stage < 0 ? nlohmann::json(nullptr)
                                                               : nlohmann::json{{"stage", r.heaviest_stage}, {"compute_s", r.heaviest_compute_s},
                                                                                {"exposed_comm_s", r.heaviest_exposed_comm_s}, {"as_heavy", r.heaviest_ties}}}}},
          {"collectives", collectives},
          {"stage_time_s", r.stage_time_s},
          {"why", r.why}};
  // A sequence beyond the model's own length, costed as given (estimate's text says so too).
  if (ExtendsContext(model, plan.seq_len)) j["context_extension"] = {{"seq_len", plan.seq_len}, {"max_seq_len", model.max_seq_len}};
  if (!plan.framework.empty()) {
    const auto own = planner::MfuAsFrameworkCounts(planner::ParseFramework(plan.framework, "plan: framework"), model, plan.seq_len, r.mfu_palm);
    if (own) j["framework_mfu"] = {{"framework", plan.framework}, {"mfu", own->mfu}, {"count", own->count}, {"source", own->source}};
  }
  if (DeduplicatesDispatch(plan)) {  // checked first: only then is the cluster's graph built
    if (const auto rows = DispatchRows(topologies::Cluster(cluster), model, plan)) {
      j["expert_dispatch"] = {{"network_rows_per_token", rows->deduplicated}, {"routed_copies_per_token", rows->copies}, {"nodes", rows->nodes},
                              {"devices_per_node", rows->per_node}};
    }
  }
  return j;
}

}  // namespace shardsim::cli
