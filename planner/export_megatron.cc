// Megatron-core (NVIDIA/Megatron-LM) command-line flags, as megatron/training/arguments.py and the
// dataclasses it generates flags from (megatron/core/model_parallel_config.py,
// megatron/core/transformer/transformer_config.py) name them. The world size is torchrun's, so
// it travels as a launch fact.
#include <sstream>

#include "planner/export_settings.h"
#include "strategies/schedule.h"
#include "strategies/stage_layout.h"

namespace shardsim::planner {
namespace {

constexpr char kWorld[] = "launch.world_size";

std::string I(int64_t v) { return std::to_string(v); }

std::string Number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The model's hybrid_pattern split by '|' at its chunks' boundaries, in pipeline order.
std::string PipelineSegments(const ModelSpec& m, const PlanSpec& p) {
  std::string text;
  const std::vector<ChunkParts> parts = PathParts(m, p);
  for (size_t i = 0; i < parts.size(); ++i) {
    text += (i > 0 ? "|" : "") + m.hybrid_pattern.substr(static_cast<size_t>(parts[i].first_layer), static_cast<size_t>(parts[i].layers));
  }
  return text;
}

// --hybrid-layer-pattern read back: the model's pattern, its segments the chunks in pipeline
// order (the schedule's chunks per stage from their count); the plan's layout where it is not
// the default one.
void ReadPipelineSegments(const SettingReader& r, const ModelSpec& m, PlanSpec& p) {
  const std::string pattern = r.Text("--hybrid-layer-pattern");
  std::vector<std::string> segments(1);
  for (char c : pattern) {
    if (c == '|') {
      segments.emplace_back();
    } else {
      segments.back() += c;
    }
  }
  std::string joined;
  for (const std::string& segment : segments) joined += segment;
  if (joined != m.hybrid_pattern) {
    r.Fail("--hybrid-layer-pattern", "is not the model's hybrid_pattern " + m.hybrid_pattern + " with '|' between its pipeline chunks");
  }
  const int64_t count = static_cast<int64_t>(segments.size());
  if (count == 1) {
    // No separators: Megatron-core's deprecated even split, one chunk per stage.
    if (m.num_layers % p.mesh.pipeline != 0) r.Fail("--hybrid-layer-pattern", "has no '|' and its layers do not split evenly over the pipeline stages");
    p.virtual_stages = 1;
    return;
  }
  if (count % p.mesh.pipeline != 0) r.Fail("--hybrid-layer-pattern", "has " + I(count) + " segments, not a multiple of the pipeline stages");
  p.virtual_stages = count / p.mesh.pipeline;
  p.pipeline_schedule = p.virtual_stages > 1 ? "interleaved-1f1b" : "1f1b";
  std::vector<ChunkParts> parts;
  int64_t first = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const int64_t layers = static_cast<int64_t>(segments[i].size());
    parts.push_back({i == 0, i + 1 == segments.size(), first, layers});
    first += layers;
  }
  p.pipeline_layout = LayoutOrEmpty(m, p, parts);
}

}  // namespace

std::vector<Setting> MegatronSettings(const ModelSpec& m, const PlanSpec& p) {
  std::vector<Setting> s;
  auto add = [&](const std::string& name, const std::string& value = "") {
    s.push_back({name, value});
  };
  add(kWorld, I(p.mesh.Product()));
  add("--tensor-model-parallel-size", I(p.mesh.tensor));
  add("--pipeline-model-parallel-size", I(p.mesh.pipeline));
  const strategies::Schedule& schedule = strategies::ScheduleOf(p);
  const int64_t chunks = schedule.Chunks(p.mesh.pipeline, p.virtual_stages);
  if (p.mesh.pipeline > 1 && IsHybrid(m)) {
    // A hybrid model's chunks are the '|'-separated segments of its layer pattern, in pipeline
    // order (models/hybrid/hybrid_layer_allocation.py select_pipeline_segment: segment vp x pp +
    // pp_rank); the embedding sits with the first, the head with the last.
    add("--hybrid-layer-pattern", "\"" + PipelineSegments(m, p) + "\"");
  } else if (p.mesh.pipeline > 1) {
    // An even split needs no flag (1 chunk) or one number; anything else is a layout string.
    const int64_t even = EvenChunkLayers(m, p);
    if (even > 0 && chunks > 1) {
      add("--num-layers-per-virtual-pipeline-stage", I(even));
    } else if (even == 0) {
      // A plan's own layout as written, else the default one collapsed ("Et*7|(t*8|)*14t*7L").
      const std::string layout = p.pipeline_layout.empty()
                                     ? strategies::LayoutText(strategies::LayOut(m, p))
                                     : p.pipeline_layout;
      add("--pipeline-model-parallel-layout", "\"" + layout + "\"");
    }
  }
  // The model's multi-token-prediction modules, which its layout places (m) and Megatron-core
  // checks against this count.
  // A hybrid model's module names its layers; shared weights run one module at every depth.
  if (m.mtp_layers > 0) {
    add("--mtp-num-layers", I(m.mtp_layers));
    if (IsHybrid(m)) add("--mtp-hybrid-override-pattern", "\"" + m.mtp_pattern + "\"");
    if (m.mtp_shared_weights) add("--mtp-use-repeated-layer");
  }
  if (p.sequence_parallel && p.mesh.tensor > 1) add("--sequence-parallel");
  // Megatron's own reduction dtype (GradReduceDefault) flipped by its one flag where the plan
  // reduces at the other width (framework_facts.cc: --grad-reduce-in-bf16 from fp32,
  // --accumulate-allreduce-grads-in-fp32 from fp16).
  {
    PlanSpec own = p;
    own.grad_reduce_dtype = GradReduceDefault(FactsOf(Framework::kMegatronCore), p);
    if (GradReduceBytes(own) != GradReduceBytes(p)) add(GradReduceBytes(own) == 4 ? "--grad-reduce-in-bf16" : "--accumulate-allreduce-grads-in-fp32");
  }
  if (p.mesh.context > 1) {
    add("--context-parallel-size", I(p.mesh.context));
    add("--cp-comm-type", p.context_kv == "ring" ? "p2p" : "all_gather");
  }
  if (ExpertDegree(p) > 1) {
    // MoE parallel folding: expert parallelism over tensor x context x data ranks as well
    // (parallel_state.py's expert grid, tp-ep-dp-pp), each expert split over its own tensor
    // degree.
    add("--expert-model-parallel-size", I(ExpertDegree(p)));
    if (ExpertTensorDegree(p) != p.mesh.tensor) add("--expert-tensor-parallel-size", I(ExpertTensorDegree(p)));
    if (p.ep_dispatch_dtype == "fp8") {
      // transformer_config.py moe_dispatch_fwd_dtype / moe_combine_bwd_dtype: MXFP8 on the wire,
      // with the 'ncclep' flex dispatcher, grouped GEMMs and Transformer Engine's op fuser only.
      add("--moe-grouped-gemm");
      add("--use-transformer-engine-op-fuser");
      add("--moe-token-dispatcher-type", "flex");
      add("--moe-flex-dispatcher-backend", "ncclep");
      add("--moe-dispatch-fwd-dtype", "mxfp8");
      add("--moe-combine-bwd-dtype", "mxfp8");
    } else if (DeduplicatesDispatch(p)) {
      // transformer_config.py: DeepEP behind the flex dispatcher (once per node and GPU).
      add("--moe-token-dispatcher-type", "flex");
      add("--moe-flex-dispatcher-backend", "deepep");
    } else {
      add("--moe-token-dispatcher-type",
          "alltoall");  // shardsim's dispatch; Megatron's default is allgather
    }
  }
  if (m.moe && p.ep_capacity_factor > 1.0)
    add("--moe-expert-capacity-factor", Number(p.ep_capacity_factor));
  if (p.recompute == Recompute::kSelective) add("--recompute-granularity", "selective");
  if (p.recompute == Recompute::kFull) {
    add("--recompute-granularity", "full");
    add("--recompute-method", "uniform");
    add("--recompute-num-layers", "1");
  }
  if (p.offload_layers > 0) {
    // Transformer Engine's CPU offload of the first layers' activations (megatron/training/arguments.py).
    add("--cpu-offloading");
    add("--cpu-offloading-num-layers", I(p.offload_layers));
  }
  // ZeRO-1 is the distributed optimizer; ZeRO-2/3 and fsdp are Megatron-FSDP, hybrid (HSDP) with
  // `data` as the outer replicas when fsdp shards below ZeRO-3.
  const bool fsdp = p.mesh.fsdp > 1 || p.zero_stage >= 2;
  if (!fsdp && p.zero_stage == 1) add("--use-distributed-optimizer");
  if (fsdp) {
    add("--use-megatron-fsdp");
    add("--data-parallel-sharding-strategy",
        p.mesh.fsdp == 1 && p.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
    if (p.mesh.fsdp > 1 && p.mesh.data > 1 && p.zero_stage < 3) {
      add("--num-distributed-optimizer-instances", I(p.mesh.data));
      add("--outer-dp-sharding-strategy", p.zero_stage == 1 ? "optim" : "no_shard");
    }
    add("--ckpt-format", "fsdp_dtensor");  // arguments.py: Megatron-FSDP requires it
  }
  // --overlap-grad-reduce covers data's and fsdp's reductions alike; --overlap-param-gather is
  // Megatron-FSDP's prefetch of sharded parameters (the distributed optimizer's gather after the
  // step, which shardsim does not overlap, stays off).
  const bool data_overlap = OverlapMatters(p, MeshAxis::kData) && p.overlap.data;
  const bool fsdp_overlap = fsdp && OverlapMatters(p, MeshAxis::kFsdp) && p.overlap.fsdp;
  if (data_overlap || fsdp_overlap) add("--overlap-grad-reduce");
  if (fsdp_overlap && (p.mesh.fsdp > 1 || p.zero_stage == 3)) add("--overlap-param-gather");
  if (p.mesh.tensor > 1 && p.overlap.tensor && p.sequence_parallel) add("--tp-comm-overlap");
  if (p.mesh.pipeline > 1 && chunks > 1 && !p.overlap.pipeline)
    add("--no-overlap-p2p-communication");
  if (ExpertDegree(p) > 1 && p.overlap.expert) add("--moe-shared-expert-overlap");
  if (!p.flash_attention) add("--attention-backend", "unfused");
  add("--micro-batch-size", I(p.micro_batch_size));
  add("--global-batch-size", I(p.global_batch_size));
  add("--seq-length", I(p.seq_len));
  if (p.dtype == "fp16") add("--fp16");
  if (p.dtype == "bf16" || p.dtype == "fp8") add("--bf16");
  if (p.dtype == "fp8" && Fp8RecipeOf(p) == "nvfp4") {
    // NVFP4 (transformer_config.py fp4, fp4_recipe, fp4_param), exclusive of the --fp8 flags.
    add("--fp4-format", "e2m1");
    add("--fp4-recipe", "nvfp4");
    if (p.param_gather_dtype == "fp8") add("--fp4-param-gather");
  } else if (p.dtype == "fp8") {
    add("--fp8-format", "hybrid");
    // core/enums.py Fp8Recipe; row-wise scaling is none of them (a gap): per-tensor is written.
    const std::string recipe = Fp8RecipeOf(p);
    add("--fp8-recipe", recipe == "blockwise" || recipe == "mxfp8" ? recipe : "tensorwise");
    // FP8 weights, gathered in FP8 by the distributed optimizer or Megatron FSDP.
    if (p.param_gather_dtype == "fp8") add("--fp8-param-gather");
  }
  // fp8_utils.py / fp4_utils.py: global layer numbers below the first count or in the last one
  // run outside the FP8 (FP4) context, their weights made outside fp8_model_init. Both counts
  // written: each defaults to 1.
  if (HasSixteenBitLayers(p)) {
    add("--first-last-layers-bf16");
    add("--num-layers-at-start-in-bf16", I(p.sixteen_bit_first_layers));
    add("--num-layers-at-end-in-bf16", I(p.sixteen_bit_last_layers));
  }
  return s;
}

std::string MegatronText(const std::vector<Setting>& settings) {
  std::string text;
  for (const Setting& s : settings) {
    if (s.name.rfind("launch.", 0) == 0) {
      text += "# " + s.value +
              " GPUs: torchrun --nnodes N --nproc-per-node G with N x G = " + s.value + "\n";
      continue;
    }
    text += s.name + (s.value.empty() ? "" : " " + s.value) + " \\\n";
  }
  if (text.size() >= 3 && text.substr(text.size() - 3) == " \\\n")
    text.resize(text.size() - 3), text += "\n";
  return text;
}

PlanSpec MegatronPlan(const SettingReader& r, const ModelSpec& m) {
  const FrameworkFacts& facts = FactsOf(Framework::kMegatronCore);
  PlanSpec p = EmptyPlan(facts);
  const int64_t world = r.Int(kWorld, 0);
  p.mesh.tensor = r.Int("--tensor-model-parallel-size", 1);
  p.mesh.pipeline = r.Int("--pipeline-model-parallel-size", 1);
  p.mesh.context = r.Int("--context-parallel-size", 1);
  const int64_t ep = r.Int("--expert-model-parallel-size", 1), etp = r.Int("--expert-tensor-parallel-size", p.mesh.tensor);
  if (world <= 0 || world % (p.mesh.tensor * p.mesh.pipeline * p.mesh.context) != 0)
    r.Fail(kWorld, "must be a multiple of tensor x pipeline x context");
  const int64_t replicas = world / (p.mesh.tensor * p.mesh.pipeline * p.mesh.context);  // Megatron's dp
  // Megatron-core's expert grid (core/parallel_state.py, order tp-ep-dp-pp over the ranks of
  // tp-cp-dp) lays expert parallelism over the tensor ranks (--expert-tensor-parallel-size 1),
  // then the context ranks, then data: shardsim's expert axis for the data ranks, expert_axes
  // for the others (MoE parallel folding).
  if (etp != p.mesh.tensor && etp != 1) r.Fail("--expert-tensor-parallel-size", "is " + I(etp) + "; shardsim models 1 or the tensor size " + I(p.mesh.tensor));
  int64_t rest = ep;
  if (etp == 1 && p.mesh.tensor > 1) {
    if (ep % p.mesh.tensor != 0) r.Fail("--expert-model-parallel-size", "must be a multiple of the tensor size under --expert-tensor-parallel-size 1");
    p.expert_axes.emplace_back("tensor");
    rest = ep / p.mesh.tensor;
  }
  if (rest > 1 && p.mesh.context > 1) {
    if (rest % p.mesh.context != 0) {
      r.Fail("--expert-model-parallel-size", I(ep) + " lays experts over part of the " + I(p.mesh.context) +
                                                 " context ranks, which shardsim's whole-axis expert_axes cannot name");
    }
    p.expert_axes.emplace_back("context");
    rest /= p.mesh.context;
  }
  if (replicas % rest != 0) r.Fail("--expert-model-parallel-size", I(ep) + " does not fold over tensor, context and the " + I(replicas) + " data-parallel ranks");
  p.mesh.expert = rest;
  if (!p.expert_axes.empty() && rest > 1) p.expert_axes.emplace_back("expert");
  const int64_t model_parallel = p.mesh.tensor * p.mesh.pipeline * p.mesh.context * p.mesh.expert;
  const int64_t dp =
      world / model_parallel;  // shardsim's data x fsdp (Megatron's dp holds expert too)
  const bool fsdp = r.Has("--use-megatron-fsdp");
  const std::string strategy = r.Get("--data-parallel-sharding-strategy", "optim_grads_params");
  const int64_t outer = r.Int("--num-distributed-optimizer-instances", 1);
  if (fsdp && strategy == "optim_grads_params" && outer > 1) {
    p.mesh.data = outer, p.mesh.fsdp = dp / outer;
    p.zero_stage = r.Get("--outer-dp-sharding-strategy", "no_shard") == "optim" ? 1 : 0;
  } else if (fsdp && strategy == "optim_grads_params") {
    p.mesh.fsdp = dp, p.zero_stage = 3;
  } else {
    p.mesh.data = dp;
    p.zero_stage = fsdp                                   ? (strategy == "optim_grads" ? 2
                                                             : strategy == "optim"     ? 1
                                                                                       : 0)
                   : r.Has("--use-distributed-optimizer") ? 1
                                                          : 0;
  }
  if (r.Int("--mtp-num-layers", 0) != m.mtp_layers) {
    r.Fail("--mtp-num-layers", "does not match the model's " + I(m.mtp_layers) +
                                   " multi-token-prediction modules (mtp_layers): set it to that, or give a model JSON whose mtp_layers matches "
                                   "(shardsim describe --model " + m.name + " --write-model F writes one to edit)");
  }
  if (m.mtp_layers > 0 && IsHybrid(m) && r.Text("--mtp-hybrid-override-pattern") != m.mtp_pattern) {
    r.Fail("--mtp-hybrid-override-pattern", "is not the model's mtp_pattern " + m.mtp_pattern);
  }
  if (r.Has("--mtp-use-repeated-layer") != m.mtp_shared_weights) {
    r.Fail("--mtp-use-repeated-layer", std::string(m.mtp_shared_weights ? "is missing, but the model's" : "is set, but the model's") +
                                           " multi-token-prediction modules " + (m.mtp_shared_weights ? "share" : "do not share") +
                                           " one module's weights (mtp_shared_weights): give a model JSON that says what the run trains");
  }
  p.micro_batch_size = r.Int("--micro-batch-size", 1);
  p.global_batch_size = r.Int("--global-batch-size", 0);
  p.seq_len = r.Int("--seq-length", 0);
  p.sequence_parallel = r.Has("--sequence-parallel");
  p.context_kv = r.Get("--cp-comm-type", "p2p") == "p2p" ? "ring" : "all-gather";
  p.ep_capacity_factor = r.Number("--moe-expert-capacity-factor", 1.0);
  const std::string dispatch = r.Get("--moe-dispatch-fwd-dtype", "bf16"), combine_grad = r.Get("--moe-combine-bwd-dtype", "bf16");
  if (dispatch != combine_grad) {
    r.Fail("--moe-combine-bwd-dtype", "is " + combine_grad + " while --moe-dispatch-fwd-dtype is " + dispatch +
                                          ": shardsim moves both all-to-alls toward the experts at one width (ep_dispatch_dtype); set both alike");
  }
  if (dispatch == "mxfp8") p.ep_dispatch_dtype = "fp8";
  // The flex dispatcher's backends: DeepEP sends each token once per node and GPU; NCCL EP is
  // read as sending every copy; HybridEP (GB200's multi-node NVLink) is not modelled.
  if (r.Get("--moe-token-dispatcher-type", "allgather") == "flex" || r.Has("--moe-enable-deepep")) {
    const std::string backend = r.Has("--moe-enable-deepep") ? "deepep" : r.Get("--moe-flex-dispatcher-backend", "deepep");
    if (backend == "hybridep") {
      r.Fail("--moe-flex-dispatcher-backend", "hybridep is not modelled: shardsim models deepep (ep_dispatcher deepep) and ncclep (every routed copy)");
    }
    if (backend != "deepep" && backend != "ncclep") {  // Megatron-core's three (token_dispatcher.py, MoEFlexTokenDispatcher)
      r.Fail("--moe-flex-dispatcher-backend", "unknown backend '" + backend + "': Megatron-core takes deepep, hybridep or ncclep");
    }
    if (backend == "deepep") p.ep_dispatcher = "deepep";
  }
  if (r.Has("--cpu-offloading")) p.offload_layers = r.Int("--cpu-offloading-num-layers", 0);
  const std::string granularity = r.Get("--recompute-granularity");
  p.recompute = granularity == "full"        ? Recompute::kFull
                : granularity == "selective" ? Recompute::kSelective
                                             : Recompute::kNone;
  p.dtype = r.Has("--fp8-format") || r.Has("--fp4-format") ? "fp8"
            : r.Has("--bf16")                              ? "bf16"
            : r.Has("--fp16")                              ? "fp16"
                                                           : "fp32";
  if (r.Has("--fp4-format")) {
    p.fp8_recipe = "nvfp4";  // Fp4Recipe's one recipe (custom quantizers are not modelled)
    if (r.Has("--fp4-param-gather")) p.param_gather_dtype = "fp8";
  } else if (p.dtype == "fp8") {
    const std::string recipe = r.Get("--fp8-recipe", "delayed");  // Megatron-core's default
    p.fp8_recipe = recipe == "blockwise" || recipe == "mxfp8" ? recipe : "tensorwise";  // delayed and tensorwise scale per tensor
    if (r.Has("--fp8-param-gather")) p.param_gather_dtype = "fp8";
  }
  if (p.dtype == "fp8" && r.Has("--first-last-layers-bf16")) {
    // transformer_config.py __post_init__ refuses it under delayed scaling, the default recipe.
    if (!r.Has("--fp4-format") && r.Get("--fp8-recipe", "delayed") == "delayed") {
      r.Fail("--first-last-layers-bf16", "Megatron-core refuses it under delayed scaling (--fp8-recipe's default): set --fp8-recipe tensorwise, blockwise or mxfp8");
    }
    p.sixteen_bit_first_layers = r.Int("--num-layers-at-start-in-bf16", 1);  // transformer_config.py's defaults
    p.sixteen_bit_last_layers = r.Int("--num-layers-at-end-in-bf16", 1);
  }
  p.flash_attention = r.Get("--attention-backend") != "unfused";
  if (p.ep_dispatch_dtype == "fp8" && p.fp8_recipe != "mxfp8") {
    r.Fail("--moe-dispatch-fwd-dtype", "mxfp8 on the wire needs --fp8-recipe mxfp8 in shardsim's model (the experts read the MXFP8 rows)");
  }
  p.grad_reduce_dtype = GradReduceDefault(FactsOf(Framework::kMegatronCore), p);
  if (r.Has("--grad-reduce-in-bf16")) p.grad_reduce_dtype = "bf16";
  if (r.Has("--accumulate-allreduce-grads-in-fp32")) p.grad_reduce_dtype = "fp32";
  // The schedule follows from the chunks: Megatron-core interleaves whenever there are several.
  if (p.mesh.pipeline > 1 && IsHybrid(m)) {
    if (r.Has("--hybrid-layer-pattern")) ReadPipelineSegments(r, m, p);
    p.pipeline_schedule = p.virtual_stages > 1 ? "interleaved-1f1b" : "1f1b";
  } else if (p.mesh.pipeline > 1) {
    if (r.Has("--num-layers-per-virtual-pipeline-stage")) {
      p.virtual_stages =
          m.num_layers / (p.mesh.pipeline * r.Int("--num-layers-per-virtual-pipeline-stage", 1));
    } else if (r.Has("--pipeline-model-parallel-layout")) {
      const std::string layout = r.Text("--pipeline-model-parallel-layout");
      // The chunks per stage are those that make the layout hold together (repeats like
      // "(t*8|)*14" hide the count).
      p.pipeline_layout = layout;
      for (p.virtual_stages = 1; p.virtual_stages <= m.num_layers; ++p.virtual_stages) {
        p.pipeline_schedule = p.virtual_stages > 1 ? "interleaved-1f1b" : "1f1b";
        if (!strategies::CheckLayout(m, p)) break;
      }
      if (p.virtual_stages > m.num_layers)
        r.Fail("--pipeline-model-parallel-layout",
               "does not lay out the model's layers on the stages");
    }
    p.pipeline_schedule = p.virtual_stages > 1 ? "interleaved-1f1b" : "1f1b";
    if (!p.pipeline_layout.empty()) p.pipeline_layout = LayoutOrEmpty(m, p, PathParts(m, p));
  }
  p.overlap.data = r.Has("--overlap-grad-reduce");
  // Megatron-FSDP's per-layer reductions overlap with --overlap-grad-reduce, its gathers with
  // --overlap-param-gather: ZeRO-2 (optim_grads) has only the former.
  p.overlap.fsdp = strategy == "optim_grads" && fsdp ? r.Has("--overlap-grad-reduce")
                                                     : r.Has("--overlap-param-gather");
  p.overlap.tensor = r.Has("--tp-comm-overlap");
  p.overlap.pipeline = !r.Has("--no-overlap-p2p-communication");
  p.overlap.expert = r.Has("--moe-shared-expert-overlap");
  return CanonicalSharding(AsFrameworkRuns(Framework::kMegatronCore, m, p));
}

}  // namespace shardsim::planner
