#include "planner/ranking.h"

#include <algorithm>
#include <array>
#include <tuple>

namespace shardsim::planner {
namespace {

int AxesUsed(const MeshShape& mesh) {
  int n = 0;
  for (const MeshAxisFacts& axis : kMeshAxes) n += mesh.Size(axis.axis) > 1 ? 1 : 0;
  return n;
}

// Every field that tells two plans apart, for a deterministic order among equals.
auto PlanKey(const PlanSpec& p) {
  std::array<int64_t, kMeshAxisCount> sizes{};  // in the table's order
  for (size_t i = 0; i < kMeshAxisCount; ++i) sizes[i] = p.mesh.Size(kMeshAxes[i].axis);
  return std::make_tuple(sizes, p.zero_stage, p.micro_batch_size, p.pipeline_schedule, p.virtual_stages, static_cast<int>(p.recompute),
                         ReshardAfterForward(p), p.mesh_order);
}

double Memory(const RankedPlan& p) { return p.report.memory.peak.total(); }

bool Dominates(const RankedPlan& a, const RankedPlan& b) {
  const double ta = a.report.tokens_per_s, tb = b.report.tokens_per_s;
  return ta >= tb && Memory(a) <= Memory(b) && (ta > tb || Memory(a) < Memory(b));
}

}  // namespace

bool Better(const RankedPlan& a, const RankedPlan& b) {
  const double ta = a.report.tokens_per_s, tb = b.report.tokens_per_s;
  if (ta != tb) return ta > tb;
  if (Memory(a) != Memory(b)) return Memory(a) < Memory(b);
  if (AxesUsed(a.plan.mesh) != AxesUsed(b.plan.mesh)) return AxesUsed(a.plan.mesh) < AxesUsed(b.plan.mesh);
  if (UsesDefaultMeshOrder(a.plan) != UsesDefaultMeshOrder(b.plan)) return UsesDefaultMeshOrder(a.plan);
  return PlanKey(a.plan) < PlanKey(b.plan);
}

bool Closer(const Miss& a, const Miss& b) {
  if (a.overshoot != b.overshoot) return a.overshoot < b.overshoot;
  return PlanKey(a.plan) < PlanKey(b.plan);
}

bool SameOutcome(const RankedPlan& a, const RankedPlan& b) {
  return a.report.tokens_per_s == b.report.tokens_per_s && Memory(a) == Memory(b);
}

void AddToFrontier(std::vector<RankedPlan>& frontier, const RankedPlan& plan) {
  for (const RankedPlan& other : frontier) {
    // Of plans with the same outcome the frontier keeps the Better one, whatever the order added.
    if (Dominates(other, plan) || (SameOutcome(other, plan) && !Better(plan, other))) return;
  }
  frontier.erase(std::remove_if(frontier.begin(), frontier.end(),
                                [&](const RankedPlan& other) { return Dominates(plan, other) || SameOutcome(plan, other); }),
                 frontier.end());
  frontier.push_back(plan);
}

}  // namespace shardsim::planner
