#include "validation/ring_attention_prediction.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

#include "core/cluster_spec.h"
#include "core/error.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "sim/estimate.h"
#include "strategies/build_step.h"
#include "strategies/plan_rules.h"
#include "topologies/cluster.h"

namespace shardsim::validation {
namespace {

// A local cluster of `ranks` cores whose fp32 peak is `flop_per_s` and whose shared-memory link
// is the measured point-to-point path, every efficiency 1. No memory term: the measured kernel
// rate already includes the kernel's memory traffic.
ClusterSpec MeasuredCluster(int64_t ranks, double flop_per_s, const RingMeasuredRates& rates) {
  ClusterSpec c;
  c.name = "this machine (rates measured by shardsim-runtime ring-attention)";
  c.system = "custom";
  c.chip.name = "one CPU core running the attention block kernel";
  c.chip.peak_flop_per_s["fp32"] = flop_per_s;
  c.chip.hbm_bytes = int64_t{1} << 50;
  c.chip.hbm_bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
  c.chip.source = "measured in this run";
  c.topology.kind = TopologyKind::kLocal;
  c.topology.local_devices = ranks;
  c.topology.source = "the job's ranks";
  // Over one rank nothing moves; the link only has to be valid.
  c.links["shm"] = LinkSpec{rates.p2p_bytes_per_s > 0 ? rates.p2p_bytes_per_s : 1.0,
                            rates.p2p_latency_s, 1, 1.0, "measured in this run"};
  c.efficiency = EfficiencySpec{};
  c.efficiency.source = "the rates are measured: efficiency 1";
  ValidateCluster(c, "ring-attention measured cluster");
  return c;
}

// Op descriptions, repeated ops counted: "cp_kv x3: permute of 524288 B over context".
std::vector<std::string> Describe(const std::vector<strategies::Op>& ops) {
  std::vector<std::pair<std::string, int>> counted;
  for (const strategies::Op& op : ops) {
    char text[200];
    if (op.is_comm()) {
      std::snprintf(text, sizeof text, "%s: %s of %.0f B over context", op.name.c_str(),
                    ToString(op.collective).c_str(), op.comm_bytes);
    } else {
      std::snprintf(text, sizeof text, "%s: %s, %.4g FLOP", op.name.c_str(),
                    strategies::ToString(op.kind).c_str(), op.flops);
    }
    if (!counted.empty() && counted.back().first == text) {
      ++counted.back().second;
    } else {
      counted.emplace_back(text, 1);
    }
  }
  std::vector<std::string> out;
  for (const auto& [text, n] : counted)
    out.push_back(n == 1 ? text : std::to_string(n) + " x " + text);
  return out;
}

}  // namespace

double FormulaCrossoverBlockTokens(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                   bool causal, bool backward, double flop_per_s,
                                   double p2p_bytes_per_s) {
  SHARDSIM_CHECK(flop_per_s > 0 && p2p_bytes_per_s > 0, "crossover needs positive rates");
  const double b = static_cast<double>(batch),
               kv = 2.0 * b * static_cast<double>(kv_heads * head_dim) * 4;
  const double flops_per_pair = 4.0 * b * static_cast<double>(heads * head_dim) *
                                (causal ? 0.5 : 1.0) * (backward ? 2.0 : 1.0);
  const double bytes_per_token = kv + 4 + (backward ? kv : 0.0);
  return flop_per_s * bytes_per_token / (p2p_bytes_per_s * flops_per_pair);
}

RingPrediction PredictRingAttention(int64_t batch, int64_t seq_len, int64_t heads, int64_t kv_heads,
                                    int64_t head_dim, bool causal, int64_t ranks,
                                    const RingMeasuredRates& rates) {
  SHARDSIM_CHECK(ranks >= 1 && rates.forward_flop_per_s > 0 && rates.backward_flop_per_s > 0,
                 "ring prediction needs measured rates");
  ModelSpec model;
  model.name = "ring-attention";
  model.num_layers = 1;
  model.hidden_size = heads * head_dim;
  model.num_heads = heads;
  model.num_kv_heads = kv_heads;
  model.head_dim = head_dim;
  model.ffn_hidden_size = 4 * heads * head_dim;
  model.vocab_size = 256;
  model.max_seq_len = seq_len;
  model.source = "shardsim-runtime ring-attention options";
  PlanSpec plan;
  plan.mesh.context = ranks;
  plan.global_batch_size = batch;
  plan.micro_batch_size = batch;
  plan.seq_len = seq_len;
  plan.dtype = "fp32";
  plan.context_kv = "ring";
  plan.overlap.context = true;
  // The program's blockwise kernel skips the masked half of causal attention; full attention is
  // the plan without it, whose attention op counts every key (its separate scores pass is not an
  // attention op and is left out below).
  plan.flash_attention = causal;
  ValidateModel(model, "ring-attention shape");
  strategies::ValidatePlan(plan, model, ranks, "the job's ranks", "ring-attention plan:");
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  const size_t dense_index = static_cast<size_t>(strategies::LayerKind::kDense);

  RingPrediction prediction;
  prediction.source =
      "strategies::BuildStep for a one-layer model of this attention shape (plan: context=" +
      std::to_string(ranks) + ", fp32, micro-batch " + std::to_string(batch) + ", seq " +
      std::to_string(seq_len) + ", context overlap on" +
      (causal ? ", flash attention"
              : ", flash_attention off so the attention op counts every key") +
      "); of its dense layer the attention op and the context-stream ring transfers, costed per "
      "phase by sim::Estimate on a local "
      "cluster of " +
      std::to_string(ranks) +
      " cores with fp32 peak = the measured block-kernel rate of that phase, shm link = the "
      "measured p2p bandwidth and latency, "
      "every efficiency 1, no memory term; the estimator hides a phase's overlapped transfers "
      "under its compute: time = max(compute, "
      "sum of transfers)";
  const std::pair<strategies::Phase, RingPassPrediction*> phases[] = {
      {strategies::Phase::kForward, &prediction.forward},
      {strategies::Phase::kBackwardInput, &prediction.backward}};
  for (const auto& [phase, out] : phases) {
    strategies::StepProgram part = program;
    for (strategies::LayerProgram& layer : part.layer_programs) layer.ops.clear();
    for (strategies::Stage& stage : part.stages) stage.step_ops.clear();
    for (const strategies::Op& op : program.layer_programs[dense_index].ops) {
      const bool attention = !op.is_comm() && op.kind == strategies::ComputeKind::kAttention;
      if (op.phase == phase && (attention || op.stream == strategies::Stream::kContext))
        part.layer_programs[dense_index].ops.push_back(op);
    }
    const double flop_per_s =
        phase == strategies::Phase::kForward ? rates.forward_flop_per_s : rates.backward_flop_per_s;
    const ClusterSpec cluster = MeasuredCluster(ranks, flop_per_s, rates);
    const topologies::Cluster topology(cluster);
    sim::AxisCollectives collectives(topology, plan);
    out->time_s = sim::Estimate(part, cluster, collectives).step_time_s;
    const sim::PhaseParts parts = sim::CostPhaseParts(part.layer_programs[dense_index], phase,
                                                      cluster, plan, collectives);
    out->compute_s = parts.compute_s;
    for (const auto& [op, seconds] : parts.collectives) out->transfers_s += seconds;
    out->ops = Describe(part.layer_programs[dense_index].ops);
  }
  return prediction;
}

}  // namespace shardsim::validation
