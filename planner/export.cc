#include "planner/export.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "core/suggest.h"
#include "strategies/schedule.h"
#include "strategies/stage_layout.h"

namespace shardsim::planner {
namespace {

int64_t Microbatches(const PlanSpec& p) { return DerivePlanShape(p).num_microbatches; }

// Decoder layers per model chunk when every chunk holds the same number, embedding and loss
// sharing the first and last chunks (the layouts one number can express); 0 otherwise.
int64_t EvenChunkLayers(const ModelSpec& m, const PlanSpec& p) {
  if (!p.pipeline_layout.empty()) return 0;
  const strategies::StageLayout layout = strategies::LayOut(m, p);
  return m.num_layers % layout.positions() == 0 ? m.num_layers / layout.positions() : 0;
}

bool DefaultOrder(const PlanSpec& p) { return UsesDefaultMeshOrder(p); }

std::string OrderNote(const PlanSpec& p, const std::string& framework_order) {
  std::string order;
  for (const std::string& a : p.mesh_order) {
    if (p.mesh.Size(a) > 1) order += (order.empty() ? "" : ",") + a;
  }
  return "mesh_order " + order + " (outermost first): " + framework_order;
}

// Megatron-LM (megatron/training/arguments.py) flag names.
Export Megatron(const ModelSpec& m, const PlanSpec& p) {
  Export e;
  std::ostringstream f;
  f << "--tensor-model-parallel-size " << p.mesh.tensor << " \\\n";
  f << "--pipeline-model-parallel-size " << p.mesh.pipeline << " \\\n";
  const strategies::Schedule& schedule = strategies::ScheduleOf(p);
  const strategies::StageLayout layout = strategies::LayOut(m, p);
  if (p.mesh.pipeline > 1) {
    // Megatron-core takes any layout as --pipeline-model-parallel-layout; an even split of
    // interleaved chunks as --num-layers-per-virtual-pipeline-stage.
    const int64_t even = EvenChunkLayers(m, p);
    if (even > 0 && layout.chunks > 1) {
      f << "--num-layers-per-virtual-pipeline-stage " << even << " \\\n";
    } else if (even == 0) {
      f << "--pipeline-model-parallel-layout \"" << (p.pipeline_layout.empty() ? strategies::LayoutText(layout) : p.pipeline_layout) << "\" \\\n";
    }
  }
  if (p.sequence_parallel && p.mesh.tensor > 1) f << "--sequence-parallel \\\n";
  if (p.mesh.context > 1) {
    f << "--context-parallel-size " << p.mesh.context << " \\\n";
    f << "--cp-comm-type " << (p.context_kv == "all-gather" ? "allgather" : "p2p") << " \\\n";
  }
  if (p.mesh.expert > 1) f << "--expert-model-parallel-size " << p.mesh.expert << " \\\n";
  if (m.moe && p.ep_capacity_factor > 1.0) f << "--moe-expert-capacity-factor " << p.ep_capacity_factor << " \\\n";
  if (p.recompute == Recompute::kSelective) f << "--recompute-granularity selective \\\n";
  if (p.recompute == Recompute::kFull) f << "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \\\n";
  if (p.zero_stage >= 1 || p.mesh.fsdp > 1) f << "--use-distributed-optimizer \\\n";
  if (p.overlap.data) f << "--overlap-grad-reduce \\\n";
  if (p.overlap.data && (p.zero_stage >= 1 || p.mesh.fsdp > 1)) f << "--overlap-param-gather \\\n";
  if (schedule.megatron_runs() && layout.chunks > 1) f << "--overlap-p2p-comm \\\n";
  if (p.overlap.tensor && p.mesh.tensor > 1) f << "--tp-comm-overlap \\\n";
  if (!p.flash_attention) f << "--attention-backend unfused \\\n";
  f << "--micro-batch-size " << p.micro_batch_size << " \\\n";
  f << "--global-batch-size " << p.global_batch_size << " \\\n";
  f << "--seq-length " << p.seq_len << " \\\n";
  if (p.dtype != "fp32") f << "--" << (p.dtype == "fp16" ? "fp16" : "bf16") << (p.dtype == "fp8" ? " --fp8-format hybrid" : "");
  e.text = f.str();
  if (p.mesh.pipeline > 1 && !schedule.megatron_runs()) {
    e.not_expressed.push_back("pipeline schedule " + p.pipeline_schedule + ": Megatron-LM runs 1F1B (interleaved with virtual stages)");
  }
  if (!DefaultOrder(p)) e.not_expressed.push_back(OrderNote(p, "Megatron-LM orders ranks tp-cp-ep-dp-pp (tensor fastest)"));
  if (p.zero_stage == 2) e.not_expressed.push_back("ZeRO-2: the distributed optimizer shards optimizer state and gradients of the buckets it reduces");
  if (p.zero_stage == 3 || p.mesh.fsdp > 1) {
    e.not_expressed.push_back("ZeRO-3 / FSDP parameter sharding: exported as the distributed optimizer (ZeRO-1); Megatron-LM's FSDP options depend on its version and exclude pipeline and expert parallelism");
  }
  return e;
}

// MaxText (MaxText/configs/base.yml) keys.
Export MaxText(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p) {
  Export e;
  const int64_t slices = c.topology.kind == TopologyKind::kTorus ? c.topology.slices : 1;
  const int64_t devices = p.mesh.Product();
  std::ostringstream y;
  // Slices over DCN take the outer data parallelism.
  int64_t dcn_data = 1;
  if (slices > 1 && p.mesh.data % slices == 0) dcn_data = slices;
  y << "dcn_data_parallelism: " << dcn_data << "\n";
  y << "ici_data_parallelism: " << p.mesh.data / dcn_data << "\n";
  y << "ici_fsdp_parallelism: " << p.mesh.fsdp << "\n";
  y << "ici_tensor_parallelism: " << p.mesh.tensor << "\n";
  y << "ici_context_parallelism: " << p.mesh.context << "\n";
  y << "ici_expert_parallelism: " << p.mesh.expert << "\n";
  y << "ici_pipeline_parallelism: " << p.mesh.pipeline << "\n";
  if (p.mesh.pipeline > 1) {
    y << "num_pipeline_microbatches: " << Microbatches(p) << "\n";
    // MaxText: stages x repeats x layers per stage = layers; the repeats follow from the rest.
    if (const int64_t even = EvenChunkLayers(m, p); even > 0) {
      y << "num_layers_per_pipeline_stage: " << even << "\n";
    } else {
      e.not_expressed.push_back("chunks of " + StageLayers(m, p) + " layers: MaxText needs the layers to divide evenly over the stages");
    }
  }
  const char* remat = p.recompute == Recompute::kFull ? "full" : p.recompute == Recompute::kSelective ? "save_qkv_proj" : "minimal";
  y << "remat_policy: " << remat << "\n";
  y << "per_device_batch_size: " << static_cast<double>(p.global_batch_size) / static_cast<double>(devices) << "\n";
  y << "max_target_length: " << p.seq_len << "\n";
  y << "attention: " << (p.flash_attention ? "flash" : "dot_product") << "\n";
  if (m.moe) y << "capacity_factor: " << (p.ep_capacity_factor > 1.0 ? p.ep_capacity_factor : -1.0) << "\n";  // -1: dropless
  y << "dtype: " << (p.dtype == "fp32" ? "float32" : "bfloat16");
  e.text = y.str();
  if (p.recompute == Recompute::kNone) e.not_expressed.push_back("recompute none: MaxText's lightest policy, minimal, still recomputes elementwise ops");
  if (p.recompute == Recompute::kSelective) e.not_expressed.push_back("selective recomputation mapped to save_qkv_proj (closest MaxText policy)");
  if (p.mesh.pipeline > 1 && !strategies::ScheduleOf(p).maxtext_runs()) {
    e.not_expressed.push_back("pipeline schedule " + p.pipeline_schedule + ": MaxText pipelines with a circular (GPipe-style) schedule");
  }
  if (p.zero_stage == 1 || p.zero_stage == 2) e.not_expressed.push_back("ZeRO-1/2: MaxText shards state with fsdp (ZeRO-3) or not at all");
  if (p.zero_stage == 3 && p.mesh.fsdp == 1) e.not_expressed.push_back("ZeRO-3 over data: MaxText shards parameters only over its fsdp axes");
  if (!DefaultOrder(p)) e.not_expressed.push_back(OrderNote(p, "MaxText lays its ici_* axes out in its own mesh_axes order"));
  if (slices > 1 && dcn_data == 1) e.not_expressed.push_back("the data axis does not split over the " + std::to_string(slices) + " slices: place an axis over DCN by hand");
  if (p.dtype == "fp8") e.not_expressed.push_back("fp8: set MaxText's quantization options by hand");
  return e;
}

// torchtitan (torchtitan/config/job_config.py) [parallelism] and related keys.
Export Torchtitan(const ModelSpec& m, const PlanSpec& p) {
  Export e;
  std::ostringstream t;
  t << "[parallelism]\n";
  // torchtitan's expert parallelism borrows its ranks from the sharded data-parallel dimension.
  t << "data_parallel_replicate_degree = " << p.mesh.data << "\n";
  t << "data_parallel_shard_degree = " << p.mesh.fsdp * p.mesh.expert << "\n";
  t << "tensor_parallel_degree = " << p.mesh.tensor << "\n";
  t << "context_parallel_degree = " << p.mesh.context << "\n";
  t << "expert_parallel_degree = " << p.mesh.expert << "\n";
  t << "pipeline_parallel_degree = " << p.mesh.pipeline << "\n";
  if (p.mesh.pipeline > 1) {
    const std::string_view name = strategies::ScheduleOf(p).torchtitan_name();
    t << "pipeline_parallel_schedule = \"" << (name.empty() ? "1F1B" : name) << "\"\n";
    if (name.empty()) e.not_expressed.push_back("pipeline schedule " + p.pipeline_schedule + ": torchtitan has no such schedule; 1F1B exported");
    t << "pipeline_parallel_microbatch_size = " << p.micro_batch_size << "\n";
    if (const int64_t even = EvenChunkLayers(m, p); even > 0) {
      t << "pipeline_parallel_layers_per_stage = " << even << "\n";
    } else {
      e.not_expressed.push_back("chunks of " + StageLayers(m, p) + " layers: torchtitan's layers_per_stage is one number; split the modules per stage by hand");
    }
  }
  t << "enable_async_tensor_parallel = " << (p.overlap.tensor && p.mesh.tensor > 1 ? "true" : "false") << "\n";
  // FSDP2's reshard_after_forward, which torchtitan sets per its own default unless told.
  if (p.mesh.fsdp * p.mesh.expert > 1 || p.zero_stage == 3) t << "fsdp_reshard_after_forward = \"" << (ReshardAfterForward(p) ? "always" : "never") << "\"\n";
  t << "\n[activation_checkpoint]\nmode = \"" << ToString(p.recompute) << "\"\n";
  t << "\n[training]\nglobal_batch_size = " << p.global_batch_size << "\nlocal_batch_size = "
    << p.global_batch_size / BatchReplicas(p.mesh) << "\nseq_len = " << p.seq_len << "\n";
  e.text = t.str();
  if (!DefaultOrder(p)) e.not_expressed.push_back(OrderNote(p, "torchtitan builds its device mesh in a fixed order (pp, dp, cp, tp)"));
  if (p.zero_stage == 1 || p.zero_stage == 2) e.not_expressed.push_back("ZeRO-1/2: torchtitan shards with FSDP2 (ZeRO-3) over data_parallel_shard_degree");
  if (p.zero_stage == 3 && p.mesh.fsdp == 1) e.not_expressed.push_back("ZeRO-3 over data: set data_parallel_shard_degree to the data size instead");
  return e;
}

// JAX: a device mesh with shardsim's axis names, outermost first.
Export Jax(const PlanSpec& p) {
  Export e;
  std::ostringstream py;
  py << "import jax\nfrom jax.experimental import mesh_utils\nfrom jax.sharding import Mesh\n\n";
  py << "axis_names = (";
  for (size_t i = 0; i < p.mesh_order.size(); ++i) py << (i ? ", " : "") << "\"" << p.mesh_order[i] << "\"";
  py << ")\nshape = (";
  for (size_t i = 0; i < p.mesh_order.size(); ++i) py << (i ? ", " : "") << p.mesh.Size(p.mesh_order[i]);
  py << ")\ndevices = mesh_utils.create_device_mesh(shape)\nmesh = Mesh(devices, axis_names)\n";
  e.text = py.str();
  e.not_expressed.push_back("the mesh only: schedules, recomputation and ZeRO are the training code's to apply");
  return e;
}

}  // namespace

std::string StageLayers(const ModelSpec& m, const PlanSpec& p) { return strategies::DescribePartLayers(strategies::LayOut(m, p)); }

std::vector<std::string> ExportTargetNames() { return {"megatron", "maxtext", "torchtitan", "jax"}; }

ExportTarget ParseExportTarget(const std::string& name, const std::string& where) {
  const std::vector<std::string> names = ExportTargetNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<ExportTarget>(i);
  }
  const std::string s = DidYouMean(name, names);
  throw InputError(where, "unknown export '" + name + "'" + (s.empty() ? "" : "; " + s), JoinNames(names));
}

Export ExportPlan(const ModelSpec& model, const ClusterSpec& cluster, const PlanSpec& plan, ExportTarget target) {
  switch (target) {
    case ExportTarget::kMegatron: return Megatron(model, plan);
    case ExportTarget::kMaxText: return MaxText(model, cluster, plan);
    case ExportTarget::kTorchtitan: return Torchtitan(model, plan);
    case ExportTarget::kJax: return Jax(plan);
  }
  return {};
}

}  // namespace shardsim::planner
