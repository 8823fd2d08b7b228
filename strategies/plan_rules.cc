#include "strategies/plan_rules.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/suggest.h"
#include "strategies/data_parallel.h"
#include "strategies/schedule.h"
#include "strategies/stage_layout.h"

namespace shardsim::strategies {
namespace {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d) continue;
    out.push_back(d);
    if (d * d != n) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string List(const std::vector<int64_t>& values, size_t max_items = 16) {
  std::string s;
  for (size_t i = 0; i < values.size() && i < max_items; ++i)
    s += (i ? ", " : "") + std::to_string(values[i]);
  if (values.size() > max_items) s += ", ...";
  return s;
}

std::string I(int64_t v) { return std::to_string(v); }

std::optional<Infeasibility> CheckShape(const PlanSpec& p, const ModelSpec& m, int64_t devices,
                                        const std::string& devices_source) {
  const int64_t product = p.mesh.Product();
  if (product != devices) {
    return Infeasibility{"mesh",
                         "mesh " + DescribeMesh(p.mesh) + " has " +
                             (product < 0 ? std::string("an overflowing number of") : I(product)) +
                             " devices but " + devices_source + " has " + I(devices),
                         "axis sizes whose product is " + I(devices),
                         "change an axis (often data) so the product matches"};
  }
  const MeshShape& mesh = p.mesh;
  if (m.num_heads % mesh.tensor != 0 || m.num_kv_heads % mesh.tensor != 0) {
    return Infeasibility{"mesh/tensor",
                         "tensor=" + I(mesh.tensor) + " must divide heads=" + I(m.num_heads) +
                             " and kv_heads=" + I(m.num_kv_heads),
                         List(Divisors(std::gcd(m.num_heads, m.num_kv_heads))),
                         "Megatron splits attention heads across the tensor axis"};
  }
  if (m.mamba && (m.mamba->num_heads % mesh.tensor != 0 || m.mamba->groups % mesh.tensor != 0)) {
    return Infeasibility{"mesh/tensor",
                         "tensor=" + I(mesh.tensor) + " must divide the Mamba-2 mixers' heads=" + I(m.mamba->num_heads) + " and groups=" + I(m.mamba->groups),
                         List(Divisors(std::gcd(std::gcd(m.num_heads, m.num_kv_heads), m.mamba->groups))),
                         "Megatron-core splits a mixer's heads and B/C groups across the tensor axis (mamba_mixer.py)"};
  }
  if (NumHybridLayers(m, kHybridMamba) > 0 && mesh.context > 1) {
    // Megatron-core's all-to-all context parallelism (core/ssm/mamba_context_parallel.py): each
    // context rank scans whole sequences over a share of the tensor rank's heads, and takes a
    // share of its B/C groups or, where they are fewer than the context ranks, a copy of one.
    const int64_t heads = m.mamba->num_heads / mesh.tensor, groups = m.mamba->groups / mesh.tensor;
    if (heads % mesh.context != 0 || (groups % mesh.context != 0 && mesh.context % groups != 0)) {
      std::vector<int64_t> valid;
      for (int64_t c : Divisors(heads)) {
        if (groups % c == 0 || c % groups == 0) valid.push_back(c);
      }
      return Infeasibility{"mesh/context", "context=" + I(mesh.context) + " must divide the Mamba-2 mixers' heads per tensor rank (" + I(heads) +
                                               ") and divide or be a multiple of their groups per tensor rank (" + I(groups) + ")",
                           List(valid), "pick one of these and give the rest of the ranks to data or fsdp: Megatron-core's Mamba context parallelism gives each context rank whole sequences of its share of the heads (mamba_context_parallel.py)"};
    }
  }
  if (IsHybrid(m) && p.recompute != Recompute::kNone && p.recompute != Recompute::kFull && p.recompute != Recompute::kSelective) {
    return Infeasibility{"recompute", "recompute " + ToString(p.recompute) + " on the hybrid model '" + m.name + "' is not modelled", "none, selective or full",
                         "Megatron-core's recomputation of hybrid models"};
  }
  if (mesh.pipeline > m.num_layers && p.pipeline_layout.empty()) {
    return Infeasibility{"mesh/pipeline",
                         "pipeline=" + I(mesh.pipeline) + " exceeds num_layers=" + I(m.num_layers),
                         "1 to " + I(m.num_layers), "each stage holds at least one layer (or give a pipeline_layout)"};
  }
  if (mesh.expert > 1) {
    if (!m.moe) {
      return Infeasibility{"mesh/expert",
                           "expert=" + I(mesh.expert) + " needs a mixture-of-experts model; '" +
                               m.name + "' is dense",
                           "1", "use the data axis for data parallelism"};
    }
    if (m.moe->num_experts % mesh.expert != 0) {
      return Infeasibility{
          "mesh/expert",
          "expert=" + I(mesh.expert) + " must divide num_experts=" + I(m.moe->num_experts),
          List(Divisors(m.moe->num_experts)), "each expert rank holds num_experts/expert experts"};
    }
  }
  if (!p.expert_axes.empty()) {
    const std::string axes = JoinNames(p.expert_axes);
    if (!m.moe) {
      return Infeasibility{"expert_axes", "expert_axes [" + axes + "] splits routed experts, which '" + m.name + "' has none of", "no expert_axes for a dense model",
                           "drop expert_axes"};
    }
    for (const std::string& a : p.expert_axes) {
      if (mesh.Size(a) == 1) {
        return Infeasibility{"expert_axes", "expert_axes [" + axes + "] lists " + a + ", whose size is 1: the experts are split over nothing there",
                             "axes of size > 1", "drop " + a + " from expert_axes, or give mesh." + a + " a size > 1"};
      }
    }
    const bool lists_expert = std::find(p.expert_axes.begin(), p.expert_axes.end(), "expert") != p.expert_axes.end();
    if (mesh.expert > 1 && !lists_expert) {
      return Infeasibility{"expert_axes", "expert_axes [" + axes + "] leaves out the mesh's expert=" + I(mesh.expert) + " axis, which splits the experts",
                           "a list that holds \"expert\"", "add \"expert\", or move its degree to the data axis"};
    }
    if (ExpertTensorDegree(p) == 1 && mesh.tensor > 1 && !p.sequence_parallel) {
      return Infeasibility{"expert_axes", "expert_axes [" + axes + "] folds the experts over tensor=" + I(mesh.tensor) +
                                              ", whose ranks must route different tokens: sequence parallelism",
                           "sequence_parallel true, or expert_axes without \"tensor\"", "set sequence_parallel"};
    }
  }
  if (ExpertDegree(p) > 1 && m.moe && m.moe->num_experts % ExpertDegree(p) != 0) {
    return Infeasibility{"expert_axes", "the experts split over " + JoinNames(ExpertAxes(p), " x ") + " = " + I(ExpertDegree(p)) + " ranks must divide num_experts=" +
                                            I(m.moe->num_experts),
                         "axes whose sizes multiply to a divisor of " + I(m.moe->num_experts) + " (" + List(Divisors(m.moe->num_experts)) + ")",
                         "each expert rank holds num_experts / its degree experts"};
  }
  if (m.position == PositionKind::kLearned && ExtendsContext(m, p.seq_len)) {
    return Infeasibility{"seq_len",
                         "seq_len=" + I(p.seq_len) + " exceeds the " + I(m.max_seq_len) +
                             " learned positions of '" + m.name + "'",
                         "1 to " + I(m.max_seq_len), ""};
  }
  if (mesh.context > 1 && p.seq_len % (2 * mesh.context) != 0) {
    const int64_t chunks = 2 * mesh.context;  // causal load balancing gives each rank two chunks
    return Infeasibility{
        "seq_len", "seq_len=" + I(p.seq_len) + " must be divisible by 2 x context = " + I(chunks),
        "a multiple of " + I(chunks),
        "ring attention's load balancing gives each context rank two chunks"};
  }
  if (p.ep_dispatch_dtype == "fp8" && ExpertDegree(p) == 1) {
    return Infeasibility{"ep_dispatch_dtype", "ep_dispatch_dtype fp8 quantises the expert all-to-alls, which a plan without expert parallelism does not run",
                         "bf16, or fp8 with the experts split (expert > 1 or expert_axes)",
                         m.moe ? "drop ep_dispatch_dtype or split the experts over an expert axis (or expert_axes)" : "drop ep_dispatch_dtype: '" + m.name + "' is dense"};
  }
  if (p.ep_dispatcher == "deepep" && !m.moe) {
    return Infeasibility{"ep_dispatcher", "ep_dispatcher deepep dispatches tokens to experts, which '" + m.name + "' has none of", "alltoall, or deepep with an MoE model",
                         "drop ep_dispatcher: '" + m.name + "' is dense"};
  }
  if (p.expert_routing == "round-robin" && !m.moe) {
    return Infeasibility{"expert_routing", "expert_routing round-robin routes tokens to experts, which '" + m.name + "' has none of",
                         "uniform, or round-robin with an MoE model", "drop expert_routing: '" + m.name + "' is dense"};
  }
  if (p.dtype == "fp32" && !p.master_weights.empty() && p.master_weights != "fp32") {
    return Infeasibility{"master_weights", "master_weights " + p.master_weights + " with dtype fp32", "fp32 (fp32 training holds fp32 weights, the master itself)",
                         "set master_weights to fp32 or drop it"};
  }
  if (p.dtype == "fp16" && p.master_weights == "bf16") {
    return Infeasibility{"master_weights", "master_weights bf16 with dtype fp16", "fp32-copy or fp32 (fp16 weights keep an fp32 master for loss scaling)",
                         "set dtype to bf16 or master_weights to fp32-copy"};
  }
  if (!p.attention_kernel.empty() && !p.flash_attention) {
    return Infeasibility{"attention_kernel", "attention_kernel " + p.attention_kernel + " with flash_attention false", "flash_attention true (each kernel is blockwise)",
                         "drop attention_kernel, or set flash_attention to true"};
  }
  if (p.offload_layers > m.num_layers) {
    return Infeasibility{"offload_layers", "offload_layers=" + I(p.offload_layers) + " is more than the " + I(m.num_layers) + " decoder layers of '" + m.name + "'",
                         "0 to " + I(m.num_layers), "offload_layers counts the first decoder layers of each model chunk"};
  }
  if (HasSixteenBitLayers(p) && p.sixteen_bit_first_layers + p.sixteen_bit_last_layers >= m.num_layers) {
    // The field set alone, or the first where both are.
    return Infeasibility{p.sixteen_bit_first_layers > 0 ? "sixteen_bit_first_layers" : "sixteen_bit_last_layers", "sixteen_bit_first_layers=" + I(p.sixteen_bit_first_layers) + " and sixteen_bit_last_layers=" + I(p.sixteen_bit_last_layers) +
                             " keep all " + I(m.num_layers) + " decoder layers of '" + m.name + "' at 16 bits",
                         "together at most " + I(m.num_layers - 1), "to train every layer at 16 bits set dtype to bf16"};
  }
  if (p.tensor_gather_dtype == "fp8" && !GathersSequence(p)) {
    return Infeasibility{"tensor_gather_dtype", "tensor_gather_dtype fp8 narrows the sequence-parallel all-gathers, which this plan does not run (tensor=" + I(mesh.tensor) +
                             (p.sequence_parallel ? "" : ", no sequence_parallel") + ")",
                         "bf16, or fp8 with tensor > 1 and sequence_parallel", "drop tensor_gather_dtype, or set sequence_parallel with a tensor axis"};
  }
  if (p.param_gather_dtype == "fp8" && !GathersParams(p)) {
    return Infeasibility{"param_gather_dtype", "param_gather_dtype fp8 narrows the parameter all-gathers, which this plan does not run (no fsdp axis, and no data axis under zero_stage >= 1)",
                         "bf16, or fp8 with parameters sharded", "drop param_gather_dtype, or shard the optimizer over data (zero_stage >= 1) or the weights over fsdp"};
  }
  if (mesh.context > 1 && m.sliding_window && m.sliding_window->window < p.seq_len) {
    return Infeasibility{"mesh/context",
                         "context=" + I(mesh.context) + " splits the sequences of '" + m.name + "', whose local layers attend over a " +
                             I(m.sliding_window->window) + "-token window: ring attention over a sliding window is not modelled",
                         "1", "shard the sequence over tensor with sequence_parallel, or the batch over data/fsdp"};
  }
  if (p.sequence_parallel && (p.seq_len / mesh.context) % mesh.tensor != 0) {
    return Infeasibility{
        "sequence_parallel",
        "sequence parallelism splits seq_len/context=" + I(p.seq_len / mesh.context) +
            " over tensor=" + I(mesh.tensor) + ", which does not divide it",
        "seq_len/context a multiple of tensor", "set sequence_parallel to false or change seq_len"};
  }
  const int64_t replicas = BatchReplicas(mesh);
  if (p.global_batch_size % replicas != 0) {
    return Infeasibility{
        "global_batch_size",
        "global_batch_size=" + I(p.global_batch_size) +
            " does not split over data x fsdp x expert = " + I(replicas) + " replicas",
        "a multiple of " + I(replicas), "every replica must see the same number of sequences"};
  }
  const int64_t per_replica = p.global_batch_size / replicas;
  if (per_replica % p.micro_batch_size != 0) {
    return Infeasibility{"micro_batch_size",
                         "micro_batch_size=" + I(p.micro_batch_size) + " must divide the " +
                             I(per_replica) + " sequences per replica",
                         List(Divisors(per_replica)), ""};
  }
  if (p.pipeline_rounds > 1 && p.mesh.pipeline == 1) {
    return Infeasibility{"pipeline_rounds",
                         "pipeline_rounds=" + I(p.pipeline_rounds) + " without pipeline parallelism (mesh.pipeline 1): there is no schedule to repeat",
                         "1 without pipeline", "micro-batches on one stage are plain gradient accumulation; leave pipeline_rounds out"};
  }
  return std::nullopt;
}

// The rounds of `microbatches` per replica whose share `schedule` runs.
std::vector<int64_t> RoundsThatFit(const Schedule& schedule, const PlanSpec& p, int64_t layers, int64_t microbatches) {
  std::vector<int64_t> fit;
  for (int64_t rounds : Divisors(microbatches)) {
    if (!schedule.Check(p, layers, microbatches / rounds)) fit.push_back(rounds);
  }
  return fit;
}

// The plan's pipeline_rounds against its micro-batches and schedule: rounds must split the
// micro-batches evenly into shares the schedule runs.
std::optional<Infeasibility> CheckRounds(const Schedule& schedule, const PlanSpec& p, int64_t layers) {
  const PlanShape shape = DerivePlanShape(p);
  const auto whole = schedule.Check(p, layers, shape.num_microbatches);
  if (whole) return whole;  // too few for one schedule: the batch, not the rounds
  if (shape.num_microbatches % p.pipeline_rounds != 0) {
    return Infeasibility{"pipeline_rounds",
                         "pipeline_rounds=" + I(p.pipeline_rounds) + " must divide the " + I(shape.num_microbatches) +
                             " micro-batches per replica (each round runs an equal share)",
                         List(RoundsThatFit(schedule, p, layers, shape.num_microbatches)),
                         "a framework's gradient accumulation steps: sequences per replica / (micro-batches per schedule x micro_batch_size)"};
  }
  // Walked task by task (kMaxWalkedRound): bounded, as every command's work is (docs/cli.md, Limits).
  if (p.mesh.pipeline > 1 && (p.pipeline_rounds > 1 || schedule.HoldsWholeRound()) && shape.round_microbatches > kMaxWalkedRound) {
    return Infeasibility{p.pipeline_rounds > 1 ? "pipeline_rounds" : "pipeline_schedule",
                         I(shape.round_microbatches) + " micro-batches per replica in each " + p.pipeline_schedule + " schedule" +
                             (p.pipeline_rounds > 1 ? " of the " + I(p.pipeline_rounds) + " rounds" : "") +
                             ": more than the estimate walks one by one where it cannot extend a steady state",
                         "at most " + I(kMaxWalkedRound) + " a schedule (more rounds, a larger micro_batch_size or a smaller batch)",
                         p.pipeline_rounds > 1 ? "more rounds, or one schedule over them all (pipeline_rounds 1), which is costed at any count"
                                               : "1F1B holds p micro-batches where GPipe holds them all, and is costed at any count"};
  }
  if (auto bad = schedule.Check(p, layers, shape.round_microbatches)) {
    return Infeasibility{"pipeline_rounds",
                         "pipeline_rounds=" + I(p.pipeline_rounds) + " leaves " + I(shape.round_microbatches) + " of the " + I(shape.num_microbatches) +
                             " micro-batches per replica to each schedule: " + bad->what,
                         List(RoundsThatFit(schedule, p, layers, shape.num_microbatches)), "fewer rounds"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<Infeasibility> CheckPlan(const PlanSpec& p, const ModelSpec& m, int64_t devices,
                                       const std::string& devices_source) {
  if (auto bad = CheckMeshOrder(p)) return bad;
  if (auto bad = CheckShape(p, m, devices, devices_source)) return bad;
  const Schedule* schedule = FindSchedule(p.pipeline_schedule);
  if (!schedule) return UnknownSchedule(p.pipeline_schedule);
  if (auto bad = CheckRounds(*schedule, p, m.num_layers)) return bad;
  return CheckLayout(m, p);
}

std::optional<Infeasibility> CheckMeshOrder(const PlanSpec& p) {
  std::vector<std::string> seen;
  for (const std::string& axis : p.mesh_order) {
    if (std::find(MeshAxisNames().begin(), MeshAxisNames().end(), axis) == MeshAxisNames().end()) {
      const std::string s = DidYouMean(axis, MeshAxisNames());
      return Infeasibility{"mesh_order",
                           "unknown axis '" + axis + "'" + (s.empty() ? "" : "; " + s),
                           JoinNames(MeshAxisNames()), ""};
    }
    if (std::find(seen.begin(), seen.end(), axis) != seen.end()) {
      return Infeasibility{"mesh_order", "axis '" + axis + "' appears twice",
                           "each of " + JoinNames(MeshAxisNames()) + " once", ""};
    }
    seen.push_back(axis);
  }
  if (seen.size() != MeshAxisNames().size()) {
    return Infeasibility{"mesh_order",
                         "must list all " + I(static_cast<int64_t>(MeshAxisNames().size())) +
                             " axes, got " + I(static_cast<int64_t>(seen.size())),
                         JoinNames(DefaultMeshOrder()), "outermost (slowest links) first"};
  }
  return std::nullopt;
}

void ValidatePlan(const PlanSpec& p, const ModelSpec& m, int64_t devices,
                  const std::string& devices_source, const std::string& where) {
  if (auto bad = CheckPlan(p, m, devices, devices_source)) throw bad->ToError(where);
}

void ValidateMeshOrder(const PlanSpec& p, const std::string& where) {
  if (auto bad = CheckMeshOrder(p)) throw bad->ToError(where);
}

}  // namespace shardsim::strategies
