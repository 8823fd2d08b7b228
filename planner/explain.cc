#include "planner/explain.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/units.h"
#include "sim/estimate.h"
#include "strategies/build_step.h"

namespace shardsim::planner {
namespace {

using strategies::Op;

std::string AxesText(const PlanSpec& p, const std::vector<std::string>& axes) {
  std::string text;
  int64_t devices = 1;
  for (const std::string& a : axes) {
    text += (text.empty() ? "" : ",") + a;
    devices *= p.mesh.Size(a);
  }
  return text + " (" + std::to_string(devices) + " devices)";
}

// The collective behind an exposed "<stream> <collective>" part: the layer op of that kind that
// takes longest, against its phase's compute; else the step-level op.
std::string TraceCollective(const std::string& key, const RankedPlan& other, const ModelSpec& model, const ClusterSpec& cluster,
                            const topologies::Cluster& graph) {
  const strategies::StepProgram program = strategies::BuildStep(model, other.plan);
  sim::AxisCollectives collectives(graph, other.plan, 3);
  auto key_of = [](const Op& op) { return strategies::ToString(op.stream) + " " + ToString(op.collective); };
  // How often each layer program runs on the critical stage per micro-batch.
  const strategies::Stage& stage = program.stages[static_cast<size_t>(other.report.critical_stage)];
  std::map<strategies::LayerKind, int64_t> count;
  for (const strategies::Chunk& chunk : stage.chunks) {
    for (const auto& [kind, n] : chunk.layers) count[kind] += n;
  }
  const Op* worst = nullptr;
  std::string worst_layer;
  double worst_s = 0, compute_s = 0, worst_weight = -1;
  for (const auto& [kind, n] : count) {
    const strategies::LayerProgram& layer = program.Layer(kind);
    for (strategies::Phase phase : {strategies::Phase::kForward, strategies::Phase::kBackwardInput, strategies::Phase::kBackwardWeight}) {
      const sim::PhaseParts parts = sim::CostPhaseParts(layer, phase, cluster, other.plan.dtype, collectives);
      for (const auto& [op, seconds] : parts.collectives) {
        if (key_of(*op) != key) continue;
        // What sticks out of the phase's compute, over all the stage's layers of this kind.
        const double weight = static_cast<double>(n) * (op->overlapped ? std::max(0.0, seconds - parts.compute_s) : seconds) + 1e-12 * seconds;
        if (weight > worst_weight) worst = op, worst_layer = strategies::ToString(layer.kind), worst_s = seconds, compute_s = parts.compute_s, worst_weight = weight;
      }
    }
  }
  if (worst) {
    const bool per_layer = worst_layer == "dense" || worst_layer == "moe";
    std::string text = ToString(worst->collective) + " of " + FormatBinaryBytes(worst->comm_bytes) +
                       (per_layer ? " per " + worst_layer + " layer and micro-batch" : " for the " + worst_layer + " per micro-batch") + " over " +
                       AxesText(other.plan, worst->axes) + " takes " + FormatSeconds(worst_s);
    if (!worst->overlapped) return text + ", not overlapped with compute";
    return text + " against " + FormatSeconds(compute_s) + " of " + strategies::ToString(worst->phase) + " compute to hide under";
  }
  for (const Op& op : stage.step_ops) {
    if (op.is_comm() && key_of(op) == key) {
      return ToString(op.collective) + " of " + FormatBinaryBytes(op.comm_bytes) + " once per step over " + AxesText(other.plan, op.axes) +
             " takes " + FormatSeconds(collectives.Seconds(op.collective, op.axes, op.comm_bytes)) +
             (op.overlapped ? ", only partly hidden under the last backward" : ", after the backward");
    }
  }
  return "";
}

std::string ComputeReason(const RankedPlan& best, const RankedPlan& other) {
  const double extra = other.report.hardware_flops_per_step / best.report.hardware_flops_per_step - 1;
  if (other.plan.recompute != Recompute::kNone) {
    return "recompute " + ToString(other.plan.recompute) + " runs " + FormatPercent(std::max(0.0, extra)) + " more FLOPs";
  }
  if (extra > 0.01) return "it runs " + FormatPercent(extra) + " more FLOPs (replicated work)";
  return "the same FLOPs at lower matmul efficiency (smaller matmuls, partial tiles)";
}

}  // namespace

std::string WhyLost(const RankedPlan& best, const RankedPlan& other, const ModelSpec& model, const ClusterSpec& cluster,
                    const topologies::Cluster& graph) {
  const sim::StepReport& b = best.report;
  const sim::StepReport& o = other.report;
  std::vector<std::pair<double, std::string>> deltas = {{o.compute_s - b.compute_s, "compute"}, {o.bubble_s - b.bubble_s, "pipeline bubble"}};
  std::map<std::string, double> exposed = o.exposed_comm_s;
  for (const auto& [key, seconds] : b.exposed_comm_s) exposed[key] -= seconds;
  for (const auto& [key, seconds] : exposed) deltas.push_back({seconds, "exposed " + key});
  std::sort(deltas.begin(), deltas.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  const double behind = o.step_time_s - b.step_time_s;
  if (deltas.front().first <= 0.01 * behind || deltas.front().first <= 0) return "about as fast";

  const auto& [seconds, what] = deltas.front();
  std::string text = what + " +" + FormatSeconds(seconds) + " per step: ";
  if (what == "compute") {
    text += ComputeReason(best, other);
  } else if (what == "pipeline bubble") {
    const int64_t m = DerivePlanShape(other.plan).num_microbatches;
    text += std::to_string(other.plan.mesh.pipeline) + " stages idle " + FormatPercent(o.bubble_s / o.step_time_s) + " of the step with " +
            std::to_string(m) + " micro-batches per replica (" + other.plan.pipeline_schedule + ")";
  } else {
    text += TraceCollective(what.substr(std::string("exposed ").size()), other, model, cluster, graph);
  }
  std::string also;
  for (size_t i = 1; i < deltas.size() && i < 3; ++i) {
    if (deltas[i].first <= 0.05 * behind) break;
    also += (also.empty() ? "; also " : ", ") + deltas[i].second + " +" + FormatSeconds(deltas[i].first);
  }
  return text + also;
}

}  // namespace shardsim::planner
