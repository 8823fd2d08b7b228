#include "core/plan_json.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_input.h"
#include "core/suggest.h"
#include "core/text.h"

namespace shardsim {
namespace {

using nlohmann::json;

constexpr int64_t kMaxAxis = int64_t{1} << 24;
constexpr int64_t kMaxBatch = int64_t{1} << 40;
constexpr int64_t kMaxSeq = int64_t{1} << 30;

std::vector<std::string> TopLevelKeys() {
  return {"mesh", "mesh_order", "global_batch_size", "seq_len", "micro_batch_size", "zero_stage", "sequence_parallel",
          "pipeline_schedule", "virtual_stages", "pipeline_rounds", "pipeline_layout", "fsdp_reshard_after_forward", "recompute", "dtype", "grad_reduce_dtype", "cross_entropy", "elementwise_kernels", "fp8_recipe", "ep_dispatch_dtype", "ep_dispatcher", "expert_routing", "saved_input_dtype", "wgrad_dtype", "param_gather_dtype", "fp8_weight_casts", "tensor_gather_dtype", "sequence_parallel_inputs", "pipeline_buffers", "tensor_overlap_scope", "master_weights", "memory_allocator", "expert_axes", "overlap", "ep_capacity_factor",
          "flash_attention", "attention_kernel", "context_kv", "repeat_kv", "offload_layers", "sixteen_bit_first_layers", "sixteen_bit_last_layers", "framework"};
}

}  // namespace

json PlanToJson(const PlanSpec& p) {
  json mesh = json::object(), overlap = json::object();
  for (const MeshAxisFacts& axis : kMeshAxes) {
    mesh[std::string(axis.name)] = p.mesh.Size(axis.axis);
    overlap[std::string(axis.name)] = p.overlap.Overlaps(axis.axis);
  }
  json j = {{"mesh", mesh},
          {"mesh_order", p.mesh_order},
          {"global_batch_size", p.global_batch_size},
          {"seq_len", p.seq_len},
          {"micro_batch_size", p.micro_batch_size},
          {"zero_stage", p.zero_stage},
          {"sequence_parallel", p.sequence_parallel},
          {"pipeline_schedule", p.pipeline_schedule},
          {"virtual_stages", p.virtual_stages},
          {"pipeline_layout", p.pipeline_layout},
          {"fsdp_reshard_after_forward", ReshardAfterForward(p)},
          {"recompute", ToString(p.recompute)},
          {"dtype", p.dtype},
          {"overlap", overlap},
          {"ep_capacity_factor", p.ep_capacity_factor},
          {"flash_attention", p.flash_attention},
          {"context_kv", p.context_kv}};
  // Written only when set, so plans tied to no framework read as before.
  if (!p.framework.empty()) j["framework"] = p.framework;
  if (p.repeat_kv) j["repeat_kv"] = true;
  if (p.pipeline_rounds > 1) j["pipeline_rounds"] = p.pipeline_rounds;
  if (p.offload_layers > 0) j["offload_layers"] = p.offload_layers;
  if (p.sixteen_bit_first_layers > 0) j["sixteen_bit_first_layers"] = p.sixteen_bit_first_layers;
  if (p.sixteen_bit_last_layers > 0) j["sixteen_bit_last_layers"] = p.sixteen_bit_last_layers;
  if (!p.grad_reduce_dtype.empty()) j["grad_reduce_dtype"] = p.grad_reduce_dtype;
  if (!p.cross_entropy.empty()) j["cross_entropy"] = p.cross_entropy;
  if (!p.elementwise_kernels.empty()) j["elementwise_kernels"] = p.elementwise_kernels;
  if (!p.fp8_recipe.empty()) j["fp8_recipe"] = p.fp8_recipe;
  if (!p.ep_dispatch_dtype.empty()) j["ep_dispatch_dtype"] = p.ep_dispatch_dtype;
  if (!p.ep_dispatcher.empty()) j["ep_dispatcher"] = p.ep_dispatcher;
  if (!p.expert_routing.empty()) j["expert_routing"] = p.expert_routing;
  if (!p.saved_input_dtype.empty()) j["saved_input_dtype"] = p.saved_input_dtype;
  if (!p.wgrad_dtype.empty()) j["wgrad_dtype"] = p.wgrad_dtype;
  if (!p.param_gather_dtype.empty()) j["param_gather_dtype"] = p.param_gather_dtype;
  if (!p.fp8_weight_casts.empty()) j["fp8_weight_casts"] = p.fp8_weight_casts;
  if (!p.tensor_gather_dtype.empty()) j["tensor_gather_dtype"] = p.tensor_gather_dtype;
  if (!p.sequence_parallel_inputs.empty()) j["sequence_parallel_inputs"] = p.sequence_parallel_inputs;
  if (!p.pipeline_buffers.empty()) j["pipeline_buffers"] = p.pipeline_buffers;
  if (!p.tensor_overlap_scope.empty()) j["tensor_overlap_scope"] = p.tensor_overlap_scope;
  if (!p.master_weights.empty()) j["master_weights"] = p.master_weights;
  if (!p.memory_allocator.empty()) j["memory_allocator"] = p.memory_allocator;
  if (!p.attention_kernel.empty()) j["attention_kernel"] = p.attention_kernel;
  if (!p.expert_axes.empty()) j["expert_axes"] = p.expert_axes;
  return j;
}

PlanSpec PlanFromJson(const json& value, const std::string& where) {
  JsonReader r(value, where);
  r.SetFieldDocs("docs/cli.md, Plan JSON, describes each field and its values");
  PlanSpec p;
  auto mesh = r.Object("mesh");
  if (!mesh) r.Fail("mesh", "missing required key 'mesh'", "an object of axis sizes, e.g. {\"data\": 8, \"tensor\": 8}");
  for (const std::string& axis : MeshAxisNames()) p.mesh.Size(axis) = mesh->IntOr(axis, 1, 1, kMaxAxis);
  mesh->Finish();
  // The axes multiply into the device count: no cluster has more than 2^24 devices
  // (ValidateCluster), and a larger product would overflow the counts derived from it.
  const int64_t devices = p.mesh.Product();
  if (devices < 0 || devices > kMaxAxis) {
    r.Fail("mesh", "mesh " + DescribeMesh(p.mesh) + " has more than " + std::to_string(kMaxAxis) + " devices",
           "axis sizes whose product is at most " + std::to_string(kMaxAxis), "check the axis sizes for a typo");
  }
  if (r.Has("mesh_order")) p.mesh_order = r.StringList("mesh_order");
  p.global_batch_size = r.Int("global_batch_size", 1, kMaxBatch);
  p.seq_len = r.Int("seq_len", 1, kMaxSeq);
  constexpr int64_t kMaxTokensPerStep = int64_t{1} << 48;  // ~2.8e14 tokens: far past any real step
  if (p.global_batch_size > kMaxTokensPerStep / p.seq_len) {
    r.Fail("global_batch_size", "global_batch_size x seq_len = " + std::to_string(p.global_batch_size) + " x " + std::to_string(p.seq_len) +
                                    " tokens per step is absurdly large",
           "at most 2^48 tokens per step", "check both fields for a typo");
  }
  p.micro_batch_size = r.IntOr("micro_batch_size", 1, 1, kMaxBatch);
  p.zero_stage = r.IntOr("zero_stage", 0, 0, 3);
  p.sequence_parallel = r.BoolOr("sequence_parallel", false);
  // Schedule names and layouts are checked against the model by strategies::CheckPlan.
  p.pipeline_schedule = r.StringOr("pipeline_schedule", "1f1b");
  p.virtual_stages = r.IntOr("virtual_stages", 1, 1, 1024);
  p.pipeline_rounds = r.IntOr("pipeline_rounds", 1, 1, kMaxBatch);
  p.pipeline_layout = r.StringOr("pipeline_layout", "");
  if (r.Has("fsdp_reshard_after_forward")) p.fsdp_reshard_after_forward = r.Bool("fsdp_reshard_after_forward");
  p.recompute = ParseRecompute(r.EnumOr("recompute", "none", PlanFieldChoices("recompute")));
  p.dtype = r.EnumOr("dtype", "bf16", PlanFieldChoices("dtype"));
  if (r.Has("grad_reduce_dtype")) p.grad_reduce_dtype = r.EnumOr("grad_reduce_dtype", "bf16", PlanFieldChoices("grad_reduce_dtype"));
  if (r.Has("cross_entropy")) p.cross_entropy = r.EnumOr("cross_entropy", "fused", PlanFieldChoices("cross_entropy"));
  if (r.Has("elementwise_kernels")) p.elementwise_kernels = r.EnumOr("elementwise_kernels", "fused", PlanFieldChoices("elementwise_kernels"));
  if (r.Has("fp8_recipe")) {
    p.fp8_recipe = r.EnumOr("fp8_recipe", "tensorwise", PlanFieldChoices("fp8_recipe"));
    if (p.dtype != "fp8") r.Fail("fp8_recipe", "fp8_recipe " + p.fp8_recipe + " with dtype " + p.dtype, "dtype fp8", "set dtype to fp8 or drop fp8_recipe");
  }
  if (r.Has("ep_dispatch_dtype")) {
    p.ep_dispatch_dtype = r.EnumOr("ep_dispatch_dtype", "bf16", PlanFieldChoices("ep_dispatch_dtype"));
    if (p.ep_dispatch_dtype == "fp8" && p.dtype != "fp8") {
      r.Fail("ep_dispatch_dtype", "ep_dispatch_dtype fp8 with dtype " + p.dtype, "dtype fp8 (the experts' FP8 products read the quantised rows)",
             "set dtype to fp8 or ep_dispatch_dtype to bf16");
    } else if (p.ep_dispatch_dtype == "fp8" && Fp8RecipeOf(p) == "nvfp4") {
      r.Fail("ep_dispatch_dtype", "ep_dispatch_dtype fp8 with fp8_recipe nvfp4", "fp8_recipe tensorwise, rowwise, blockwise or mxfp8",
             "no framework dispatches NVFP4 rows (Megatron-core's quantised dispatch is MXFP8): set ep_dispatch_dtype to bf16");
    }
  }
  if (r.Has("ep_dispatcher")) p.ep_dispatcher = r.EnumOr("ep_dispatcher", "alltoall", PlanFieldChoices("ep_dispatcher"));
  if (r.Has("expert_routing")) p.expert_routing = r.EnumOr("expert_routing", "uniform", PlanFieldChoices("expert_routing"));
  if (r.Has("saved_input_dtype")) {
    p.saved_input_dtype = r.EnumOr("saved_input_dtype", "bf16", PlanFieldChoices("saved_input_dtype"));
    if (p.saved_input_dtype == "fp8" && p.dtype != "fp8") {
      r.Fail("saved_input_dtype", "saved_input_dtype fp8 with dtype " + p.dtype, "dtype fp8 (only FP8 products quantise their inputs)",
             "set dtype to fp8 or saved_input_dtype to bf16");
    }
  }
  if (r.Has("wgrad_dtype")) {
    p.wgrad_dtype = r.EnumOr("wgrad_dtype", "fp8", PlanFieldChoices("wgrad_dtype"));
    if (p.wgrad_dtype == "bf16" && p.dtype != "fp8") {
      r.Fail("wgrad_dtype", "wgrad_dtype bf16 with dtype " + p.dtype, "dtype fp8 (the weight gradients of other plans run at their dtype)",
             "set dtype to fp8 or drop wgrad_dtype");
    } else if (p.wgrad_dtype == "bf16" && p.saved_input_dtype == "fp8") {
      r.Fail("wgrad_dtype", "wgrad_dtype bf16 with saved_input_dtype fp8", "saved_input_dtype bf16 (16-bit weight-gradient products read 16-bit inputs)",
             "set saved_input_dtype to bf16 or wgrad_dtype to fp8");
    }
  }
  if (r.Has("fp8_weight_casts")) {
    p.fp8_weight_casts = r.EnumOr("fp8_weight_casts", "per-microbatch", PlanFieldChoices("fp8_weight_casts"));
    if (p.dtype != "fp8") {
      r.Fail("fp8_weight_casts", "fp8_weight_casts with dtype " + p.dtype, "dtype fp8 (only FP8 products cast their weights)",
             "set dtype to fp8 or drop fp8_weight_casts");
    }
  }
  if (r.Has("tensor_gather_dtype")) {
    p.tensor_gather_dtype = r.EnumOr("tensor_gather_dtype", "bf16", PlanFieldChoices("tensor_gather_dtype"));
    if (p.tensor_gather_dtype == "fp8" && p.dtype != "fp8") {
      r.Fail("tensor_gather_dtype", "tensor_gather_dtype fp8 with dtype " + p.dtype, "dtype fp8 (only FP8 products read quantised inputs)",
             "set dtype to fp8 or tensor_gather_dtype to bf16");
    } else if (p.tensor_gather_dtype == "fp8" && Fp8RecipeOf(p) == "rowwise") {
      r.Fail("tensor_gather_dtype", "tensor_gather_dtype fp8 with fp8_recipe rowwise", "fp8_recipe tensorwise, blockwise, mxfp8 or nvfp4",
             "no framework gathers row-wise scaled inputs in FP8 (torchao's row-wise recipe communicates in high precision): set tensor_gather_dtype to bf16");
    }
  }
  if (r.Has("param_gather_dtype")) {
    p.param_gather_dtype = r.EnumOr("param_gather_dtype", "bf16", PlanFieldChoices("param_gather_dtype"));
    if (p.param_gather_dtype == "fp8") {
      if (p.dtype != "fp8") {
        r.Fail("param_gather_dtype", "param_gather_dtype fp8 with dtype " + p.dtype, "dtype fp8 (FP8 weights are an FP8 recipe's)",
               "set dtype to fp8 or param_gather_dtype to bf16");
      } else if (Fp8RecipeOf(p) == "rowwise") {
        r.Fail("param_gather_dtype", "param_gather_dtype fp8 with fp8_recipe rowwise", "fp8_recipe tensorwise, blockwise, mxfp8 or nvfp4",
               "no framework gathers row-wise scaled weights in FP8: set param_gather_dtype to bf16");
      }
    }
  }
  if (r.Has("sequence_parallel_inputs")) p.sequence_parallel_inputs = r.EnumOr("sequence_parallel_inputs", "regather", PlanFieldChoices("sequence_parallel_inputs"));
  if (r.Has("expert_axes")) {
    if (const json& raw = r.Raw("expert_axes"); raw.is_string()) {
      r.Fail("expert_axes", "expected a list of axes, got the string \"" + raw.get<std::string>() + "\"", "a list of " + JoinNames(ExpertAxisNames()),
             "write " + json(Split(raw.get<std::string>(), ',')).dump());
    }
    p.expert_axes = r.StringList("expert_axes");
    for (size_t i = 0; i < p.expert_axes.size(); ++i) {
      const std::string& a = p.expert_axes[i];
      const std::vector<std::string>& names = ExpertAxisNames();
      if (std::find(names.begin(), names.end(), a) == names.end()) {
        r.Fail("expert_axes", "'" + a + "' is not an axis experts can be split over", JoinNames(ExpertAxisNames()),
               "the axes of the expert all-to-all's group, e.g. [\"context\"] or [\"tensor\", \"context\"]");
      }
      if (std::find(p.expert_axes.begin(), p.expert_axes.begin() + static_cast<std::ptrdiff_t>(i), a) != p.expert_axes.begin() + static_cast<std::ptrdiff_t>(i)) {
        r.Fail("expert_axes", "'" + a + "' is listed twice", "each axis once", "drop the repeat");
      }
    }
  }
  if (r.Has("pipeline_buffers")) p.pipeline_buffers = r.EnumOr("pipeline_buffers", "per-transfer", PlanFieldChoices("pipeline_buffers"));
  if (r.Has("tensor_overlap_scope")) p.tensor_overlap_scope = r.EnumOr("tensor_overlap_scope", "all", PlanFieldChoices("tensor_overlap_scope"));
  if (r.Has("master_weights")) p.master_weights = r.EnumOr("master_weights", "fp32-copy", PlanFieldChoices("master_weights"));
  if (r.Has("memory_allocator")) p.memory_allocator = r.EnumOr("memory_allocator", "caching", PlanFieldChoices("memory_allocator"));
  if (auto overlap = r.Object("overlap")) {
    for (const MeshAxisFacts& axis : kMeshAxes) {
      bool& on = p.overlap.Overlaps(axis.axis);
      on = overlap->BoolOr(axis.name, on);
    }
    overlap->Finish();
  }
  p.ep_capacity_factor = r.NumberOr("ep_capacity_factor", 1.0, 1.0, 64);  // below 1 drops tokens, which the model does not count
  p.flash_attention = r.BoolOr("flash_attention", true);
  if (r.Has("attention_kernel")) p.attention_kernel = r.EnumOr("attention_kernel", "flash", PlanFieldChoices("attention_kernel"));
  p.context_kv = r.EnumOr("context_kv", "ring", PlanFieldChoices("context_kv"));
  p.repeat_kv = r.BoolOr("repeat_kv", false);
  p.offload_layers = r.IntOr("offload_layers", 0, 0, 1 << 20);
  auto sixteen_bit_layers = [&](const std::string& field, int64_t& layers) {
    layers = r.IntOr(field, 0, 0, 1 << 20);
    if (layers > 0 && p.dtype != "fp8") {
      r.Fail(field, field + " with dtype " + p.dtype, "dtype fp8 (other plans run every layer at their dtype)", "set dtype to fp8 or drop " + field);
    }
  };
  sixteen_bit_layers("sixteen_bit_first_layers", p.sixteen_bit_first_layers);
  sixteen_bit_layers("sixteen_bit_last_layers", p.sixteen_bit_last_layers);
  // "" (or no key): any framework; "megatron" is read as "megatron-core".
  const std::string framework = r.StringOr("framework", "");
  p.framework = CanonicalFrameworkName(framework);
  if (!framework.empty() && p.framework.empty()) {
    const std::string s = DidYouMean(framework, PlanFrameworkNames());
    r.Fail("framework", "unknown framework '" + framework + "'" + (s.empty() ? "" : "; " + s), JoinNames(PlanFrameworkNames()),
           "leave it out to plan for any framework");
  }
  r.Finish();
  return p;
}

std::vector<std::string> PlanOverrideKeys() {
  std::vector<std::string> keys;
  for (const std::string& key : TopLevelKeys()) {
    if (key != "mesh" && key != "overlap") keys.push_back(key);
  }
  for (const std::string& axis : MeshAxisNames()) keys.push_back("mesh." + axis);
  for (const std::string& axis : MeshAxisNames()) keys.push_back("overlap." + axis);
  return keys;
}

std::vector<std::string> PlanFieldChoices(const std::string& key) {
  if (key == "dtype") return {"bf16", "fp16", "fp8", "fp32"};
  if (key == "context_kv") return {"ring", "all-gather"};
  if (key == "zero_stage") return {"0", "1", "2", "3"};
  if (key == "recompute") return RecomputeNames();
  if (key == "grad_reduce_dtype") return GradReduceDtypeNames();
  if (key == "cross_entropy") return CrossEntropyNames();
  if (key == "elementwise_kernels") return ElementwiseKernelsNames();
  if (key == "fp8_recipe") return Fp8RecipeNames();
  if (key == "ep_dispatch_dtype") return EpDispatchDtypeNames();
  if (key == "ep_dispatcher") return EpDispatcherNames();
  if (key == "expert_routing") return ExpertRoutingNames();
  if (key == "saved_input_dtype") return SavedInputDtypeNames();
  if (key == "wgrad_dtype") return WgradDtypeNames();
  if (key == "param_gather_dtype") return ParamGatherDtypeNames();
  if (key == "tensor_gather_dtype") return TensorGatherDtypeNames();
  if (key == "fp8_weight_casts") return Fp8WeightCastsNames();
  if (key == "sequence_parallel_inputs") return SequenceParallelInputsNames();
  if (key == "pipeline_buffers") return PipelineBuffersNames();
  if (key == "tensor_overlap_scope") return TensorOverlapScopeNames();
  if (key == "master_weights") return MasterWeightsNames();
  if (key == "memory_allocator") return MemoryAllocatorNames();
  if (key == "attention_kernel") return AttentionKernelNames();
  if (key == "sequence_parallel" || key == "fsdp_reshard_after_forward" || key == "flash_attention" || key == "repeat_kv" || key.rfind("overlap.", 0) == 0) {
    return {"true", "false"};
  }
  return {};
}

std::string OverrideKeyOf(const std::string& pointer) {
  if (pointer.empty() || pointer.front() != '/') return "";
  std::string key = pointer.substr(1);
  std::replace(key.begin(), key.end(), '/', '.');
  const std::vector<std::string> keys = PlanOverrideKeys();
  return std::find(keys.begin(), keys.end(), key) != keys.end() ? key : "";
}

void ApplyPlanOverride(json& plan, const std::string& assignment) {
  const std::string where = "--set " + assignment;
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(where, "expected key=value", "keys: " + JoinNames(PlanOverrideKeys()), "e.g. --set mesh.tensor=8");
  }
  std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  for (char& c : key) c = c == '/' ? '.' : c;
  const std::vector<std::string> keys = PlanOverrideKeys();
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
    const std::string s = DidYouMean(key, keys);
    throw InputError(where, "unknown plan key '" + key + "'" + (s.empty() ? "" : "; " + s), JoinNames(keys));
  }
  json value;
  if ((key == "mesh_order" || key == "expert_axes") && (text.empty() || text.front() != '[')) {
    value = text.empty() ? json::array() : json(Split(text, ','));  // a,b,c; a JSON list ([...]) below
  } else {
    try {
      value = ParseJsonText(text, where);  // bounded like a file: no deep nesting, no 1e999
    } catch (const InputError&) {
      value = text;  // a bare word such as 1f1b or selective
    }
  }
  if (!plan.is_object()) plan = json::object();
  const size_t dot = key.find('.');
  if (dot == std::string::npos) {
    plan[key] = value;
  } else {
    json& parent = plan[key.substr(0, dot)];
    if (!parent.is_object()) parent = json::object();
    parent[key.substr(dot + 1)] = value;
  }
}

}  // namespace shardsim
