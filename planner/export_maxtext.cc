// MaxText (AI-Hypercomputer/maxtext): keys of src/maxtext/configs/base.yml, to pass on the
// command line (key=value) or in a config file. Every mesh key is written, since base.yml's
// defaults auto-size ici_fsdp_parallelism and dcn_data_parallelism.
#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include "planner/export_settings.h"
#include "strategies/schedule.h"

namespace shardsim::planner {
namespace {

// MaxText's remat_policy (layers/decoders.py get_remat_policy) for each recomputation it runs;
// "minimal_with_context" saves every named output, which is none's set (MaxText always remats).
// The first name of a recomputation is the one exported; the others import as it: "none" leaves
// nn.remat without a policy, which saves nothing (full); save_dot_except_mlpwi also names the
// down projection's output, which no backward reads; minimal_flash is minimal_with_context's old
// name.
struct RematName {
  Recompute recompute;
  std::string_view policy;
};
constexpr RematName kRematNames[] = {
    {Recompute::kFull, "full"},
    {Recompute::kMinimal, "minimal"},
    {Recompute::kNone, "minimal_with_context"},
    {Recompute::kSaveQkvProj, "save_qkv_proj"},
    {Recompute::kSaveDotExceptMlp, "save_dot_except_mlp"},
    {Recompute::kSaveDotWithContextExceptMlp, "save_dot_with_context_except_mlp"},
    {Recompute::kSaveOutProj, "save_out_proj"},
    {Recompute::kFull, "none"},
    {Recompute::kSaveDotExceptMlp, "save_dot_except_mlpwi"},
    {Recompute::kNone, "minimal_flash"},
};

// The policies that move what they save to host memory (configs/types.py RematPolicy): every
// layer's kept set offloaded (PlanSpec::offload_layers at the model's layers).
constexpr RematName kOffloadedRematNames[] = {
    {Recompute::kMinimal, "minimal_offloaded"},
    {Recompute::kSaveQkvProj, "qkv_proj_offloaded"},
};

std::string_view RematPolicyOf(Recompute r, bool offloaded) {
  if (offloaded) {
    for (const RematName& n : kOffloadedRematNames) {
      if (n.recompute == r) return n.policy;
    }
  }
  for (const RematName& n : kRematNames) {
    if (n.recompute == r) return n.policy;
  }
  return "minimal_with_context";  // a policy MaxText lacks: the framework's gaps say so
}

// The recomputation of a remat_policy and whether it offloads; false for one shardsim has no set
// for (custom, the quantization variants).
bool RecomputeOfRematPolicy(const std::string& policy, Recompute* recompute, bool* offloaded) {
  for (const RematName& n : kOffloadedRematNames) {
    if (n.policy == policy) {
      *recompute = n.recompute;
      *offloaded = true;
      return true;
    }
  }
  for (const RematName& n : kRematNames) {
    if (n.policy == policy) {
      *recompute = n.recompute;
      *offloaded = false;
      return true;
    }
  }
  return false;
}

std::string I(int64_t v) { return std::to_string(v); }

// Tensor overlap (overlap.tensor): XLA's continuation fusion, which runs collectives
// asynchronously beside independent compute. The flags are benchmarks/xla_flags_library.py's
// CF_FOR_ALL_GATHER, the set MaxText's v5p scripts (MaxText/configs/v5p/*.sh at 76bd53b0f4) export
// in LIBTPU_INIT_ARGS before train.py: an environment variable of the launch, not a config key
// (base.yml's compile_xla_flags reaches only the ahead-of-time compile train.py reads memory
// statistics from, not the jitted step it trains with), so the export writes it as a launch
// comment. Reading one back, tensor overlap is on where the fusion and its compute overlap
// (`needed`) are: each flag's last value, true or True.
struct XlaFlag {
  std::string_view name;
  bool needed;
};
constexpr XlaFlag kOverlapFlags[] = {{"xla_tpu_enable_async_collective_fusion", true},
                                     {"xla_tpu_enable_async_collective_fusion_fuse_all_gather", false},
                                     {"xla_tpu_enable_async_collective_fusion_multiple_steps", false},
                                     {"xla_tpu_overlap_compute_collective_tc", true},
                                     {"xla_enable_async_all_gather", false}};
constexpr char kLibtpuArgs[] = "launch.LIBTPU_INIT_ARGS";

std::string OverlapFlagsText() {
  std::string text;
  for (const XlaFlag& f : kOverlapFlags) text += (text.empty() ? "--" : " --") + std::string(f.name) + "=true";
  return text;
}

bool OverlapsTensor(const std::string& flags) {
  std::map<std::string, std::string, std::less<>> last;
  std::istringstream words(flags);
  for (std::string word; words >> word;) {
    const size_t eq = word.find('=');
    if (word.rfind("--", 0) == 0 && eq != std::string::npos) last[word.substr(2, eq - 2)] = word.substr(eq + 1);
  }
  return std::all_of(std::begin(kOverlapFlags), std::end(kOverlapFlags), [&](const XlaFlag& f) {
    const auto it = last.find(f.name);
    return !f.needed || (it != last.end() && (it->second == "true" || it->second == "True"));
  });
}

std::string Number(double v) {
  std::ostringstream s;
  s << std::setprecision(17) << v;
  return s.str();
}

// MaxText's name of each mesh axis, in MaxText's mesh order (base.yml mesh_axes).
struct AxisKey {
  MeshAxis axis;
  const char* key;
};
constexpr AxisKey kAxisKeys[] = {{MeshAxis::kData, "data"},     {MeshAxis::kPipeline, "pipeline"},
                                 {MeshAxis::kFsdp, "fsdp"},     {MeshAxis::kContext, "context"},
                                 {MeshAxis::kTensor, "tensor"}, {MeshAxis::kExpert, "expert"}};

int64_t Slices(const ClusterSpec& c) {
  return c.topology.kind == TopologyKind::kTorus ? c.topology.slices : 1;
}

// Each axis's share of the slices: the outer axes (MaxText's order) take the slices whole or
// divide them; nullopt when the slices do not split so.
std::optional<std::vector<int64_t>> DcnSplit(const ClusterSpec& c, const PlanSpec& p) {
  int64_t left = Slices(c);
  std::vector<int64_t> dcn;
  for (const AxisKey& a : kAxisKeys) {
    const int64_t size = p.mesh.Size(a.axis);
    int64_t take = 1;
    if (left > 1 && size > 1) {
      if (left % size == 0) {
        take = size;
      } else if (size % left == 0) {
        take = left;
      } else {
        return std::nullopt;
      }
    }
    left /= take;
    dcn.push_back(take);
  }
  if (left != 1) return std::nullopt;
  return dcn;
}

}  // namespace

std::optional<std::string> MaxTextDcnGap(const ClusterSpec& cluster, const PlanSpec& plan) {
  if (DcnSplit(cluster, CanonicalSharding(plan))) return std::nullopt;
  return "the " + I(Slices(cluster)) +
         " slices do not split over the mesh's outer axes: MaxText's dcn_* axes sit outside all "
         "ici_* axes";
}

std::vector<Setting> MaxTextSettings(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p) {
  std::vector<Setting> s;
  auto add = [&](const std::string& name, const std::string& value) { s.push_back({name, value}); };
  const std::vector<int64_t> dcn =
      DcnSplit(c, p).value_or(std::vector<int64_t>(std::size(kAxisKeys), 1));
  for (size_t i = 0; i < std::size(kAxisKeys); ++i)
    add(std::string("dcn_") + kAxisKeys[i].key + "_parallelism", I(dcn[i]));
  for (size_t i = 0; i < std::size(kAxisKeys); ++i) {
    add(std::string("ici_") + kAxisKeys[i].key + "_parallelism",
        I(p.mesh.Size(kAxisKeys[i].axis) / dcn[i]));
  }
  // ZeRO-1 over data; fsdp (and at ZeRO-3 context and expert) is the weights' own sharding.
  if (p.zero_stage == 1) add("shard_optimizer_over_data", "true");
  const int64_t devices = p.mesh.Product(), microbatches = Microbatches(p), rounds = p.mesh.pipeline > 1 ? p.pipeline_rounds : 1;
  if (p.mesh.pipeline > 1) {
    // Layers = stages x layers per stage x repeats; shardsim's gpipe is one repeat, and a plan
    // with more chunks (a gap) is written as MaxText's circular repeats, its closest.
    const int64_t chunks = strategies::ScheduleOf(p).Chunks(p.mesh.pipeline, p.virtual_stages);
    add("num_layers_per_pipeline_stage", I(m.num_layers / (p.mesh.pipeline * chunks)));
    add("num_pipeline_repeats", I(chunks));
    // utils/gradient_accumulation.py: each accumulation step runs the whole pipeline.
    add("num_pipeline_microbatches", I(microbatches / rounds));
    if (rounds > 1) add("gradient_accumulation_steps", I(rounds));
    if (!ReshardAfterForward(p) && (p.mesh.fsdp > 1 || p.zero_stage == 3))
      add("pipeline_fsdp_ag_once", "true");
  } else if (microbatches > 1) {
    add("gradient_accumulation_steps", I(microbatches));
  }
  const int64_t accumulation = p.mesh.pipeline > 1 ? rounds : microbatches;
  add("per_device_batch_size", Number(static_cast<double>(p.global_batch_size) /
                                      static_cast<double>(devices * accumulation)));
  add("max_target_length", I(p.seq_len));
  if (m.mtp_layers > 0) add("mtp_num_layers", I(m.mtp_layers));
  add("remat_policy", std::string(RematPolicyOf(p.recompute, p.offload_layers > 0)));
  add("attention", p.flash_attention ? "flash" : "dot_product");
  if (p.mesh.context > 1)
    add("context_parallel_strategy", p.context_kv == "ring" ? "ring" : "all_gather");
  if (m.moe)
    add("capacity_factor",
        p.ep_capacity_factor > 1.0 ? Number(p.ep_capacity_factor) : "-1");  // -1: dropless
  add("dtype", p.dtype == "fp32" ? "float32" : "bfloat16");
  if (p.dtype == "fp8") add("quantization", "fp8");
  if (p.mesh.tensor > 1 && p.overlap.tensor) add(kLibtpuArgs, OverlapFlagsText());
  return s;
}

std::string MaxTextText(const std::vector<Setting>& settings) {
  std::string text;
  for (const Setting& s : settings) {
    if (s.name == kLibtpuArgs) {
      text += "# launch with: export LIBTPU_INIT_ARGS=\"" + s.value + "\"\n";
      continue;
    }
    text += s.name + ": " + s.value + "\n";
  }
  return text;
}

PlanSpec MaxTextPlan(const SettingReader& r, const ModelSpec& m) {
  PlanSpec p = EmptyPlan(FactsOf(Framework::kMaxText));
  for (const AxisKey& a : kAxisKeys) {
    p.mesh.Size(a.axis) = r.Int(std::string("ici_") + a.key + "_parallelism", 1) *
                          r.Int(std::string("dcn_") + a.key + "_parallelism", 1);
  }
  // The weights shard over fsdp, context and expert: with either of the last two, ZeRO-3.
  p.zero_stage = p.mesh.context > 1 || p.mesh.expert > 1      ? 3
                 : r.Bool("shard_optimizer_over_data", false) ? 1
                                                              : 0;
  const int64_t devices = p.mesh.Product();
  const int64_t accumulation = r.Int("gradient_accumulation_steps", 1);
  p.global_batch_size = std::llround(r.Number("per_device_batch_size", 0) *
                                     static_cast<double>(devices * accumulation));
  const int64_t microbatches =
      p.mesh.pipeline > 1 ? r.Int("num_pipeline_microbatches", p.mesh.pipeline) * accumulation : accumulation;
  if (p.mesh.pipeline > 1) p.pipeline_rounds = accumulation;
  p.micro_batch_size = p.global_batch_size / (BatchReplicas(p.mesh) * microbatches);
  p.seq_len = r.Int("max_target_length", 0);
  if (r.Int("mtp_num_layers", 0) != m.mtp_layers) {
    r.Fail("mtp_num_layers", "does not match the model's " + I(m.mtp_layers) +
                                 " multi-token-prediction modules (mtp_layers): set it to that, or give a model JSON whose mtp_layers matches");
  }
  if (p.mesh.pipeline > 1) {
    p.pipeline_schedule = "gpipe";
    if (r.Int("num_layers_per_pipeline_stage", 0) * p.mesh.pipeline != m.num_layers ||
        r.Int("num_pipeline_repeats", 1) != 1) {
      r.Fail("num_layers_per_pipeline_stage",
             "shardsim models MaxText's pipeline with one repeat of equal stages");
    }
    p.fsdp_reshard_after_forward = !r.Bool("pipeline_fsdp_ag_once", false);
  }
  const std::string remat = r.Get("remat_policy", "full");
  bool offloaded = false;
  if (!RecomputeOfRematPolicy(remat, &p.recompute, &offloaded)) {
    std::string known;
    for (const RematName& n : kRematNames) known += (known.empty() ? "" : ", ") + std::string(n.policy);
    for (const RematName& n : kOffloadedRematNames) known += ", " + std::string(n.policy);
    r.Fail("remat_policy", "'" + remat + "' has no recomputation set in shardsim (custom policies are not modelled); " + "valid: " + known);
  }
  p.offload_layers = offloaded ? m.num_layers : 0;
  p.flash_attention = r.Get("attention", "flash") != "dot_product";
  p.context_kv = r.Get("context_parallel_strategy", "all_gather") == "ring" ? "ring" : "all-gather";
  const double capacity = r.Number("capacity_factor", -1);
  p.ep_capacity_factor = capacity > 1.0 ? capacity : 1.0;
  p.dtype = r.Get("quantization") == "fp8"            ? "fp8"
            : r.Get("dtype", "bfloat16") == "float32" ? "fp32"
                                                      : "bf16";
  p.sequence_parallel = p.mesh.tensor > 1;  // activation_embed -> tensor
  p.overlap.tensor = p.mesh.tensor > 1 && OverlapsTensor(r.Get(kLibtpuArgs));
  return CanonicalSharding(AsFrameworkRuns(Framework::kMaxText, m, p));
}

}  // namespace shardsim::planner
