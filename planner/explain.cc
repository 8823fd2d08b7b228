#include "planner/explain.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/units.h"
#include "sim/estimate.h"

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

// The collective behind an exposed "<stream> <collective>" part: of the estimate's costed
// collectives of that kind, the one exposed longest over the step, against the compute it fails
// to hide under.
std::string TraceCollective(const std::string& key, const RankedPlan& other) {
  const sim::CollectiveCost* worst = nullptr;
  double worst_weight = -1;
  for (const sim::CollectiveCost& c : other.report.collectives) {
    if (sim::KindName(c.stream, c.collective) != key) continue;
    const double weight = c.per_step * c.exposed_s + 1e-12 * c.seconds;
    if (weight > worst_weight) worst = &c, worst_weight = weight;
  }
  if (!worst) return "";
  if (worst->layer == "step") {
    return ToString(worst->collective) + " of " + FormatBinaryBytes(worst->bytes) + " once per step over " + AxesText(other.plan, worst->axes) +
           " takes " + FormatSeconds(worst->seconds) + (worst->overlapped ? ", only partly hidden under the last backward" : ", after the backward");
  }
  if (worst->stream == strategies::Stream::kHost) {
    // Activation offloading's copies: an offloaded layer's kept activations, out in its forward
    // and back in its backward, beside the rest of its phase.
    return "the " + worst->op + " of " + FormatBinaryBytes(worst->bytes) + " per offloaded " + worst->layer + " layer and micro-batch " +
           (worst->phase == strategies::Phase::kForward ? "to" : "from") + " host memory takes " + FormatSeconds(worst->seconds) + " against " +
           FormatSeconds(worst->hide_under_s) + " of the layer's " + strategies::ToString(worst->phase) + " to hide under (offload_layers " +
           std::to_string(other.plan.offload_layers) + ")";
  }
  // A decoder layer's kind (strategies::ToString(LayerKind)), as opposed to the embedding, the head
  // and the multi-token-prediction modules.
  const bool per_layer = worst->layer != "embedding" && worst->layer != "head" && worst->layer != "mtp";
  std::string text = ToString(worst->collective) + " of " + FormatBinaryBytes(worst->bytes) +
                     (per_layer ? " per " + std::string(worst->sixteen_bit ? "16-bit " : "") + worst->layer + " layer and micro-batch"
                                : " for the " + worst->layer + " per micro-batch") +
                     " over " +
                     AxesText(other.plan, worst->axes) + " takes " + FormatSeconds(worst->seconds);
  if (!worst->overlapped) return text + ", not overlapped with compute";
  if (!worst->hides_under.empty()) {
    // A tensor collective's own product; a context K/V gather's attention, its local block only,
    // and dK/dV's reduce-scatter the other blocks.
    const std::string part = worst->stream != strategies::Stream::kContext    ? " of its own product ("
                             : worst->collective == CollectiveOp::kAllGather ? " of the attention's local block ("
                                                                             : " of the attention's other blocks (";
    return text + " against " + FormatSeconds(worst->hide_under_s) + part + worst->hides_under + ") to hide under";
  }
  return text + " against " + FormatSeconds(worst->hide_under_s) + " of " + strategies::ToString(worst->phase) + " compute to hide under";
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

std::string WhyLost(const RankedPlan& best, const RankedPlan& other) {
  const sim::StepReport& b = best.report;
  const sim::StepReport& o = other.report;
  std::vector<std::pair<double, std::string>> deltas = {{o.compute_s - b.compute_s, "compute"}, {o.bubble_s - b.bubble_s, "pipeline bubble"}};
  std::map<std::string, double> exposed = o.exposed_comm_s;
  for (const auto& [key, seconds] : b.exposed_comm_s) exposed[key] -= seconds;
  for (const auto& [key, seconds] : exposed) deltas.push_back({seconds, "exposed " + key});
  std::sort(deltas.begin(), deltas.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  const double behind = o.step_time_s - b.step_time_s;
  if (deltas.front().first <= 0.01 * behind || deltas.front().first <= 0) return "about as fast";

  // Exposed kinds named by the losing plan's axes ("exposed fsdp all-gather").
  auto label = [&other](const std::string& what) {
    const std::string prefix = "exposed ";
    return what.rfind(prefix, 0) == 0 ? prefix + sim::ExposedLabel(other.report, what.substr(prefix.size())) : what;
  };
  const auto& [seconds, what] = deltas.front();
  std::string text = label(what) + " +" + FormatSeconds(seconds) + " per step: ";
  if (what == "compute") {
    text += ComputeReason(best, other);
  } else if (what == "pipeline bubble") {
    text += std::to_string(other.plan.mesh.pipeline) + " stages idle " + FormatPercent(o.bubble_s / o.step_time_s) + " of the step with " +
            std::to_string(DerivePlanShape(other.plan).num_microbatches) + " micro-batches per replica" + RoundsPhrase(other.plan) + " (" +
            other.plan.pipeline_schedule + ")";
  } else {
    text += TraceCollective(what.substr(std::string("exposed ").size()), other);
  }
  std::string also;
  for (size_t i = 1; i < deltas.size() && i < 3; ++i) {
    if (deltas[i].first <= 0.05 * behind) break;
    also += (also.empty() ? "; also " : ", ") + label(deltas[i].second) + " +" + FormatSeconds(deltas[i].first);
  }
  return text + also;
}

}  // namespace shardsim::planner
