// From (model, plan) to the StepProgram every engine reads.
#pragma once

#include <array>

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/schedule.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// The dense and MoE layer programs BuildStep made for one plan (see BuildStep). One model per cache.
class LayerCache {
 public:
  // The kept programs when `plan` differs from theirs at most in its schedule and virtual stages.
  const std::array<LayerProgram, 2>* Find(const PlanSpec& plan) const;
  void Keep(const PlanSpec& plan, const LayerProgram& dense, const LayerProgram& moe);

 private:
  bool valid_ = false;
  PlanSpec plan_;  // with the default schedule and one virtual stage
  std::array<LayerProgram, 2> layers_;  // dense, MoE
};

// Builds one training step. REQUIRES: ValidatePlan(plan, model, plan.mesh.Product(), ...) passed.
// Throws InputError for plans the program cannot express yet (the dualpipe schedule).
// `task_lists`, when given, keeps the schedule's task lists the memory model walks, for the
// estimate and the next plans of the same pipeline shape.
// `layers`, when given, keeps the transformer layers' programs for the next plans of the same
// model that differ only in their pipeline schedule or virtual stages (on which the layers do not
// depend): a plan that matches the kept one reuses them instead of building them.
StepProgram BuildStep(const ModelSpec& model, const PlanSpec& plan, TaskLists* task_lists = nullptr, LayerCache* layers = nullptr);

}  // namespace shardsim::strategies
