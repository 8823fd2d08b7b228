#include "planner/balanced_layout.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "strategies/build_step.h"
#include "strategies/schedule.h"
#include "strategies/stage_layout.h"

namespace shardsim::planner {


std::vector<int64_t> BalancedPartLayers(const std::vector<double>& costs, int64_t positions, double first, double last) {
  const size_t n = costs.size(), parts = static_cast<size_t>(positions);
  SHARDSIM_CHECK(positions >= 1 && parts <= n, "BalancedPartLayers needs 1 <= positions <= layers");
  std::vector<double> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  // Part p holding layers [j, i): its cost, the ends' own work included.
  auto part = [&](size_t p, size_t j, size_t i) { return prefix[i] - prefix[j] + (p == 0 ? first : 0) + (p + 1 == parts ? last : 0); };
  const double inf = std::numeric_limits<double>::infinity();
  // First the costliest part as cheap as it can be (worst[p][i]: the first i layers in p + 1
  // parts) ...
  std::vector<std::vector<double>> worst(parts, std::vector<double>(n + 1, inf));
  for (size_t i = 1; i <= n; ++i) worst[0][i] = part(0, 0, i);
  for (size_t p = 1; p < parts; ++p) {
    for (size_t i = p + 1; i <= n; ++i) {
      for (size_t j = p; j < i; ++j) worst[p][i] = std::min(worst[p][i], std::max(worst[p - 1][j], part(p, j, i)));
    }
  }
  const double bound = worst[parts - 1][n] * (1 + 1e-9);
  // ... then, of the cuts that keep every part within it, the evenest (least sum of squares), so
  // that the parts the costliest one does not constrain are not left lopsided.
  std::vector<std::vector<double>> squares(parts, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> cut(parts, std::vector<size_t>(n + 1, 0));
  for (size_t i = 1; i <= n; ++i) {
    if (part(0, 0, i) <= bound) squares[0][i] = part(0, 0, i) * part(0, 0, i);
  }
  for (size_t p = 1; p < parts; ++p) {
    for (size_t i = p + 1; i <= n; ++i) {
      for (size_t j = p; j < i; ++j) {
        const double c = part(p, j, i);
        if (c > bound || squares[p - 1][j] == inf) continue;
        // Costs are sums of floating-point seconds: totals within a relative 1e-9 are ties,
        // which the earliest cut (the later parts taking the extra layers) wins.
        const double total = squares[p - 1][j] + c * c;
        if (total < squares[p][i] * (1 - 1e-9)) squares[p][i] = total, cut[p][i] = j;
      }
    }
  }
  std::vector<int64_t> layers(parts);
  size_t end = n;
  for (size_t p = parts; p-- > 0;) {
    const size_t start = p == 0 ? 0 : cut[p][end];
    layers[p] = static_cast<int64_t>(end - start);
    end = start;
  }
  return layers;
}

namespace {
// Whether `p` has stages to balance: pipelined, its split not its own, one direction.
bool Balanceable(const PlanSpec& p) {
  return p.pipeline_layout.empty() && p.mesh.pipeline > 1 && strategies::ScheduleOf(p).Directions(p.mesh.pipeline) == 1;
}
}  // namespace

std::string BalancedLayout(const ModelSpec& m, const PlanSpec& p, const ClusterSpec& c, sim::AxisCollectives& collectives) {
  return Balanceable(p) && m.num_layers <= kMaxBalancedLayers ? BalancedLayout(m, strategies::BuildStep(m, p), c, collectives) : "";
}

std::string BalancedLayout(const ModelSpec& m, const strategies::StepProgram& program, const ClusterSpec& c, sim::AxisCollectives& collectives) {
  const PlanSpec& p = program.plan;
  if (!Balanceable(p)) return "";
  const int64_t positions = program.layout.positions();
  if (positions > m.num_layers || m.num_layers > kMaxBalancedLayers) return "";
  const sim::Roofline roofline = sim::RooflineOf(c, p.dtype, static_cast<double>(program.tokens_per_microbatch), Fp8RecipeOf(p), AttentionKernelOf(p));
  const sim::ProgramCosts costs = sim::CostProgram(program, roofline, collectives);
  // A micro-batch's work in one layer of `kind` (its 16-bit twin's, for a layer the plan keeps
  // at 16 bits): its forward, input and weight gradients (with its recomputation, where the plan
  // recomputes), exposed collectives included.
  auto work = [&](strategies::LayerKind kind, bool sixteen_bit = false) {
    const size_t k = strategies::LayerRun{.kind = kind, .sixteen_bit = sixteen_bit}.program();
    if (k >= costs.layers.size()) return 0.0;
    double seconds = 0;
    for (const sim::PhaseCost& phase : costs.layers[k]) seconds += phase.total_s;
    return seconds;
  };
  std::vector<double> layer_costs;
  for (int64_t l = 0; l < m.num_layers; ++l) layer_costs.push_back(work(strategies::LayerKindOf(m, l), SixteenBitLayer(p, m.num_layers, l)));
  const double first = work(strategies::LayerKind::kEmbedding);
  const double last = work(strategies::LayerKind::kHead) + static_cast<double>(m.mtp_layers) * work(strategies::LayerKind::kMtp);
  const std::vector<int64_t> balanced = BalancedPartLayers(layer_costs, positions, first, last);
  std::vector<int64_t> current;
  for (const auto& [stage, chunk] : program.layout.paths.front()) current.push_back(program.layout.Chunk(stage, chunk).layers);
  if (balanced == current) return "";
  PlanSpec laid = p;
  laid.pipeline_layout = strategies::PartLayersText(balanced, m.mtp_layers);
  if (strategies::CheckLayout(m, laid)) return "";
  return laid.pipeline_layout;
}

}  // namespace shardsim::planner
