// `shardsim estimate`: the analytic prediction of one training step for a model, cluster and
// plan: step time, tokens/s, MFU and HFU, memory per device, and where the time goes.
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/plan_text.h"
#include "cli/program_json.h"
#include "cli/report_json.h"
#include "cli/step_inputs.h"
#include "cli/step_text.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/mesh.h"
#include "core/plan_json.h"
#include "core/run_cost.h"
#include "core/suggest.h"
#include "core/units.h"
#include "planner/frameworks.h"
#include "strategies/plan_rules.h"
#include "sim/estimate.h"
#include "sim/routed_all_to_all.h"
#include "strategies/build_step.h"
#include "strategies/data_parallel.h"
#include "strategies/elementwise_kernels.h"
#include "strategies/memory_model.h"
#include "strategies/state_bytes.h"
#include "strategies/stage_layout.h"

namespace shardsim::cli {
namespace {
// The most pipeline tasks a step-program dump lists (every stage's forward and backward of every
// micro-batch and chunk): 2^20 make 100 MB of JSON (2.3 s, 0.6 GiB while it is built) or 8 MB of text.
constexpr double kMaxDumpTasks = 1 << 20;

// Refuses a dump past kMaxDumpTasks before it is made (docs/cli.md, Limits).
void CheckDumpSize(const strategies::StepProgram& program) {
  const PlanSpec& p = program.plan;
  const double chunks = static_cast<double>(program.schedule->Chunks(p.mesh.pipeline, p.virtual_stages));
  // Every schedule's task list has a forward, a backward and a weight-gradient task per
  // micro-batch and chunk (the last two fused in time where the schedule does not split them).
  const double tasks = static_cast<double>(program.stages.size()) * static_cast<double>(program.microbatches) * chunks * 3;
  if (tasks <= kMaxDumpTasks) return;
  throw InputError("--dump-program", "the program has " + FormatCount(tasks) + " pipeline tasks (" + FormatCount(static_cast<double>(program.stages.size())) +
                                         " stage(s) x " + std::to_string(program.microbatches) + " micro-batches per replica x " + FormatCount(chunks) +
                                         " chunk(s) x 3: forward, backward, weights)",
                   "at most " + FormatCount(kMaxDumpTasks) + " tasks",
                   "fewer micro-batches: a larger micro_batch_size or a smaller global batch (estimate without --dump-program costs any count)");
}

// The values' column, after the labels ("  memory      "): where continuation lines start.
constexpr std::string_view kValues = "              ";
}  // namespace

int RunEstimate(const EstimateOptions& o, std::ostream& out) {
  const StepInputs in = LoadStepInputs(o, "estimate");
  const ModelSpec& model = in.model;
  const ClusterSpec& cluster = in.cluster;
  const PlanSpec& plan = in.plan;
  CheckTrainTokens(o.train_tokens, static_cast<double>(plan.global_batch_size) * static_cast<double>(plan.seq_len));
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  if (o.dump_program) {
    CheckDumpSize(program);
    if (o.json) {
      out << ProgramJson(program).dump(2) << "\n";
    } else {
      out << strategies::DumpProgram(program);
    }
    return 0;
  }
  const topologies::Cluster graph(cluster);
  sim::AxisCollectives collectives(graph, plan);
  const sim::StepReport r = sim::Estimate(program, cluster, collectives);
  const strategies::MemoryBreakdown& peak = r.memory.peak;

  std::optional<TrainingRun> run;
  if (o.train_tokens > 0) run = CostOfTraining(o.train_tokens, r.tokens_per_s, plan.mesh.Product(), o.price_per_device_hour);
  if (o.json) {
    nlohmann::json report = ReportJson(model, cluster, plan, r);
    if (run) report["training_run"] = TrainingRunJson(*run);
    out << report.dump(2) << "\n";
    return 0;
  }
  const std::optional<sim::NetworkRows> rows = DispatchRows(graph, model, plan);
  const PlanShape shape = DerivePlanShape(plan);
  out << "Estimate (analytic): " << model.name << " on " << cluster.name << ", " << DescribeMesh(plan.mesh) << ScheduleInHeader(plan) << ", ZeRO "
      << plan.zero_stage << ", recompute " << RecomputeText(plan) << (plan.sequence_parallel ? ", sequence parallel" : "")
      << ExpertAxesNote(plan) << "\n";
  if (ExtendsContext(model, plan.seq_len)) {
    out << "  model       seq_len " << plan.seq_len << " is beyond the model's max_seq_len " << model.max_seq_len
        << ": costed as given, as a context extension (check for a typo)\n";
  }
  if (plan.mesh.pipeline > 1) {
    // The stage layout the estimate used, in Megatron-core's syntax, with where it came from.
    out << "  layout      " << strategies::LayoutText(program.layout) << " (decoder layers per chunk in pipeline order: "
        << strategies::DescribePartLayers(program.layout) << "; "
        << (plan.pipeline_layout.empty()             ? "even split"
            : in.as_written.pipeline_layout.empty() ? plan.framework + "'s split, docs/frameworks.md"
                                                    : "the plan's pipeline_layout")
        << ")\n";
  }
  if (strategies::KeepsGatheredParams(plan)) {
    out << "  fsdp        parameters gathered once per step and kept until the last backward (fsdp_reshard_after_forward false"
        << (plan.fsdp_reshard_after_forward ? "" : ", the default with pipeline parallelism") << ")\n";
  }
  out << "  step        " << FormatSecondsSpan(r.step_time_s) << " for " << FormatCount(static_cast<double>(shape.tokens_per_step)) << " tokens ("
      << shape.num_microbatches << (shape.num_microbatches == 1 ? " micro-batch of " : " micro-batches of ") << plan.micro_batch_size << " per replica"
      << RoundsPhrase(plan) << "): " << FormatCount(r.tokens_per_s)
      << " tokens/s\n";
  if (run) out << "  training    " << DescribeTrainingRun(*run) << "\n";
  // Attention runs in 16 bits under FP8 recipes, at the plan's own dtype otherwise (sim::RooflineOf).
  const std::string attention_peak = plan.dtype == "fp8" ? "16-bit" : plan.dtype;
  out << "  utilisation MFU " << FormatPercent(r.mfu) << " (PaLM's count: " << FormatPercent(r.mfu_palm) << "), HFU " << FormatPercent(r.hfu) << " of " << FormatSI(r.peak_flop_per_s, "FLOP/s") << " "
      << MatmulPeakDtype(plan.dtype, Fp8RecipeOf(plan)) << " peak per device (cluster spec); matmuls at "
      << FormatFixed(plan.dtype == "fp8" ? cluster.efficiency.Fp8Matmul(Fp8RecipeOf(plan)) : cluster.efficiency.matmul, 3) << " of peak, attention at "
      << FormatFixed(cluster.efficiency.Attention(AttentionKernelOf(plan)), 3) << " of the " << attention_peak << " peak"
      << (plan.flash_attention ? "" : " (unfused, flash_attention false: batched products at the " + attention_peak + " matmul share)") << ", "
      << (cluster.efficiency.backward != 1 ? "their backward passes at " + FormatFixed(cluster.efficiency.backward, 3) + " of those rates, " : "") << "HBM at "
      << FormatFixed(cluster.efficiency.hbm, 2) << " (" << cluster.efficiency.source << ")\n";
  if (!plan.framework.empty()) {
    const auto own = planner::MfuAsFrameworkCounts(planner::ParseFramework(plan.framework, "plan: framework"), program.model, plan.seq_len, r.mfu_palm);
    if (own) {
      out << kValues << "MFU under " << plan.framework << "'s FLOP count: " << FormatPercent(own->mfu) << " (" << own->count << "; " << own->source << ")\n";
    }
  }
  // Where a line's setting came from, after its field's name: the plan's own, or the framework's
  // default the plan left it to.
  const PlanSpec& written = in.as_written;
  auto from = [&](const std::string& field_as_written) {
    return plan.framework.empty() || !field_as_written.empty() ? std::string() : "; " + plan.framework + "'s default, docs/frameworks.md";
  };
  const std::string master = MasterWeightsOf(plan);
  if (!plan.grad_reduce_dtype.empty()) {
    const std::string held = master == "fp32-copy" ? plan.grad_reduce_dtype : master;  // a master's own dtype otherwise
    out << "  gradients   reduced in " << plan.grad_reduce_dtype << " and held in " << held
        << " (grad_reduce_dtype" << from(written.grad_reduce_dtype) << ")\n";
  }
  if (!plan.master_weights.empty()) {
    const strategies::StateBytes state = strategies::StateBytesOf(plan);
    out << "  states      " << MasterWeightsPhrase(master) << ": " << FormatFixed(state.params + state.grads + state.optimizer, 0)
        << " B per parameter before sharding (master_weights " << master
        << from(written.master_weights) << ")\n";
  }
  if (!plan.attention_kernel.empty()) {
    const std::string& kernel = plan.attention_kernel;
    const std::string whence = cluster.efficiency.attention_kernels.count(kernel) > 0 ? "the cluster's attention_kernels." + kernel
                               : cluster.efficiency.attention <= 0                  ? "the cluster sets no attention efficiency: its matmul one"
                               : kernel == "flash"                                  ? "the cluster's attention efficiency"
                                                                                    : "no figure of its own in the cluster: its attention efficiency";
    out << "  attention   " << kernel << " kernel at " << FormatFixed(cluster.efficiency.Attention(kernel), 3) << " of the " << attention_peak << " peak (" << whence << "; attention_kernel)\n";
  }
  if (KeepsGatheredSequence(plan)) {
    out << "  sequence    parallel regions keep their gathered inputs for the backward, which gathers nothing again (sequence_parallel_inputs keep-gathered"
        << from(written.sequence_parallel_inputs) << ")\n";
  }
  if (plan.mesh.tensor > 1 && plan.overlap.tensor && plan.tensor_overlap_scope == "single-product") {
    const bool rowwise_gathers = !HidesRegionAllGather(plan, /*fp8_products=*/true) && GathersSequence(plan);
    out << "  tensor      overlap hides each collective under its own product but the backward reductions of the attention's and a gated "
           "MLP's input gradients, sums of several products,"
        << (model.moe && ExpertTensorDegree(plan) > 1 ? " and the collectives of the experts split over tensor (grouped products)," : "")
        << (rowwise_gathers ? " and the gathers into row-wise scaled FP8 products (pytorch/pytorch#149990)," : "")
        << " which run blocking (tensor_overlap_scope single-product"
        << from(written.tensor_overlap_scope) << ")\n";
  }
  if (rows) {
    const MoeSpec& moe = *model.moe;
    const std::string routing =
        "top-" + std::to_string(moe.top_k) + " of " + std::to_string(moe.num_experts) + " experts" +
        (plan.expert_routing == "round-robin"
             ? ", round-robin routing: token t to experts " + std::to_string(moe.top_k) + "t ... " + std::to_string(moe.top_k) + "t + " +
                   std::to_string(moe.top_k - 1) + " mod " + std::to_string(moe.num_experts) + " (expert_routing)"
             : (moe.groups > 1 ? ", within " + std::to_string(moe.group_top_k) + " of " + std::to_string(moe.groups) + " groups" : std::string()) + ", balanced routing");
    out << "  experts     each token sent once per destination node and device (ep_dispatcher deepep): ";
    if (rows->nodes > 1) {
      out << FormatFixed(rows->deduplicated, 2) << " rows per token leave its node over the network, against " << FormatFixed(rows->copies, 2)
          << " when each routed expert gets its own copy (expert groups over " << rows->nodes << " nodes of up to " << rows->per_node << " devices; " << routing << ")\n";
    } else {
      out << "the expert group lies within one node, so only its rows within the node are deduplicated (" << routing << ")\n";
    }
  }
  if (plan.dtype == "fp8") {
    const std::string low = Fp8RecipeOf(plan) == "nvfp4" ? "NVFP4" : "FP8";  // the products' format, as the lines name it
    out << "  fp8         " << Fp8RecipeOf(plan) << " scaling (fp8_recipe"
        << from(written.fp8_recipe)
        << "): its GEMMs at " << FormatFixed(cluster.efficiency.Fp8Matmul(Fp8RecipeOf(plan)), 3) << " of the " << MatmulPeakDtype(plan.dtype, Fp8RecipeOf(plan)) << " peak";
    if (Fp8RecipeOf(plan) == "nvfp4" && cluster.efficiency.fp8_matmul_recipes.count("nvfp4") == 0) {
      out << " (the cluster's " << (cluster.efficiency.fp8_matmul > 0 ? "fp8_matmul" : "matmul (16-bit)")
          << " figure: no NVFP4 GEMM efficiency of its own; 4-bit elements with an E4M3 scale per 16, weights in 16 x 16 blocks)";
    }
    out << ", the output head's" << (model.moe ? " and the routers'" : "") << " at " << FormatFixed(cluster.efficiency.matmul, 3)
        << " of the 16-bit peak (none of the profiled frameworks converts " << (model.moe ? "them)" : "it)");
    if (SixteenBitWgrad(plan)) out << ", and the weight gradients' products there too (wgrad_dtype bf16" << from(written.wgrad_dtype) << ")";
    if (HasSixteenBitLayers(plan)) {
      // Which decoder layers: the first and the last ones, numbered from 0.
      auto span = [](int64_t from_layer, int64_t count) {
        return count == 1 ? "layer " + std::to_string(from_layer) : "layers " + std::to_string(from_layer) + "-" + std::to_string(from_layer + count - 1);
      };
      std::vector<std::string> kept;
      if (plan.sixteen_bit_first_layers > 0) kept.push_back(span(0, plan.sixteen_bit_first_layers) + " (sixteen_bit_first_layers)");
      if (plan.sixteen_bit_last_layers > 0) {
        kept.push_back(span(model.num_layers - plan.sixteen_bit_last_layers, plan.sixteen_bit_last_layers) + " (sixteen_bit_last_layers)");
      }
      out << "; decoder " << kept.front() << (kept.size() > 1 ? " and " + kept.back() : "") << " run at 16 bits (their products at the 16-bit peak with no "
          << low << " casts or weights, their gathers" << (model.moe ? ", expert dispatch" : "") << " and kept inputs at 16 bits)";
    }
    if (plan.ep_dispatch_dtype == "fp8") {
      out << "; expert rows sent toward the experts at " << EpDispatchBytes(plan, RoutedWidth(model)) << " B per element (ep_dispatch_dtype)";
    }
    const double saved = SavedInputBytes(plan, model.hidden_size);
    out << "; the " << low << " products' inputs kept for the backward at " << FormatFixed(saved, 2) << " B per element"
        << (saved < ComputeElementBytes(plan) ? " (the attention output and MoE routers' inputs at 16 bits)" : "") << " (saved_input_dtype "
        << (plan.saved_input_dtype.empty() ? "unset: bf16" : plan.saved_input_dtype)
        << from(written.saved_input_dtype) << ")";
    if (plan.param_gather_dtype == "fp8") {
      out << "; weights gathered at " << FormatFixed(ParamGatherBytes(plan), 3) << " B per element, the embedding and head"
          << (HasSixteenBitLayers(plan) ? ", and the 16-bit layers'," : "") << " at 16 bits (param_gather_dtype fp8)";
    }
    const strategies::WeightCastShares casts = strategies::Fp8WeightCastShares(plan, DerivePlanShape(plan).num_microbatches);
    out << "; each micro-batch casts " << FormatPercent(casts.forward) << " of its " << (HasSixteenBitLayers(plan) ? "other layers' " : "") << "weights to " << low << " forward and " << FormatPercent(casts.backward_input)
        << " backward (" << (plan.param_gather_dtype == "fp8" ? "cast on the shard before each gather, param_gather_dtype fp8"
                                                                 : "fp8_weight_casts " + (plan.fp8_weight_casts.empty() ? std::string("unset: per-microbatch") : plan.fp8_weight_casts) +
                                                                       from(written.fp8_weight_casts))
        << ")";
    if (model.moe) {
      const strategies::WeightCastShares experts =
          strategies::Fp8WeightCastShares(plan, DerivePlanShape(plan).num_microbatches, strategies::ParamKind::kExpert);
      if (experts.forward != casts.forward || experts.backward_input != casts.backward_input) {
        out << ", the routed experts " << FormatPercent(experts.forward) << " and " << FormatPercent(experts.backward_input) << " (sharded their own way)";
      }
    }
    if (peak.fp8_weight_cache > 0) {
      const double per_weight = strategies::Fp8WeightCacheBytes(plan, cluster.chip.fp8_any_layout);
      const bool one_copy = per_weight < strategies::Fp8WeightCacheBytes(plan);
      out << "; the cached " << low << " weights" << (one_copy ? "" : " and their transposes") << " hold " << FormatBinaryBytes(peak.fp8_weight_cache) << " of stage "
          << r.memory.peak_stage << "'s buffers (" << FormatFixed(per_weight, 3) << " B per weight, Transformer Engine's weight workspaces"
          << (one_copy ? "; no transpose, as the chip runs FP8 products in any layout: the cluster spec's fp8_any_layout" : "") << ")";
    }
    if (GathersSequence(plan)) {
      out << "; the " << low << " products' sequence-parallel inputs and output gradients gathered at " << FormatFixed(TensorGatherBytes(plan, model.hidden_size), 3)
          << " B per element" << (plan.tensor_gather_dtype == "fp8" ? " (the others at 16 bits)" : "") << " (tensor_gather_dtype "
          << (plan.tensor_gather_dtype.empty() ? "unset: bf16" : plan.tensor_gather_dtype) << from(written.tensor_gather_dtype) << ")";
    }
    out << "\n";
  }
  if (!plan.cross_entropy.empty()) {
    const strategies::LogitBytes loss = strategies::LossBytesPerLogit(plan);
    out << "  loss        " << plan.cross_entropy << " cross-entropy: " << FormatFixed(loss.held, 0) << " B per logit held to the backward"
        << (loss.backward > 0 ? ", " + FormatFixed(loss.backward, 0) + " more in it" : "") << " (cross_entropy"
        << from(written.cross_entropy) << ")\n";
  }
  if (peak.loss_shared > 0) {
    out << "  allocator   the loss's buffers and a layer's backward working set share " << FormatBinaryBytes(peak.loss_shared) << " on stage " << r.memory.peak_stage
        << ", counted once: buffers assigned by liveness (memory_allocator static" << from(written.memory_allocator) << ")\n";
  }
  if (model.mtp_layers > 0) {
    out << "  mtp         " << model.mtp_layers << " multi-token-prediction module" << (model.mtp_layers > 1 ? "s" : "") << " (layers " << MtpBlocks(model)
        << (model.mtp_shared_weights && model.mtp_layers > 1 ? ", one module's weights at every depth" : "")
        << "), each with the output head and its loss, beside the head unless the layout says otherwise (the model's mtp_layers)\n";
  }
  if (EagerElementwise(plan)) {
    const strategies::ElementwisePasses norm = strategies::NormPasses(model, plan, ComputeElementBytes(plan));
    const strategies::ElementwisePasses act = strategies::ActivationPasses(model, plan, ComputeElementBytes(plan));
    auto passes = [](const strategies::ElementwisePasses& own, const strategies::ElementwisePasses& fused) {
      return own.forward == fused.forward && own.backward == fused.backward
                 ? "one kernel each, as fused"
                 : FormatFixed(own.forward, 0) + " and " + FormatFixed(own.backward, 0) + " passes (fused: " + FormatFixed(fused.forward, 0) + " and " + FormatFixed(fused.backward, 0) + ")";
    };
    out << "  elementwise " << plan.elementwise_kernels << " PyTorch kernels (elementwise_kernels" << from(written.elementwise_kernels)
        << "), bytes moved over the tensor each reads, forward and backward: norms " << passes(norm, strategies::FusedNormPasses(model))
        << ", activations " << passes(act, strategies::FusedActivationPasses(model));
    if (model.position == PositionKind::kRope) {
      const strategies::ElementwisePasses rope = strategies::RopePasses(plan, ComputeElementBytes(plan));
      out << ", rotary embeddings " << FormatFixed(rope.forward, 0) << " and " << FormatFixed(rope.backward, 0) << " passes over Q and K (fused: in the neighbouring kernels)";
    }
    out << " (torchtitan's uncompiled llama; strategies/elementwise_kernels.h)\n";
  }
  if (plan.mesh.pipeline > 1 && PipelineBuffersOf(plan) != "per-transfer") {
    const bool keeps = PipelineBuffersOf(plan) == "keep-outputs";
    out << "  pipeline    " << FormatBinaryBytes(peak.pipeline) << " of stage " << r.memory.peak_stage
        << "'s buffers" << (peak.pipeline > 0 ? "" : " beyond its activations (which count each input buffer while its micro-batch is in flight)")
        << ": a receive buffer per micro-batch for its input and its output's gradient, kept across steps, and each micro-batch's "
        << (keeps ? "output kept to the end of the step" : "output kept to its backward") << " (pipeline_buffers " << PipelineBuffersOf(plan)
        << from(written.pipeline_buffers) << ")\n";
  }
  if (plan.offload_layers > 0) {
    double host = 0;
    int64_t layers = 0;  // offloaded per device, the most on any stage
    for (const strategies::MemoryBreakdown& b : r.memory.stages) host = std::max(host, b.host);
    for (const strategies::Stage& stage : program.stages) {
      int64_t on_stage = 0;
      for (const strategies::Chunk& chunk : stage.chunks) on_stage += strategies::OffloadedLayers(plan, chunk);
      layers = std::max(layers, on_stage);
    }
    out << "  offload     the kept activations of " << layers << " decoder layers per device in host memory (each model chunk's first "
        << plan.offload_layers << ", offload_layers): up to " << FormatBinaryBytes(host) << " per device there, copied out and back at "
        << FormatSI(HostCopyBytesPerS(cluster), "B/s") << " one way (the cluster's host link x its efficiency); "
        << (r.host_bytes > 0 ? "of " + FormatBinaryBytes(r.host_bytes) + " host memory per device (cluster spec): " + (r.host_fits ? "fits" : "DOES NOT FIT")
                             : "the cluster spec gives no host memory (topology host_bytes_per_device): not checked")
        << "\n";
  }
  out << "  time        on stage " << r.critical_stage << " (the slowest): compute " << FormatSeconds(r.compute_s);
  if (r.compute_borrowed_s > 0) {
    const int64_t deepep = DispatchKernelUnits(plan);
    std::vector<std::string> who;
    if (cluster.chip.collective_units != CollectiveUnits{}) who.push_back("NCCL's thread blocks (the cluster spec's collective_units)");
    if (deepep > 0 && plan.overlap.expert) who.push_back("DeepEP's " + std::to_string(deepep) + " SMs");
    out << " (" << FormatSeconds(r.compute_borrowed_s) << " of it lost to the SMs of the " << cluster.chip.compute_units
        << " that hidden collectives' kernels hold: " << JoinNames(who, ", ") << ")";
  }
  out << ", bubble " << FormatSeconds(r.bubble_s);
  for (const auto& [key, seconds] : r.exposed_comm_s) {
    if (seconds > 0) out << ", exposed " << sim::ExposedLabel(r, key) << " " << FormatSeconds(seconds);
  }
  out << "\n";
  PrintHeaviestStage(r, r, out);
  out << "  limited by  " << sim::WhatLimits(r, true) << "\n";
  out << "  memory      " << FormatBinaryBytes(peak.total()) << " per device on stage " << r.memory.peak_stage << " of "
      << FormatBinaryBytes(r.hbm_bytes) << " HBM: " << (r.hbm_fits ? "fits" : "DOES NOT FIT") << "\n";
  TextTable table({"params", "grads", "optimizer", "activations", "buffers"});
  table.AddRow({FormatBinaryBytes(peak.params), FormatBinaryBytes(peak.grads), FormatBinaryBytes(peak.optimizer),
                FormatBinaryBytes(peak.activations), FormatBinaryBytes(peak.buffers)});
  table.Print(out, std::string(kValues));
  if (r.memory.stages.size() > 1) {
    // Each stage's total: where the peak is and how far the others are from it, six a line.
    constexpr size_t kPerLine = 6;
    out << "  per stage  ";
    for (size_t s = 0; s < r.memory.stages.size(); ++s) {
      const std::string gap = s == 0 ? " " : s % kPerLine == 0 ? ",\n" + std::string(kValues) : ", ";
      out << gap << s << ": " << FormatBinaryBytes(r.memory.stages[s].total());
    }
    out << "\n";
  }
  return 0;
}

}  // namespace shardsim::cli
