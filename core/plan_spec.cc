#include "core/plan_spec.h"

#include <algorithm>
#include <numeric>

#include "core/cluster_spec.h"
#include "core/error.h"
#include "core/suggest.h"
#include "core/text.h"
#include "core/units.h"

namespace shardsim {
namespace {

std::string I(int64_t v) { return std::to_string(v); }

// The field of a struct with one field per mesh axis (MeshShape, OverlapSpec) for `axis`.
template <typename PerAxis>
auto& FieldOf(PerAxis& fields, MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kData: return fields.data;
    case MeshAxis::kFsdp: return fields.fsdp;
    case MeshAxis::kTensor: return fields.tensor;
    case MeshAxis::kContext: return fields.context;
    case MeshAxis::kPipeline: return fields.pipeline;
    case MeshAxis::kExpert: return fields.expert;
  }
  SHARDSIM_CHECK(false, "unknown mesh axis " + std::to_string(static_cast<int>(axis)));
}

}  // namespace

int64_t MeshShape::Size(std::string_view axis) const { return Size(AxisFacts(axis).axis); }

int64_t& MeshShape::Size(std::string_view axis) { return Size(AxisFacts(axis).axis); }

int64_t MeshShape::Size(MeshAxis axis) const { return const_cast<MeshShape*>(this)->Size(axis); }

int64_t& MeshShape::Size(MeshAxis axis) { return FieldOf(*this, axis); }

bool OverlapSpec::Overlaps(MeshAxis axis) const { return const_cast<OverlapSpec*>(this)->Overlaps(axis); }

bool& OverlapSpec::Overlaps(MeshAxis axis) { return FieldOf(*this, axis); }

int64_t MeshShape::Product() const {
  int64_t p = 1;
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (__builtin_mul_overflow(p, Size(axis.axis), &p)) return -1;
  }
  return p;
}

const std::vector<std::string>& MeshAxisNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const MeshAxisFacts& axis : kMeshAxes) names.emplace_back(axis.name);
    return names;
  }();
  return kNames;
}

std::vector<std::string> DefaultMeshOrder() {
  static const std::vector<std::string> kOrder = [] {
    std::vector<std::string> order(kMeshAxes.size());
    for (const MeshAxisFacts& axis : kMeshAxes) order[static_cast<size_t>(axis.default_order)] = axis.name;
    return order;
  }();
  return kOrder;
}

int64_t BatchReplicas(const MeshShape& mesh) {
  int64_t n = 1;
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (axis.batch_replica) n *= mesh.Size(axis.axis);
  }
  return n;
}

std::vector<std::string> UsedMeshOrder(const PlanSpec& p) {
  std::vector<std::string> used;
  for (const std::string& a : p.mesh_order) {
    if (p.mesh.Size(a) > 1) used.push_back(a);
  }
  return used;
}

bool UsesDefaultMeshOrder(const PlanSpec& p) {
  PlanSpec d = p;
  d.mesh_order = DefaultMeshOrder();
  return UsedMeshOrder(p) == UsedMeshOrder(d);
}

double ActivationBytes(std::string_view dtype) { return dtype == "fp32" ? 4 : 2; }

double ComputeElementBytes(const PlanSpec& p) { return ActivationBytes(p.dtype); }

double ParamGatherBytes(const PlanSpec& p) {
  return p.dtype == "fp8" && p.param_gather_dtype == "fp8" ? Fp8WeightBytes(Fp8RecipeOf(p)) : ComputeElementBytes(p);
}

std::string WeightDtype(const PlanSpec& p) { return p.dtype == "fp8" ? "bf16" : p.dtype; }

double GradReduceBytes(const PlanSpec& p) {
  if (p.grad_reduce_dtype.empty()) return ComputeElementBytes(p);
  return p.grad_reduce_dtype == "fp32" ? 4 : 2;
}

const std::vector<std::string>& GradReduceDtypeNames() {
  static const std::vector<std::string> names = {"bf16", "fp16", "fp32"};
  return names;
}

bool ReshardAfterForward(const PlanSpec& p) { return p.fsdp_reshard_after_forward.value_or(p.mesh.pipeline == 1); }

PlanShape DerivePlanShape(const PlanSpec& p) {
  PlanShape s;
  s.devices = p.mesh.Product();
  s.batch_replicas = BatchReplicas(p.mesh);
  s.sequences_per_replica = s.batch_replicas > 0 ? p.global_batch_size / s.batch_replicas : 0;
  s.num_microbatches = p.micro_batch_size > 0 ? s.sequences_per_replica / p.micro_batch_size : 0;
  s.round_microbatches = p.pipeline_rounds > 0 ? s.num_microbatches / p.pipeline_rounds : 0;
  s.tokens_per_step = p.global_batch_size * p.seq_len;
  return s;
}

std::string RoundsPhrase(const PlanSpec& p) {
  if (p.pipeline_rounds <= 1) return "";
  return " in " + std::to_string(p.pipeline_rounds) + " pipeline schedules of " + std::to_string(DerivePlanShape(p).round_microbatches);
}

std::string ToString(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
    case Recompute::kSelectiveOp: return "selective-op";
    case Recompute::kSelectiveLayer: return "selective-layer";
    case Recompute::kMinimal: return "minimal";
    case Recompute::kSaveQkvProj: return "save-qkv-proj";
    case Recompute::kSaveDotExceptMlp: return "save-dot-except-mlp";
    case Recompute::kSaveDotWithContextExceptMlp: return "save-dot-with-context-except-mlp";
    case Recompute::kSaveOutProj: return "save-out-proj";
  }
  return "none";
}

const std::vector<std::string>& Fp8RecipeNames() {
  static const std::vector<std::string> kNames = {"tensorwise", "rowwise", "blockwise", "mxfp8", "nvfp4"};
  return kNames;
}

std::string MatmulPeakDtype(std::string_view dtype, std::string_view fp8_recipe) {
  return dtype == "fp8" && fp8_recipe == "nvfp4" ? "fp4" : std::string(dtype);
}

std::string CrossEntropyOf(const PlanSpec& p) { return p.cross_entropy.empty() ? "fused" : p.cross_entropy; }

std::string ElementwiseKernelsOf(const PlanSpec& p) { return p.elementwise_kernels.empty() ? "fused" : p.elementwise_kernels; }

bool EagerElementwise(const PlanSpec& p) { return p.elementwise_kernels == "eager" || p.elementwise_kernels == "eager-fused-norm"; }

bool EagerNorms(const PlanSpec& p) { return p.elementwise_kernels == "eager"; }

double EpDispatchBytes(const PlanSpec& p, int64_t row_width) {
  return p.ep_dispatch_dtype == "fp8" ? Fp8ElementBytes(p, row_width) : ComputeElementBytes(p);
}

double SavedInputBytes(const PlanSpec& p, int64_t row_width) {
  return p.dtype == "fp8" && p.saved_input_dtype == "fp8" ? Fp8ElementBytes(p, row_width) : ComputeElementBytes(p);
}

double TensorGatherBytes(const PlanSpec& p, int64_t row_width) {
  return p.dtype == "fp8" && p.tensor_gather_dtype == "fp8" ? Fp8ElementBytes(p, row_width) : ComputeElementBytes(p);
}

namespace {
// The values of each 16-bit-or-FP8 field: ep_dispatch_dtype, saved_input_dtype, param_gather_dtype,
// tensor_gather_dtype.
const std::vector<std::string>& Bf16OrFp8Names() {
  static const std::vector<std::string> kNames = {"bf16", "fp8"};
  return kNames;
}
}  // namespace

const std::vector<std::string>& SavedInputDtypeNames() { return Bf16OrFp8Names(); }
const std::vector<std::string>& WgradDtypeNames() { return Bf16OrFp8Names(); }
bool SixteenBitWgrad(const PlanSpec& p) { return p.dtype == "fp8" && p.wgrad_dtype == "bf16"; }

bool HasSixteenBitLayers(const PlanSpec& p) { return p.dtype == "fp8" && p.sixteen_bit_first_layers + p.sixteen_bit_last_layers > 0; }

bool SixteenBitLayer(const PlanSpec& p, int64_t num_layers, int64_t layer) {
  return HasSixteenBitLayers(p) && (layer < p.sixteen_bit_first_layers || layer >= num_layers - p.sixteen_bit_last_layers);
}

const std::vector<std::string>& Fp8RecipeFields() {
  static const std::vector<std::string> kFields = {"fp8_recipe",       "ep_dispatch_dtype", "saved_input_dtype",       "wgrad_dtype",
                                                   "param_gather_dtype", "fp8_weight_casts", "tensor_gather_dtype", "sixteen_bit_first_layers",
                                                   "sixteen_bit_last_layers"};
  return kFields;
}

PlanSpec AtSixteenBits(PlanSpec p) {
  const PlanSpec defaults;
  p.dtype = "bf16";
  p.fp8_recipe = defaults.fp8_recipe, p.ep_dispatch_dtype = defaults.ep_dispatch_dtype, p.saved_input_dtype = defaults.saved_input_dtype;
  p.wgrad_dtype = defaults.wgrad_dtype, p.param_gather_dtype = defaults.param_gather_dtype, p.fp8_weight_casts = defaults.fp8_weight_casts;
  p.tensor_gather_dtype = defaults.tensor_gather_dtype;
  p.sixteen_bit_first_layers = defaults.sixteen_bit_first_layers, p.sixteen_bit_last_layers = defaults.sixteen_bit_last_layers;
  return p;
}
const std::vector<std::string>& TensorGatherDtypeNames() { return Bf16OrFp8Names(); }

bool GathersSequence(const PlanSpec& p) { return p.mesh.tensor > 1 && p.sequence_parallel; }

bool KeepsGatheredSequence(const PlanSpec& p) {
  return GathersSequence(p) && p.sequence_parallel_inputs == "keep-gathered";
}

const std::vector<std::string>& SequenceParallelInputsNames() {
  static const std::vector<std::string> kNames = {"regather", "keep-gathered"};
  return kNames;
}
std::vector<std::string> ExpertAxes(const PlanSpec& p) {
  std::vector<std::string> axes;
  if (p.expert_axes.empty()) {
    if (p.mesh.expert > 1) axes.emplace_back("expert");
    return axes;
  }
  // In the mesh table's order, whatever order the plan lists them in.
  for (const MeshAxisFacts& axis : kMeshAxes) {
    const std::string name(axis.name);
    if (p.mesh.Size(axis.axis) > 1 && std::find(p.expert_axes.begin(), p.expert_axes.end(), name) != p.expert_axes.end()) axes.push_back(name);
  }
  return axes;
}

std::string ExpertAxesNote(const PlanSpec& p) {
  return p.expert_axes.empty() ? "" : ", experts over " + JoinNames(ExpertAxes(p), " x ") + " (expert_axes)";
}

int64_t ExpertDegree(const PlanSpec& p) {
  int64_t n = 1;
  for (const std::string& a : ExpertAxes(p)) n *= p.mesh.Size(a);
  return n;
}

int64_t ExpertTensorDegree(const PlanSpec& p) {
  for (const std::string& a : ExpertAxes(p)) {
    if (a == "tensor") return 1;
  }
  return p.mesh.tensor;
}

const std::vector<std::string>& ExpertAxisNames() {
  static const std::vector<std::string> kNames = {"tensor", "context", "data", "expert"};
  return kNames;
}

const std::vector<std::string>& PipelineBuffersNames() {
  static const std::vector<std::string> kNames = {"per-transfer", "per-microbatch", "keep-outputs"};
  return kNames;
}

const std::vector<std::string>& AttentionKernelNames() {
  static const std::vector<std::string> kNames = {"flash", "triton", "flex"};
  return kNames;
}

std::string AttentionKernelOf(const PlanSpec& p) {
  if (!p.flash_attention) return std::string(kUnfusedAttention);
  return p.attention_kernel.empty() ? "flash" : p.attention_kernel;
}

const std::vector<std::string>& MasterWeightsNames() {
  static const std::vector<std::string> kNames = {"fp32-copy", "fp32", "bf16"};
  return kNames;
}

std::string MasterWeightsPhrase(std::string_view master_weights) {
  if (master_weights == "fp32") return "fp32 weights, their own master, with fp32 gradients and Adam state";
  if (master_weights == "bf16") return "bf16 weights, gradients and Adam state, no fp32 copy";
  return "16-bit weights with an fp32 master copy and fp32 Adam state";
}

std::string MasterWeightsOf(const PlanSpec& p) {
  if (!p.master_weights.empty()) return p.master_weights;
  return p.dtype == "fp32" ? "fp32" : "fp32-copy";
}

const std::vector<std::string>& TensorOverlapScopeNames() {
  static const std::vector<std::string> kNames = {"all", "single-product"};
  return kNames;
}

bool HidesRegionReduceScatter(const PlanSpec& p, bool several_products) {
  return p.overlap.tensor && !(several_products && p.tensor_overlap_scope == "single-product");
}

bool HidesRegionAllGather(const PlanSpec& p, bool fp8_products) {
  const bool rowwise = fp8_products && p.dtype == "fp8" && Fp8RecipeOf(p) == "rowwise";
  return p.overlap.tensor && !(rowwise && p.tensor_overlap_scope == "single-product");
}

std::string PipelineBuffersOf(const PlanSpec& p) { return p.pipeline_buffers.empty() ? "per-transfer" : p.pipeline_buffers; }

const std::vector<std::string>& MemoryAllocatorNames() {
  static const std::vector<std::string> kNames = {"caching", "static"};
  return kNames;
}

std::string MemoryAllocatorOf(const PlanSpec& p) { return p.memory_allocator.empty() ? "caching" : p.memory_allocator; }

const std::vector<std::string>& ParamGatherDtypeNames() { return Bf16OrFp8Names(); }
const std::vector<std::string>& Fp8WeightCastsNames() {
  static const std::vector<std::string> kNames = {"per-microbatch", "per-step"};
  return kNames;
}

Fp8Scales Fp8ScaleBytes(std::string_view recipe) {
  if (recipe == "rowwise") return {.per_row = 4};
  if (recipe == "blockwise") return {.per_element = 4.0 / 128};
  if (recipe == "mxfp8") return {.per_element = 1.0 / 32};
  if (recipe == "nvfp4") return {.per_element = 1.0 / 16, .element = 0.5};
  return {};
}

double Fp8WeightScaleBytes(std::string_view recipe) {
  if (recipe == "blockwise") return 4.0 / (128 * 128);
  if (recipe == "mxfp8") return Fp8ScaleBytes(recipe).per_element;  // 1 x 32 blocks, as activations
  // 16 x 16 blocks share a value, but each row of 16 stores its E4M3 scale (Transformer Engine's
  // NVFP4Quantizer.get_scale_shape: one per 16 either way, as the products read them).
  if (recipe == "nvfp4") return Fp8ScaleBytes(recipe).per_element;
  return 0;
}

double Fp8WeightBytes(std::string_view recipe) { return Fp8ScaleBytes(recipe).element + Fp8WeightScaleBytes(recipe); }

double Fp8ElementBytes(const PlanSpec& p, int64_t row_width) {
  const Fp8Scales scales = Fp8ScaleBytes(Fp8RecipeOf(p));
  return scales.element + scales.per_element + scales.per_row / static_cast<double>(row_width);
}

const std::vector<std::string>& EpDispatchDtypeNames() { return Bf16OrFp8Names(); }

bool DeduplicatesDispatch(const PlanSpec& p) { return ExpertDegree(p) > 1 && p.ep_dispatcher == "deepep"; }
int64_t DispatchKernelUnits(const PlanSpec& p) { return DeduplicatesDispatch(p) ? 20 : 0; }

const std::vector<std::string>& EpDispatcherNames() {
  static const std::vector<std::string> kNames = {"alltoall", "deepep"};
  return kNames;
}

const std::vector<std::string>& ExpertRoutingNames() {
  static const std::vector<std::string> kNames = {"uniform", "round-robin"};
  return kNames;
}

TokenRouting DispatchRouting(const ModelSpec& m, const PlanSpec& p) {
  if (!m.moe) return {};
  return TokenRouting{m.moe->num_experts, m.moe->top_k, m.moe->groups, m.moe->group_top_k, p.expert_routing == "round-robin"};
}

std::string Fp8RecipeOf(const PlanSpec& p) {
  if (p.dtype != "fp8") return "";
  return p.fp8_recipe.empty() ? "tensorwise" : p.fp8_recipe;
}

const std::vector<std::string>& CrossEntropyNames() {
  static const std::vector<std::string> kNames = {"fused", "eager"};
  return kNames;
}

const std::vector<std::string>& ElementwiseKernelsNames() {
  static const std::vector<std::string> kNames = {"fused", "eager", "eager-fused-norm"};
  return kNames;
}

const std::vector<std::string>& PlanFrameworkNames() {
  static const std::vector<std::string> kNames = {"megatron-core", "torchtitan", "maxtext", "deepspeed"};
  return kNames;
}

std::string CanonicalFrameworkName(std::string_view name) {
  if (name == "megatron") return "megatron-core";  // the repository's and the old export's name
  for (const std::string& known : PlanFrameworkNames()) {
    if (known == name) return known;
  }
  return "";
}

std::vector<std::string> RecomputeNames() {
  std::vector<std::string> names;
  for (size_t i = 0; i < kRecomputes; ++i) names.push_back(ToString(static_cast<Recompute>(i)));
  return names;
}

Recompute ParseRecompute(const std::string& name) {
  for (size_t i = 0; i < kRecomputes; ++i) {
    if (ToString(static_cast<Recompute>(i)) == name) return static_cast<Recompute>(i);
  }
  SHARDSIM_CHECK(false, "unknown recompute " + name);
}

MeshShape ParseMeshSpec(const std::string& text, const std::string& where) {
  MeshShape mesh;
  std::vector<std::string> seen;
  for (const std::string& item : Split(text, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      throw InputError(where, "'" + item + "' is not axis=size", "axes " + JoinNames(MeshAxisNames()), "e.g. data=8,tensor=8");
    }
    const std::string axis = item.substr(0, eq);
    if (FindMeshAxis(axis) == nullptr) {
      const std::string s = DidYouMean(axis, MeshAxisNames());
      throw InputError(where, "unknown mesh axis '" + axis + "'" + (s.empty() ? "" : "; " + s), JoinNames(MeshAxisNames()));
    }
    if (std::find(seen.begin(), seen.end(), axis) != seen.end()) {
      throw InputError(where, "axis '" + axis + "' given twice", "each axis once");
    }
    seen.push_back(axis);
    mesh.Size(axis) = ParseInteger(item.substr(eq + 1), where + " (" + axis + ")", 1, int64_t{1} << 24);
  }
  return mesh;
}

std::string DescribeMesh(const MeshShape& mesh) {
  std::string s;
  for (const std::string& axis : MeshAxisNames()) {
    if (mesh.Size(axis) == 1) continue;
    s += (s.empty() ? "" : " x ") + axis + "=" + I(mesh.Size(axis));
  }
  return s.empty() ? "(all axes 1)" : s;
}

}  // namespace shardsim
