// `shardsim describe`: what a model, a cluster and (optionally) a plan amount to: parameters,
// FLOPs per token, devices, peaks, memory and links, each with its source.
#include <cstdio>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli/plan_text.h"
#include "cli/commands.h"
#include "cli/text_table.h"
#include "core/cluster_json.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/model_json.h"
#include "core/model_presets.h"
#include "core/output_file.h"
#include "core/plan_json.h"
#include "core/suggest.h"
#include "core/mesh.h"
#include "core/units.h"
#include "strategies/plan_rules.h"
#include "topologies/mesh_mapping.h"

namespace shardsim::cli {
namespace {

using nlohmann::json;

constexpr const char* kFlopsConvention =
    "2 FLOPs per multiply-add; matmul = 2 x active matmul parameters (output head included); attention = 2*S*H*(Kqk+Kv) per "
    "layer over the full context (PaLM, no causal halving, local layers too); *_causal: over the keys causal attention reads (half "
    "the context, a local layer's window W less W^2/2S); scan = a hybrid model's Mamba-2 mixers' chunked scan (SSD), in every count; training = "
    "3 x forward, recomputation excluded";

std::string D(double v) { return FormatCount(v); }

json ModelReport(const ModelSpec& m, int64_t seq_len) {
  const ParamCounts c = CountParams(m);
  const FlopsPerToken f = ForwardFlopsPerToken(m, seq_len);
  json j = {{"name", m.name},
            {"spec", ModelToJson(m)},
            {"params_total", c.total},
            {"params_active", c.active},
            {"params",
             {{"embedding", c.embedding},
              {"head", c.head},
              {"attention", c.attention},
              {"dense_mlp", c.dense_mlp},
              {"routed_experts", c.routed_experts},
              {"shared_experts", c.shared_experts},
              {"router", c.router},
              {"norms", c.norms},
              {"mamba", c.mamba},
              {"mtp", c.mtp},
              {"mtp_active", c.mtp_active}}},
            {"seq_len", seq_len},
            {"flops_per_token",
             {{"forward", f.forward()},
              {"forward_matmul", f.matmul},
              {"forward_attention", f.attention},
              {"forward_attention_causal", f.causal_attention},
              {"forward_scan", f.scan},
              {"training", f.training()},
              {"training_causal", f.causal_training()}}},
            {"flops_convention", kFlopsConvention}};
  if (auto preset = FindModelPreset(m.name); preset && preset->spec == m && preset->published_params_total > 0) {
    j["published"] = {{"params_total", preset->published_params_total},
                      {"params_active", preset->published_params_active},
                      {"source", preset->published_source}};
  }
  return j;
}

json ClusterReport(const ClusterSpec& c) {
  const int64_t devices = DeviceCount(c);
  json total = json::object();
  for (const auto& [dtype, peak] : c.chip.peak_flop_per_s) total[dtype] = peak * static_cast<double>(devices);
  return {{"name", c.name},
          {"system", c.system},
          {"spec", ClusterToJson(c)},
          {"devices", devices},
          {"shape", DescribeShape(c.topology)},
          {"chip", c.chip.name},
          {"peak_flop_per_s", c.chip.peak_flop_per_s},
          {"peak_flop_per_s_all_devices", total},
          {"hbm_bytes", c.chip.hbm_bytes},
          {"hbm_bytes_all_devices", static_cast<double>(c.chip.hbm_bytes) * static_cast<double>(devices)},
          {"hbm_bandwidth_bytes_per_s", c.chip.hbm_bandwidth_bytes_per_s}};
}

json PlanReport(const PlanSpec& p) {
  const PlanShape s = DerivePlanShape(p);
  return {{"spec", PlanToJson(p)},
          {"mesh", DescribeMesh(p.mesh)},
          {"devices", s.devices},
          {"batch_replicas", s.batch_replicas},
          {"sequences_per_replica", s.sequences_per_replica},
          {"num_microbatches", s.num_microbatches},
          {"pipeline_rounds", p.pipeline_rounds},
          {"round_microbatches", s.round_microbatches},
          {"tokens_per_step", s.tokens_per_step},
          {"valid", true}};
}

void PrintModel(const ModelSpec& m, int64_t seq_len, std::ostream& out) {
  const ParamCounts c = CountParams(m);
  const FlopsPerToken f = ForwardFlopsPerToken(m, seq_len);
  out << "Model " << m.name << (IsHybrid(m) ? " (hybrid)" : m.moe ? " (mixture of experts)" : " (dense)") << "\n";
  out << "  shape      " << m.num_layers << " layers, width " << m.hidden_size << ", " << m.num_heads << " heads ("
      << m.num_kv_heads << " K/V heads, head dim " << m.head_dim << "), " << ToString(m.mlp) << " MLP " << m.ffn_hidden_size
      << ", vocabulary " << m.vocab_size << ", " << (m.position == PositionKind::kNone ? std::string("no position embedding") : ToString(m.position) + " positions") << ", " << ToString(m.norm)
      << (m.tied_embeddings ? ", tied embeddings" : "") << "\n";
  if (IsHybrid(m)) {
    out << "  layers     " << m.hybrid_pattern << " (M Mamba-2 " << NumHybridLayers(m, kHybridMamba) << ", * attention " << NumHybridLayers(m, kHybridAttention)
        << ", - MLP " << NumHybridLayers(m, kHybridMlp) << ", E experts " << NumHybridLayers(m, kHybridMoe) << ")\n";
  }
  if (m.mamba) {
    out << "  Mamba-2    " << m.mamba->num_heads << " heads x " << m.mamba->head_dim << ", state " << m.mamba->state_size << ", " << m.mamba->groups
        << " groups, convolution " << m.mamba->conv_kernel << ", scan chunks of " << m.mamba->chunk_size << "\n";
  }
  if (m.moe) {
    out << "  experts    " << m.moe->num_experts << " routed (top-" << m.moe->top_k << ") + " << m.moe->num_shared_experts
        << " shared, expert width " << m.moe->expert_ffn_hidden_size
        << (m.moe->latent_size > 0 ? ", routed in a latent width of " + std::to_string(m.moe->latent_size) : std::string())
        << (m.moe->groups > 1 ? ", each token's experts within its best " + std::to_string(m.moe->group_top_k) + " of " + std::to_string(m.moe->groups) + " groups" : std::string())
        << ", " << NumMoeLayers(m)
        << " of " << m.num_layers << " layers MoE" << (IsHybrid(m) ? "" : " (first " + std::to_string(m.moe->first_dense_layers) + " dense)") << "\n";
  }
  if (m.mla) {
    out << "  MLA        q rank " << m.mla->q_lora_rank << ", kv rank " << m.mla->kv_lora_rank << ", qk dims "
        << m.mla->qk_nope_head_dim << "+" << m.mla->qk_rope_head_dim << " (rope), v dim " << m.mla->v_head_dim << "\n";
  }
  if (m.sliding_window) {
    out << "  attention  " << NumLocalAttentionLayers(m) << " of " << m.num_layers << " layers local over a " << m.sliding_window->window
        << "-token sliding window"
        << (m.sliding_window->global_every > 0 ? ", the last of every " + std::to_string(m.sliding_window->global_every) + " global" : std::string(", none global"))
        << "\n";
  }
  out << "  params     total " << D(c.total) << ", active per token " << D(c.active) << "\n";
  if (m.mtp_layers > 0) {
    const std::string layer = IsHybrid(m) ? "layers " + m.mtp_pattern : std::string(MtpLayerIsMoe(m) ? "MoE" : "dense") + " layer";
    out << "             and " << m.mtp_layers << " multi-token-prediction module" << (m.mtp_layers > 1 ? "s" : "") << " beside them: " << D(c.mtp)
        << (m.mtp_shared_weights && m.mtp_layers > 1 ? " (one module's weights, shared by every depth)" : "") << ", " << D(c.mtp_active)
        << " per token over the " << (m.mtp_layers > 1 ? "depths" : "module") << " (the " << layer << ", the 2D -> D projection, norms; embedding and head shared)\n";
  }
  out << "             embedding " << D(c.embedding) << ", attention " << D(c.attention) << ", dense MLP " << D(c.dense_mlp);
  if (m.moe) {
    out << ", routed experts " << D(c.routed_experts) << ", shared experts " << D(c.shared_experts) << ", router"
        << (m.moe->latent_size > 0 ? " and latent projections " : " ") << D(c.router);
  }
  if (m.mamba) out << ", Mamba-2 mixers " << D(c.mamba);
  out << ", head " << D(c.head) << ", norms " << D(c.norms) << "\n";
  if (auto preset = FindModelPreset(m.name); preset && preset->spec == m && preset->published_params_total > 0) {
    out << "  published  total " << D(preset->published_params_total) << ", active " << D(preset->published_params_active)
        << " (" << preset->published_source << ")\n";
  }
  out << "  FLOPs      per token at seq_len " << seq_len << ": forward " << FormatSI(f.forward(), "FLOP") << " (matmul "
      << FormatSI(f.matmul, "FLOP") << " + attention " << FormatSI(f.attention, "FLOP")
      << (f.scan > 0 ? " + scan " + FormatSI(f.scan, "FLOP") : std::string()) << "), training "
      << FormatSI(f.training(), "FLOP") << "; training counting causal attention over the keys it reads (MFU's count): "
      << FormatSI(f.causal_training(), "FLOP") << "\n";
  out << "  source     " << (m.source.empty() ? "(none given)" : m.source) << "\n";
}

void PrintCluster(const ClusterSpec& c, std::ostream& out) {
  const int64_t devices = DeviceCount(c);
  out << "Cluster " << c.name << ": " << devices << " x " << c.chip.name << "\n";
  out << "  topology   " << DescribeShape(c.topology) << "\n";
  std::string peaks, totals;
  for (const auto& [dtype, peak] : c.chip.peak_flop_per_s) {
    peaks += (peaks.empty() ? "" : ", ") + dtype + " " + FormatSI(peak, "FLOP/s");
    totals += (totals.empty() ? "" : ", ") + dtype + " " + FormatSI(peak * static_cast<double>(devices), "FLOP/s");
  }
  out << "  peak       per device " << peaks << "; all devices " << totals << "\n";
  out << "  memory     " << FormatSI(static_cast<double>(c.chip.hbm_bytes), "B") << " (" << FormatBinaryBytes(static_cast<double>(c.chip.hbm_bytes))
      << ") per device at " << FormatSI(c.chip.hbm_bandwidth_bytes_per_s, "B/s") << "; "
      << FormatSI(static_cast<double>(c.chip.hbm_bytes) * static_cast<double>(devices), "B") << " in all\n";
  if (c.topology.host_bytes_per_device > 0) {
    out << "  host       " << FormatSI(static_cast<double>(c.topology.host_bytes_per_device), "B") << " of host memory per device, for offloaded activations (topology source)\n";
  }
  if (c.chip.compute_units > 0) {
    out << "  compute    " << c.chip.compute_units << " compute units per device";
    const CollectiveUnits& u = c.chip.collective_units;
    if (u != CollectiveUnits{}) {
      out << "; NCCL's collective kernels hold " << u.in_node << " of them inside a node, " << u.across_nodes << " across nodes"
          << (u.nvls > 0 ? ", " + std::to_string(u.nvls) + " for NVLS" : std::string())
          << " (all-to-alls and sends: their point-to-point channels; collective_units: " << u.source << ")";
    }
    out << "\n";
  }
  out << "  chip source " << c.chip.source << "\n";
  TextTable links({"link", "per link, one way", "links/device", "latency", "efficiency", "source"});
  for (const auto& [name, l] : c.links) {
    char eff[16];
    std::snprintf(eff, sizeof eff, "%.2f", l.efficiency);
    links.AddRow({name, FormatSI(l.bandwidth_bytes_per_s, "B/s"), std::to_string(l.links_per_device), FormatSeconds(l.latency_s), eff, l.source});
  }
  links.Print(out, "  ");
  char eff[200];
  std::snprintf(eff, sizeof eff, "matmul %.3f, FP8 matmul %.3f and attention %.3f of peak, backward passes at %.3f of those rates, HBM %.2f of bandwidth",
                c.efficiency.matmul, c.efficiency.Fp8Matmul(), c.efficiency.Attention(), c.efficiency.backward, c.efficiency.hbm);
  out << "  efficiency " << eff << " (" << c.efficiency.source << ")\n";
}

json AxesReport(const std::vector<topologies::AxisLinks>& axes) {
  json j = json::array();
  for (const auto& a : axes) {
    j.push_back({{"axis", a.axis},
                 {"size", a.size},
                 {"path", a.path},
                 {"max_neighbour_hops", a.max_neighbour_hops},
                 {"closing_hops", a.closing_hops},
                 {"bottleneck_bytes_per_s", a.bottleneck_bytes_per_s},
                 {"pairs_checked", a.pairs_checked}});
  }
  return j;
}

void PrintAxes(const std::vector<topologies::AxisLinks>& axes, const std::string& mesh, std::ostream& out) {
  out << "Mesh " << mesh << " on the cluster (rank r on device r; innermost axis first)\n";
  TextTable table({"axis", "size", "route between neighbours", "hops", "ring closes in", "slowest link, one way, per device"});
  for (const auto& a : axes) {
    std::string path;
    for (const std::string& hop : a.path) path += (path.empty() ? "" : " > ") + hop;
    table.AddRow({a.axis, std::to_string(a.size), path, std::to_string(a.max_neighbour_hops),
                  std::to_string(a.closing_hops) + (a.closing_hops == 1 ? " hop" : " hops"), FormatSI(a.bottleneck_bytes_per_s, "B/s")});
  }
  table.Print(out, "  ");
}

void PrintPlan(const PlanSpec& p, std::ostream& out) {
  const PlanShape s = DerivePlanShape(p);
  out << "Plan: valid for this model and cluster by the plan rules (whether it fits in memory, and its time: shardsim estimate)\n";
  out << "  mesh       " << DescribeMesh(p.mesh) << " = " << s.devices << " devices; order (outer to inner) ";
  for (size_t i = 0; i < p.mesh_order.size(); ++i) out << (i ? ", " : "") << p.mesh_order[i];
  if (!p.expert_axes.empty()) out << "\n  experts    split over " << JoinNames(ExpertAxes(p), " x ") << " (expert_axes)";
  out << "\n  batch      " << p.global_batch_size << " sequences x " << p.seq_len << " tokens = " << D(static_cast<double>(s.tokens_per_step))
      << " tokens per step; " << s.batch_replicas << " replicas x " << s.num_microbatches << (s.num_microbatches == 1 ? " micro-batch of " : " micro-batches of ") << p.micro_batch_size
      << RoundsPhrase(p) << "\n";
  out << "  schedule   " << p.pipeline_schedule << (p.virtual_stages > 1 ? " with " + std::to_string(p.virtual_stages) + " virtual stages" : "")
      << ", ZeRO stage " << p.zero_stage << ", sequence parallel " << (p.sequence_parallel ? "on" : "off") << ", recompute "
      << RecomputeText(p) << ", dtype " << p.dtype << "\n";
}

}  // namespace

int RunDescribe(const DescribeOptions& o, std::ostream& out) {
  if (o.model.empty() && o.cluster.empty()) {
    throw InputError("describe", "nothing to describe", "--model M and/or --cluster C", "e.g. shardsim describe --model llama3-8b --cluster dgx-h100:8");
  }
  std::optional<ModelSpec> model;
  std::optional<ClusterSpec> cluster;
  std::optional<PlanSpec> plan;
  if (!o.model.empty()) model = LoadModel(o.model);
  if (!o.cluster.empty()) cluster = LoadCluster(o.cluster);
  if (!o.plan.empty() || !o.overrides.empty()) {
    if (!model || !cluster) {
      throw InputError(o.plan.empty() ? "--set" : "--plan " + o.plan, "checking a plan needs both --model and --cluster", "",
                       "add --model M --cluster C");
    }
    plan = LoadPlan(o.plan, o.overrides);
    CheckPlanOnCluster(*plan, *cluster, o.plan.empty() ? std::string("plan") : o.plan);
    strategies::ValidatePlan(*plan, *model, DeviceCount(*cluster), cluster->name, PlanSource(o.plan, o.overrides) + ":");
  }
  // Which links each mesh axis uses: from --mesh, else from the plan.
  std::optional<std::vector<topologies::AxisLinks>> axes;
  std::string mesh_text;
  if (!o.mesh.empty() || plan) {
    if (!cluster) throw InputError("--mesh " + o.mesh, "needs --cluster", "--mesh with --cluster", "add --cluster C");
    MeshShape shape = plan ? plan->mesh : ParseMeshSpec(o.mesh, "--mesh " + o.mesh);
    if (!o.mesh.empty() && plan) throw InputError("--mesh " + o.mesh, "give either --mesh or a plan, not both", "one of them", "drop --mesh; the plan's mesh is shown");
    if (shape.Product() != DeviceCount(*cluster)) {
      throw InputError("--mesh " + o.mesh, "mesh " + DescribeMesh(shape) + " has " + std::to_string(shape.Product()) + " devices but " +
                                             cluster->name + " has " + std::to_string(DeviceCount(*cluster)),
                       "axis sizes whose product is " + std::to_string(DeviceCount(*cluster)), "change an axis so the product matches");
    }
    const topologies::Cluster graph(*cluster);
    axes = topologies::DescribeAxes(graph, LogicalMesh(shape, plan ? plan->mesh_order : DefaultMeshOrder()));
    mesh_text = DescribeMesh(shape);
  }
  const int64_t seq_len = o.seq_len > 0 ? o.seq_len : plan ? plan->seq_len : model ? model->max_seq_len : 0;

  if (!model && !o.write_model.empty()) throw InputError("--write-model", "needs --model", "--write-model with --model", "add --model M");
  if (!cluster && !o.write_cluster.empty()) throw InputError("--write-cluster", "needs --cluster", "--write-cluster with --cluster", "add --cluster C");
  if (!plan && !o.write_plan.empty()) throw InputError("--write-plan", "needs --plan or --set", "--write-plan with a plan", "add --plan P");
  // Every output is checked before any is written, so a bad one leaves the others unwritten too.
  const std::pair<const std::string&, const char*> outputs[] = {
      {o.write_model, "--write-model"}, {o.write_cluster, "--write-cluster"}, {o.write_plan, "--write-plan"}};
  for (const auto& [path, flag] : outputs) {
    if (!path.empty()) CheckOutputWritable(path, flag);
  }
  if (model && !o.write_model.empty()) WriteOutputFile(o.write_model, ModelToJson(*model).dump(2) + "\n", "--write-model");
  if (cluster && !o.write_cluster.empty()) WriteOutputFile(o.write_cluster, ClusterToJson(*cluster).dump(2) + "\n", "--write-cluster");
  if (plan && !o.write_plan.empty()) WriteOutputFile(o.write_plan, PlanToJson(*plan).dump(2) + "\n", "--write-plan");

  if (o.json) {
    json j = json::object();
    if (model) j["model"] = ModelReport(*model, seq_len);
    if (cluster) j["cluster"] = ClusterReport(*cluster);
    if (plan) j["plan"] = PlanReport(*plan);
    if (axes) j["mesh_axes"] = AxesReport(*axes);
    out << j.dump(2) << "\n";
    return 0;
  }
  if (model) PrintModel(*model, seq_len, out);
  if (model && cluster) out << "\n";
  if (cluster) PrintCluster(*cluster, out);
  if (plan) {
    out << "\n";
    PrintPlan(*plan, out);
  }
  if (axes) {
    out << "\n";
    PrintAxes(*axes, mesh_text, out);
  }
  return 0;
}

}  // namespace shardsim::cli
