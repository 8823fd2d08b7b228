// From (model, plan) to the StepProgram every engine reads.
#pragma once

#include <array>
#include <tuple>
#include <vector>

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/schedule.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// What BuildStep derives from a plan apart from its pipeline schedule and virtual stages, for
// the next plans that differ from it only there: the layer programs (lent to the
// program BuildStep returns; Recycle takes them back) and the data-parallel step ops per stage
// parameter count. One model per cache.
class LayerCache {
 public:
  // Takes back the layer programs of a program built with this cache, once it is done with.
  void Recycle(StepProgram&& program);

 private:
  friend StepProgram BuildStep(const ModelSpec&, const PlanSpec&, TaskLists*, LayerCache*);
  // Empties the cache unless it holds what `plan` shares with its plan. REQUIRES: the same
  // `model` object every time (checked).
  void Prepare(const ModelSpec& model, const PlanSpec& plan);
  const std::vector<Op>& StepOps(const PlanSpec& plan, const Stage& stage);

  const ModelSpec* model_ = nullptr;
  PlanSpec plan_;  // with the default schedule and one virtual stage
  bool valid_ = false, has_layers_ = false;
  // The programs of kTransformerKinds and the multi-token-prediction module (kCachedKinds in
  // build_step.cc), then the transformer kinds' 16-bit twins: each depends on the plan but not
  // on its schedule.
  static constexpr size_t kPrograms = 2 * kTransformerKinds.size() + 1;
  std::array<LayerProgram, kPrograms> layers_;
  // (dense, expert, their 16-bit params) -> ops
  std::vector<std::tuple<std::array<double, 4>, std::vector<Op>>> step_ops_;
};

// Builds one training step. REQUIRES: ValidatePlan(plan, model, plan.mesh.Product(), ...) passed.
// Throws InputError for plans the program cannot express yet (the dualpipe schedule).
// `task_lists`, when given, keeps the schedule's task lists the memory model walks, for the
// estimate and the next plans of the same pipeline shape.
// `cache`, when given, shares what plans differing only in schedule have in common (LayerCache).
StepProgram BuildStep(const ModelSpec& model, const PlanSpec& plan, TaskLists* task_lists = nullptr, LayerCache* cache = nullptr);

}  // namespace shardsim::strategies
