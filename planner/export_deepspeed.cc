// DeepSpeed (deepspeedai/DeepSpeed): a config JSON (deepspeed/runtime/config.py and
// constants.py: train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps,
// bf16 / fp16; runtime/zero/config.py: zero_optimization; runtime/tensor_parallel/config.py:
// tensor_parallel.autotp_size; module_inject/auto_ep_config.py: expert_parallel), and beside it
// what the JSON cannot hold: the world size and the PipelineModule's constructor arguments, which
// live in the launcher and the training script (Export::beside).
#include <numeric>

#include <nlohmann/json.hpp>

#include "planner/export_settings.h"

namespace shardsim::planner {
namespace {

using json = nlohmann::ordered_json;  // keys in the settings' order

constexpr char kWorld[] = "launch.world_size";
constexpr char kStages[] = "launch.PipelineModule.num_stages";
constexpr char kPartition[] = "launch.PipelineModule.partition_method";
constexpr char kInterval[] = "launch.PipelineModule.activation_checkpoint_interval";
constexpr char kCheckpoint[] = "launch.activation_checkpointing";
constexpr char kAttention[] = "launch.attention";
constexpr char kSeq[] = "launch.seq_len";  // the data loader's, not the config's

std::string I(int64_t v) { return std::to_string(v); }
std::string B(bool v) { return v ? "true" : "false"; }

}  // namespace

DeepSpeedBatch DeepSpeedBatchOf(const PlanSpec& p) {
  DeepSpeedBatch b{p.micro_batch_size, Microbatches(p), ""};
  if (p.mesh.context == 1) return b;
  const int64_t world = BatchReplicas(p.mesh) * p.mesh.context;
  const std::string ranks = "DeepSpeed's data-parallel world of " + std::to_string(world) + " ranks (the context ranks join it)";
  if (p.global_batch_size % world != 0) {
    b.note = "batch: " + std::to_string(p.global_batch_size) + " sequences do not split over " + ranks +
             ", so DeepSpeed refuses the batch fields (train_batch_size = micro-batch x accumulation x that world)";
    return b;
  }
  const int64_t per_rank = p.global_batch_size / world;
  b.micro = std::gcd(p.micro_batch_size, per_rank);
  b.accumulation = per_rank / b.micro;
  if (b.micro != p.micro_batch_size) {
    b.note = "micro-batch " + std::to_string(b.micro) + " per rank, not the plan's " + std::to_string(p.micro_batch_size) + ": " +
             std::to_string(per_rank) + " sequences a step per rank of " + ranks;
  }
  return b;
}

std::vector<Setting> DeepSpeedSettings(const ModelSpec& m, const PlanSpec& p) {
  std::vector<Setting> s;
  auto add = [&](const std::string& name, const std::string& value) { s.push_back({name, value}); };
  add(kWorld, I(p.mesh.Product()));
  const DeepSpeedBatch batch = DeepSpeedBatchOf(p);
  add("train_batch_size", I(p.global_batch_size));
  add("train_micro_batch_size_per_gpu", I(batch.micro));
  add("gradient_accumulation_steps", I(batch.accumulation));
  add(kSeq, I(p.seq_len));
  // ZeRO over every data-parallel rank; fsdp beside `data` replicas below ZeRO-3 is MiCS: ZeRO-3
  // inside groups of mics_shard_size ranks, replicated across them.
  const bool mics = p.mesh.fsdp > 1 && p.mesh.data > 1 && p.zero_stage < 3;
  add("zero_optimization.stage", I(p.mesh.fsdp > 1 ? 3 : p.zero_stage));
  if (mics) add("zero_optimization.mics_shard_size", I(p.mesh.fsdp));
  if (OverlapMatters(p, MeshAxis::kData) || OverlapMatters(p, MeshAxis::kFsdp)) {
    add("zero_optimization.overlap_comm",
        B(OverlapMatters(p, MeshAxis::kData) ? p.overlap.data : p.overlap.fsdp));
  }
  if (p.dtype == "bf16") add("bf16.enabled", "true");
  if (p.dtype == "fp16") add("fp16.enabled", "true");
  // runtime/engine.py: gradients move in the fp16 / bf16 in use unless communication_data_type says.
  if (!p.grad_reduce_dtype.empty() && p.grad_reduce_dtype != WeightDtype(p)) add("communication_data_type", "\"" + p.grad_reduce_dtype + "\"");
  if (p.mesh.tensor > 1) {
    add("tensor_parallel.autotp_size", I(p.mesh.tensor));
    add("tensor_parallel.tp_overlap_comm", B(p.overlap.tensor));
  }
  if (p.mesh.expert > 1) {
    add("expert_parallel.enabled", "true");
    add("expert_parallel.autoep_size", I(p.mesh.expert));
  }
  if (p.mesh.pipeline > 1) {
    // runtime/pipe/module.py: "type:<regex>" balances the layers whose class matches.
    add(kStages, I(p.mesh.pipeline));
    add(kPartition, "'type:DecoderLayer'");
    add(kInterval, p.recompute == Recompute::kFull ? "1" : "0");
  } else if (p.recompute == Recompute::kFull) {
    add(kCheckpoint, "each decoder layer through deepspeed.checkpointing.checkpoint");
  }
  add(kAttention, p.flash_attention ? "flash" : "unfused");
  (void)m;
  return s;
}

// The config alone, strict JSON as DeepSpeed reads it (json.load): the launch facts go beside it.
std::string DeepSpeedText(const std::vector<Setting>& settings) {
  json config = json::object();
  for (const Setting& s : settings) {
    if (s.name.rfind("launch.", 0) == 0) continue;
    std::string pointer = "/" + s.name;
    for (char& c : pointer) c = c == '.' ? '/' : c;
    const json value = json::parse(s.value, nullptr, /*allow_exceptions=*/false);
    config[json::json_pointer(pointer)] = value.is_discarded() ? json(s.value) : value;
  }
  return config.dump(2) + "\n";
}

PlanSpec DeepSpeedPlan(const SettingReader& r, const ModelSpec& m) {
  PlanSpec p = EmptyPlan(FactsOf(Framework::kDeepSpeed));
  const int64_t world = r.Int(kWorld, 0);
  p.mesh.tensor = r.Int("tensor_parallel.autotp_size", 1);
  p.mesh.expert =
      r.Bool("expert_parallel.enabled", false) ? r.Int("expert_parallel.autoep_size", 1) : 1;
  p.mesh.pipeline = r.Int(kStages, 1);
  const int64_t model_parallel = p.mesh.tensor * p.mesh.pipeline * p.mesh.expert;
  if (world <= 0 || world % model_parallel != 0)
    r.Fail(kWorld, "must be a multiple of autotp_size x stages x autoep_size");
  const int64_t dp = world / model_parallel;  // shardsim's data x fsdp
  const int64_t stage = r.Int("zero_optimization.stage", 0),
                mics = r.Int("zero_optimization.mics_shard_size", -1);
  if (mics > 0) {
    p.mesh.fsdp = mics, p.mesh.data = dp / mics, p.zero_stage = 0;
  } else if (stage == 3) {
    p.mesh.fsdp = dp, p.zero_stage = 3;
  } else {
    p.mesh.data = dp, p.zero_stage = stage;
  }
  p.global_batch_size = r.Int("train_batch_size", 0);
  p.micro_batch_size = r.Int("train_micro_batch_size_per_gpu", 1);
  p.dtype = r.Bool("bf16.enabled", false)   ? "bf16"
            : r.Bool("fp16.enabled", false) ? "fp16"
                                            : "fp32";
  p.recompute = r.Int(kInterval, 0) > 0 || r.Has(kCheckpoint) ? Recompute::kFull : Recompute::kNone;
  const std::string comm = r.Get("communication_data_type", "");
  if (comm.size() > 2) p.grad_reduce_dtype = comm.substr(1, comm.size() - 2);  // quoted
  p.flash_attention = r.Get(kAttention, "flash") == "flash";
  p.overlap.data = p.overlap.fsdp = r.Bool(
      "zero_optimization.overlap_comm", stage == 3);  // zero/config.py: default on at stage 3 only
  p.overlap.tensor = r.Bool("tensor_parallel.tp_overlap_comm", false);
  if (p.mesh.pipeline > 1) p.pipeline_schedule = "1f1b";
  p.seq_len = r.Int(kSeq, 0);
  return CanonicalSharding(AsFrameworkRuns(Framework::kDeepSpeed, m, p));
}

}  // namespace shardsim::planner
