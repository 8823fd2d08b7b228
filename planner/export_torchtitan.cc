// torchtitan (pytorch/torchtitan): assignments to a Trainer.Config, the way torchtitan's
// config/README.md asks runs to be configured (its --section.option flags are frozen). Names from
// torchtitan/config/configs.py (TrainingConfig, ParallelismConfig, CompileConfig) and
// torchtitan/trainer.py (Trainer.Config.activation_checkpoint).
#include <cstdlib>

#include "planner/export_settings.h"
#include "strategies/schedule.h"

namespace shardsim::planner {
namespace {

constexpr char kWorld[] = "launch.world_size";
constexpr char kConverters[] = "launch.model_converters";
constexpr char kCommBackend[] = "launch.moe_comm_backend";  // model_registry's argument
constexpr char kAttnBackend[] = "launch.attn_backend";      // model_registry's argument
constexpr char kParts[] = "parallelism.module_fqns_per_model_part";
constexpr char kRoundRobin[] = "debug.moe_force_load_balance";

std::string I(int64_t v) { return std::to_string(v); }
std::string Py(bool v) { return v ? "True" : "False"; }
std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// Each chunk's modules as a Python list expression, the decoder layers as a range:
// [["tok_embeddings"] + [f"layers.{i}" for i in range(0, 7)], ..., [...] + ["norm", "lm_head"]].
std::string PartsExpression(const std::vector<ChunkParts>& parts) {
  std::string out = "[";
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string part;
    if (parts[i].embedding) part = "[\"tok_embeddings\"]";
    if (parts[i].layers > 0) {
      part += std::string(part.empty() ? "" : " + ") + "[f\"layers.{i}\" for i in range(" +
              I(parts[i].first_layer) + ", " + I(parts[i].first_layer + parts[i].layers) + ")]";
    }
    if (parts[i].head) part += std::string(part.empty() ? "" : " + ") + "[\"norm\", \"lm_head\"]";
    out += (i ? ", " : "") + part;
  }
  return out + "]";
}

// PartsExpression read back. Counting both brackets and parentheses, the commas at depth 1 are
// the ones between parts (range's and the module lists' commas sit deeper).
std::vector<ChunkParts> ReadParts(const SettingReader& r, const std::string& text) {
  std::vector<std::string> pieces(1);
  int depth = 0;
  for (char c : text) {
    if (c == ']' || c == ')') --depth;
    if (depth == 1 && c == ',') {
      pieces.emplace_back();
    } else if (depth >= 1) {
      pieces.back() += c;
    }
    if (c == '[' || c == '(') ++depth;
  }
  std::vector<ChunkParts> parts;
  for (const std::string& piece : pieces) {
    ChunkParts part;
    part.embedding = piece.find("tok_embeddings") != std::string::npos;
    part.head = piece.find("lm_head") != std::string::npos;
    if (const size_t at = piece.find("range("); at != std::string::npos) {
      const size_t comma = piece.find(',', at);
      if (comma == std::string::npos) r.Fail(kParts, "expected range(first, end) in " + piece);
      part.first_layer = std::atoll(piece.c_str() + at + 6);
      part.layers = std::atoll(piece.c_str() + comma + 1) - part.first_layer;
    }
    parts.push_back(part);
  }
  return parts;
}

// Decoder layers [first, end) as converter fqns, each "layers.N." (the trailing dot keeps
// layers.1 from matching layers.10: nvfp4.py nvfp4_bf16_tail_fqns).
std::string LayerFqns(int64_t first, int64_t end) { return "[f\"layers.{i}.\" for i in range(" + I(first) + ", " + I(end) + ")]"; }

// The 16-bit decoder layers a converter expression names (LayerFqns' ranges): as filter_fqns, the
// 16-bit ones (Float8LinearConverter); as fqns, the converted ones (MXFP8, NVFP4).
void ReadSixteenBitLayers(const SettingReader& r, const std::string& converters, const ModelSpec& m, PlanSpec& p) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t at = converters.find("range("); at != std::string::npos; at = converters.find("range(", at + 1)) {
    const size_t comma = converters.find(',', at);
    if (comma == std::string::npos) r.Fail(kConverters, "expected range(first, end) in the layers' fqns");
    ranges.push_back({std::atoll(converters.c_str() + at + 6), std::atoll(converters.c_str() + comma + 1)});
  }
  if (ranges.empty() && converters.find("layers.") != std::string::npos) {
    r.Fail(kConverters, "name decoder layers as [f\"layers.{i}.\" for i in range(first, end)] (shardsim reads the first and last layers kept at 16 bits)");
  }
  const int64_t layers = m.num_layers;
  const bool converted = converters.find("filter_fqns") == std::string::npos;  // fqns list the converted layers
  for (const auto& [first, end] : ranges) {
    if (converted && ranges.size() == 1) {
      p.sixteen_bit_first_layers = first, p.sixteen_bit_last_layers = layers - end;
    } else if (!converted && first == 0) {
      p.sixteen_bit_first_layers = end;
    } else if (!converted && end == layers) {
      p.sixteen_bit_last_layers = layers - first;
    } else {
      r.Fail(kConverters, "16-bit layers range(" + I(first) + ", " + I(end) + ") are neither the first nor the last of the " + I(layers) + " decoder layers");
    }
  }
}

}  // namespace

std::vector<Setting> TorchtitanSettings(const ModelSpec& m, const PlanSpec& p) {
  std::vector<Setting> s;
  auto add = [&](const std::string& name, const std::string& value) { s.push_back({name, value}); };
  add(kWorld, I(p.mesh.Product()));
  // Expert parallelism borrows its ranks from data_parallel_shard (configs.py).
  add("parallelism.data_parallel_replicate_degree", I(p.mesh.data));
  add("parallelism.data_parallel_shard_degree", I(p.mesh.fsdp * p.mesh.expert));
  add("parallelism.tensor_parallel_degree", I(p.mesh.tensor));
  if (p.mesh.tensor > 1) add("parallelism.enable_sequence_parallel", Py(p.sequence_parallel));
  add("parallelism.context_parallel_degree", I(p.mesh.context));
  add("parallelism.expert_parallel_degree", I(p.mesh.expert));
  add("parallelism.pipeline_parallel_degree", I(p.mesh.pipeline));
  if (p.mesh.pipeline > 1) {
    const std::string_view name = strategies::ScheduleOf(p).framework_names().torchtitan;
    add("parallelism.pipeline_parallel_schedule",
        Quoted(std::string(name.empty() ? "1F1B" : name)));
    // trainer.py: gradient_accumulation_steps = tokens per step / (tokens per micro-batch x
    // num_pp_microbatches x data-parallel degree), each a pp_schedule.step(): the plan's rounds.
    add("parallelism.num_pp_microbatches", I(DerivePlanShape(p).round_microbatches));
    // An even split is one number with the embedding and head counted as no layers; anything
    // else names each chunk's modules.
    if (const int64_t even = EvenChunkLayers(m, p); even > 0) {
      add("parallelism.pipeline_parallel_layers_per_stage", I(even));
      add("parallelism.pipeline_parallel_first_stage_less_layers", "0");
      add("parallelism.pipeline_parallel_last_stage_less_layers", "0");
    } else {
      add(kParts, PartsExpression(PathParts(m, p)));
    }
  }
  if (p.mesh.fsdp * p.mesh.expert * p.mesh.context > 1 || p.zero_stage == 3) {
    add("parallelism.fsdp_reshard_after_forward",
        Quoted(ReshardAfterForward(p) ? "always" : "never"));
  }
  // configs.py CompileConfig: fused elementwise kernels are the compiled model's, and async TP
  // requires compiling it; a fused loss is the compiled one (components/loss.py _maybe_compile).
  const bool async_tp = p.mesh.tensor > 1 && p.overlap.tensor, fused_loss = CrossEntropyOf(p) == "fused";
  const bool compiled_model = async_tp || ElementwiseKernelsOf(p) == "fused";
  if (compiled_model || fused_loss) {
    add("compile.enable", "True");
    add("compile.components", compiled_model && fused_loss ? "[\"model\", \"loss\"]" : compiled_model ? "[\"model\"]" : "[\"loss\"]");
  }
  if (async_tp) add("compile.enable_async_tensor_parallel", "True");
  add("activation_checkpoint", p.recompute == Recompute::kNone   ? "None"
                               : p.recompute == Recompute::kFull ? "FullAC.Config()"
                                                                 : "SelectiveAC.Config()");  // selective-op
  add("training.num_tokens_per_microbatch_per_dp_rank", I(p.micro_batch_size * p.seq_len));
  add("training.num_tokens_per_train_step", I(p.global_batch_size * p.seq_len));
  add("training.max_context_length", I(p.seq_len));
  add("training.mixed_precision_param", Quoted(p.dtype == "fp32" ? "float32" : "bfloat16"));
  // components/quantization: Float8LinearConverter scales rowwise (its recipe_name's default),
  // MXFP8LinearConverter in 32-element blocks, NVFP4LinearConverter in NVFP4 (experimental);
  // per-tensor and blockwise are gaps. Each converts every Linear unless told otherwise
  // (utils.py module_filter_fn, mx.py and nvfp4.py convert: an empty fqns list takes all); the
  // head (lm_head) and the MoE router's gate stay 16-bit as shardsim costs them, as torchtitan's
  // own FP8 configurations leave them (models/deepseek_v3/config_registry.py: filter_fqns
  // ["lm_head", "router.gate"], fqns ["attention", "shared_experts", "feed_forward"]); routed
  // experts take the grouped-experts converter beside it.
  // Decoder layers kept at 16 bits: left out by name (Float8's filter_fqns), or the converted
  // ones named (MXFP8's and NVFP4's fqns, as torchtitan's NVFP4 configurations keep a bf16 tail),
  // in dense models: naming an MoE layer would convert its router too, and the grouped-experts
  // converters take every layer's experts anyway (a gap, framework_gaps.cc).
  if (p.dtype == "fp8") {
    const int64_t first = p.sixteen_bit_first_layers, end = m.num_layers - p.sixteen_bit_last_layers;
    const std::string layers = HasSixteenBitLayers(p) && !m.moe ? "fqns=" + LayerFqns(first, end) : "fqns=[\"attention\", \"shared_experts\", \"feed_forward\"]";
    std::string filter = "[\"lm_head\", \"router.gate\"]";
    if (HasSixteenBitLayers(p) && first > 0) filter += " + " + LayerFqns(0, first);
    if (HasSixteenBitLayers(p) && end < m.num_layers) filter += " + " + LayerFqns(end, m.num_layers);
    std::string converters = p.fp8_recipe == "mxfp8"   ? "MXFP8LinearConverter.Config(" + layers + ")"
                             : p.fp8_recipe == "nvfp4" ? "NVFP4LinearConverter.Config(" + layers + ")"
                                                       : std::string("Float8LinearConverter.Config(") +
                                                             (SixteenBitWgrad(p) ? "recipe_name=\"rowwise_with_gw_hp\", " : "") + "filter_fqns=" + filter + ")";
    if (m.moe && p.fp8_recipe != "nvfp4") {
      converters += p.fp8_recipe == "mxfp8" ? ", MXFP8GroupedExpertsConverter.Config(pad_multiple=128)" : ", Float8GroupedExpertsConverter.Config()";
    }
    add(kConverters, "[" + converters + "]");
  }
  // models/common/config_utils.py make_token_dispatcher_config: "deepep" (DeepEPTokenDispatcher).
  if (DeduplicatesDispatch(p)) add(kCommBackend, Quoted("deepep"));
  // config/configs.py DebugConfig.moe_force_load_balance (FrameworkFacts::round_robin_setting).
  if (m.moe && p.expert_routing == "round-robin") add(kRoundRobin, "True");
  // models/common/config_utils.py get_attention_config: "flex" (FlexAttention); SDPA otherwise.
  if (AttentionKernelOf(p) == "flex") add(kAttnBackend, Quoted("flex"));
  return s;
}

std::string TorchtitanText(const std::vector<Setting>& settings) {
  std::string text = "# in the function that returns your Trainer.Config\n";
  std::string registry;  // model_registry's arguments
  for (const Setting& s : settings) {
    if (s.name == kWorld) {
      text += "# NGPU=" + s.value + " ./run_train.sh\n";
    } else if (s.name == kConverters) {
      registry += ", converters=" + s.value;
    } else if (s.name == kCommBackend) {
      registry += ", moe_comm_backend=" + s.value;
    } else if (s.name == kAttnBackend) {
      registry += ", attn_backend=" + s.value;
    } else {
      text += "config." + s.name + " = " + s.value + "\n";
    }
  }
  if (!registry.empty()) text += "# config.model_spec = model_registry(<flavor>" + registry + ")\n";
  return text;
}

PlanSpec TorchtitanPlan(const SettingReader& r, const ModelSpec& m) {
  PlanSpec p = EmptyPlan(FactsOf(Framework::kTorchtitan));
  p.mesh.data = r.Int("parallelism.data_parallel_replicate_degree", 1);
  p.mesh.expert = r.Int("parallelism.expert_parallel_degree", 1);
  const int64_t shard = r.Int("parallelism.data_parallel_shard_degree", 1);
  if (shard % p.mesh.expert != 0)
    r.Fail("parallelism.expert_parallel_degree",
           "must divide data_parallel_shard_degree (context and tensor left aside)");
  p.mesh.fsdp = shard / p.mesh.expert;
  p.mesh.tensor = r.Int("parallelism.tensor_parallel_degree", 1);
  p.mesh.context = r.Int("parallelism.context_parallel_degree", 1);
  p.mesh.pipeline = r.Int("parallelism.pipeline_parallel_degree", 1);
  // FSDP2 shards over dp_shard x cp: the expert and context ranks shard too, which is ZeRO-3.
  p.zero_stage = p.mesh.context > 1 || p.mesh.expert > 1 ? 3 : 0;
  p.sequence_parallel = p.mesh.tensor > 1 && r.Bool("parallelism.enable_sequence_parallel", true);
  p.context_kv = "all-gather";
  const std::string reshard =
      r.Text("parallelism.fsdp_reshard_after_forward", "\"default\"");
  if (reshard != "default") p.fsdp_reshard_after_forward = reshard == "always";
  p.seq_len = r.Int("training.max_context_length", 0);
  if (p.seq_len <= 0) r.Fail("training.max_context_length", "must be positive");
  p.micro_batch_size =
      r.Int("training.num_tokens_per_microbatch_per_dp_rank", p.seq_len) / p.seq_len;
  p.global_batch_size = r.Int("training.num_tokens_per_train_step", 0) / p.seq_len;
  const std::string ac =
      r.Get("activation_checkpoint", "SelectiveAC.Config()");  // Trainer.Config's default
  p.recompute = ac == "None"              ? Recompute::kNone
                : ac == "FullAC.Config()" ? Recompute::kFull
                                          : Recompute::kSelectiveOp;
  p.dtype = r.Has(kConverters) ? "fp8"
            : r.Text("training.mixed_precision_param", "\"bfloat16\"") == "float32"
                ? "fp32"
                : "bf16";
  if (p.dtype == "fp8") {
    const std::string converters = r.Get(kConverters);
    p.fp8_recipe = converters.find("MXFP8") != std::string::npos ? "mxfp8" : converters.find("NVFP4") != std::string::npos ? "nvfp4" : "rowwise";
    // torchao's rowwise_with_gw_hp recipe: the weight gradients' products in 16 bits.
    if (converters.find("rowwise_with_gw_hp") != std::string::npos) p.wgrad_dtype = "bf16";
    ReadSixteenBitLayers(r, converters, m, p);
  }
  if (r.Has(kCommBackend)) {
    const std::string backend = r.Text(kCommBackend);
    if (backend == "deepep") {
      p.ep_dispatcher = "deepep";
    } else if (backend != "standard") {
      r.Fail(kCommBackend, "'" + backend + "' is not modelled: shardsim models \"standard\" (every routed copy) and \"deepep\"");
    }
  }
  if (r.Bool(kRoundRobin, false)) p.expert_routing = "round-robin";
  if (r.Has(kAttnBackend)) {
    const std::string backend = r.Text(kAttnBackend);
    if (backend == "flex") {
      p.attention_kernel = "flex";
    } else if (backend != "sdpa") {
      r.Fail(kAttnBackend, "'" + backend + "' is not modelled: shardsim models \"sdpa\" (flash) and \"flex\"");
    }
  }
  p.overlap.tensor = r.Bool("compile.enable_async_tensor_parallel", false);
  // CompileConfig.components defaults to ["model", "loss"].
  const std::string components = r.Get("compile.components", "[\"model\", \"loss\"]");
  const bool compiled_loss = r.Bool("compile.enable", false) && components.find("\"loss\"") != std::string::npos;
  p.cross_entropy = compiled_loss ? "fused" : "eager";
  p.elementwise_kernels = r.Bool("compile.enable", false) && components.find("\"model\"") != std::string::npos ? "fused" : "eager";
  if (p.mesh.pipeline > 1) {
    const std::string name = r.Text("parallelism.pipeline_parallel_schedule", "\"1F1B\"");
    const strategies::Schedule* schedule = nullptr;
    for (const strategies::Schedule* s : strategies::AllSchedules()) {
      if (s->framework_names().torchtitan == name) schedule = s;
    }
    if (schedule == nullptr)
      r.Fail("parallelism.pipeline_parallel_schedule",
             "'" + name + "' is no schedule shardsim models");
    p.pipeline_schedule = std::string(schedule->name());
    int64_t positions = 0;
    std::vector<ChunkParts> parts;
    if (r.Has(kParts)) {
      parts = ReadParts(r, r.Get(kParts));
      positions = static_cast<int64_t>(parts.size());
    } else {
      positions = m.num_layers / r.Int("parallelism.pipeline_parallel_layers_per_stage",
                                       m.num_layers / p.mesh.pipeline);
    }
    // Chunks per stage: one for single-stage schedules, else the parts over the ranks.
    p.virtual_stages = schedule->Chunks(p.mesh.pipeline, 2) == 1 ? 1 : positions / p.mesh.pipeline;
    if (!parts.empty()) p.pipeline_layout = LayoutOrEmpty(m, p, parts);
    // Its gradient accumulation steps, each one schedule of num_pp_microbatches (default 1).
    const int64_t per_schedule = r.Int("parallelism.num_pp_microbatches", 1);
    const int64_t microbatches = p.micro_batch_size > 0 ? DerivePlanShape(p).num_microbatches : 0;
    if (per_schedule <= 0 || microbatches % per_schedule != 0)
      r.Fail("parallelism.num_pp_microbatches", "must divide the " + I(microbatches) + " micro-batches per data-parallel rank of a step (num_tokens_per_train_step over the data-parallel degree and num_tokens_per_microbatch_per_dp_rank)");
    p.pipeline_rounds = microbatches / per_schedule;
  }
  return CanonicalSharding(AsFrameworkRuns(Framework::kTorchtitan, m, p));
}

}  // namespace shardsim::planner
