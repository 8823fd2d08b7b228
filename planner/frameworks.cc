#include "planner/frameworks.h"

#include "core/error.h"
#include "core/suggest.h"
#include "planner/framework_facts.h"
#include "strategies/stage_layout.h"

namespace shardsim::planner {

// core/plan_spec.h holds the names (plan JSON is read in core); Framework follows their order.
std::vector<std::string> FrameworkNames() { return PlanFrameworkNames(); }

std::string_view FrameworkName(Framework framework) { return FactsOf(framework).name; }

Framework ParseFramework(const std::string& name, const std::string& where) {
  const std::string canonical = CanonicalFrameworkName(name);
  const std::vector<std::string>& names = PlanFrameworkNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == canonical) return static_cast<Framework>(i);
  }
  const std::string s = DidYouMean(name, names);
  throw InputError(where, "unknown framework '" + name + "'" + (s.empty() ? "" : "; " + s),
                   JoinNames(names), "\"megatron\" also names megatron-core");
}

std::vector<FrameworkGap> FrameworkGapsByField(Framework framework, const ModelSpec& model,
                                               const PlanSpec& plan) {
  std::vector<FrameworkGap> gaps;
  AppendGaps(FactsOf(framework), model, plan, gaps);
  return gaps;
}

std::vector<std::string> FrameworkGaps(Framework framework, const ModelSpec& model,
                                       const PlanSpec& plan) {
  std::vector<std::string> texts;
  for (FrameworkGap& gap : FrameworkGapsByField(framework, model, plan)) texts.push_back(std::move(gap.text));
  return texts;
}

std::optional<FrameworkMfu> MfuAsFrameworkCounts(Framework framework, const ModelSpec& model, int64_t seq_len, double mfu_palm) {
  const FrameworkFacts& facts = FactsOf(framework);
  if (facts.flop_count == FlopCount::kNone) return std::nullopt;
  const FlopsPerToken f = ForwardFlopsPerToken(model, seq_len);
  const double count = facts.flop_count == FlopCount::kCausalAttention ? 3 * (f.matmul + f.attention / 2 + f.scan)
                       : facts.flop_count == FlopCount::kCausalWindows ? f.causal_training()
                                                                       : f.training();
  return FrameworkMfu{.mfu = mfu_palm * count / f.training(),
                      .count = facts.flop_count == FlopCount::kFullAttention ? "all of the attention"
                               : facts.flop_count == FlopCount::kCausalWindows ? "causal attention at half, local layers over their windows"
                                                                               : "causal attention at half, every layer's full context",
                      .source = std::string(facts.source) + ": " + std::string(facts.flop_count_source)};
}

std::vector<Recompute> FrameworkRecomputes(Framework framework) {
  const FrameworkFacts& facts = FactsOf(framework);
  std::vector<Recompute> kinds;
  // By what Llama 3 8B keeps per layer (strategies/saved_tensors.h): none and selective all of it
  // under a blockwise kernel, minimal 62%, selective-layer 53%, selective-op 46%,
  // save-dot-with-context-except-mlp 26%, save-dot-except-mlp 21%, save-qkv-proj 15%,
  // save-out-proj 12%, full the input (6%).
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kMinimal, Recompute::kSelectiveLayer, Recompute::kSelectiveOp,
                      Recompute::kSaveDotWithContextExceptMlp, Recompute::kSaveDotExceptMlp, Recompute::kSaveQkvProj, Recompute::kSaveOutProj,
                      Recompute::kFull}) {
    if (facts.recompute[static_cast<size_t>(r)]) kinds.push_back(r);
  }
  return kinds;
}

PlanSpec AsFrameworkRuns(Framework framework, const ModelSpec& model, const PlanSpec& plan) {
  const FrameworkFacts& facts = FactsOf(framework);
  PlanSpec p = plan;
  for (const MeshAxisFacts& axis : kMeshAxes) {
    const OverlapRule rule = OverlapRuleOf(facts, p, axis.axis);
    if (rule != OverlapRule::kSwitch) p.overlap.Overlaps(axis.axis) = rule == OverlapRule::kAlways;
  }
  // One switch for both reductions: the value of the axis that communicates (data's where both
  // do: FrameworkGaps names a difference).
  if (facts.one_switch_data_fsdp) {
    if (OverlapMatters(p, MeshAxis::kFsdp) && !OverlapMatters(p, MeshAxis::kData)) {
      p.overlap.data = p.overlap.fsdp;
    } else {
      p.overlap.fsdp = p.overlap.data;
    }
  }
  // A framework with one context-parallel K/V exchange runs that one.
  if (p.mesh.context > 1 && p.context_kv == "ring" && !facts.ring_context && facts.all_gather_context) p.context_kv = "all-gather";
  if (p.mesh.context > 1 && p.context_kv == "all-gather" && !facts.all_gather_context && facts.ring_context) p.context_kv = "ring";
  if (facts.tensor_overlap_needs_sequence_parallel && !p.sequence_parallel)
    p.overlap.tensor = false;
  const bool keeps =
      facts.keep_gathered == KeepGathered::kSwitch ||
      (facts.keep_gathered == KeepGathered::kWithPipelineOnly && p.mesh.pipeline > 1);
  if (!keeps) p.fsdp_reshard_after_forward = true;
  // An unset reduction dtype is the framework's; a set one stays (FrameworkGaps judges it).
  if (p.grad_reduce_dtype.empty()) p.grad_reduce_dtype = GradReduceDefault(facts, p);
  if (p.cross_entropy.empty()) p.cross_entropy = std::string(facts.cross_entropy_default);
  // Async tensor parallelism compiles the model (torchtitan's configs.py), so its kernels are fused.
  if (p.elementwise_kernels.empty()) {
    p.elementwise_kernels = p.mesh.tensor > 1 && p.overlap.tensor && facts.fused_elementwise ? "fused" : std::string(facts.elementwise_default);
  }
  if (p.dtype == "fp8" && p.fp8_recipe.empty()) p.fp8_recipe = std::string(facts.fp8_recipe_default);
  // 16-bit weight-gradient products read 16-bit inputs: the products keep those.
  if (SixteenBitWgrad(p) && p.saved_input_dtype.empty()) p.saved_input_dtype = "bf16";
  if (p.dtype == "fp8" && p.saved_input_dtype.empty()) p.saved_input_dtype = std::string(facts.saved_input_dtype);
  if (p.dtype == "fp8" && p.fp8_weight_casts.empty()) p.fp8_weight_casts = std::string(facts.fp8_weight_casts);
  if (p.dtype == "fp8" && p.tensor_gather_dtype.empty() && GathersSequence(p)) {
    p.tensor_gather_dtype = facts.fp8_tensor_gather ? "fp8" : "bf16";
  }
  if (p.sequence_parallel_inputs.empty() && GathersSequence(p)) {
    p.sequence_parallel_inputs = std::string(facts.sequence_parallel_inputs);
  }
  if (p.pipeline_buffers.empty() && p.mesh.pipeline > 1) p.pipeline_buffers = std::string(facts.pipeline_buffers);
  if (p.tensor_overlap_scope.empty() && p.mesh.tensor > 1 && p.overlap.tensor) p.tensor_overlap_scope = std::string(facts.tensor_overlap_scope);
  if (p.master_weights.empty() && p.dtype != "fp32") p.master_weights = std::string(facts.master_weights);
  if (p.memory_allocator.empty()) p.memory_allocator = std::string(facts.memory_allocator);
  if (p.pipeline_layout.empty()) {
    const std::vector<int64_t> layers = FrameworkPartLayers(facts, model, p);
    if (!layers.empty()) p.pipeline_layout = strategies::PartLayersText(layers, model.mtp_layers);
  }
  return p;
}

}  // namespace shardsim::planner
