// From (model, plan) to the StepProgram every engine reads.
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/schedule.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// Builds one training step. REQUIRES: ValidatePlan(plan, model, plan.mesh.Product(), ...) passed.
// Throws InputError for plans the program cannot express yet (the dualpipe schedule).
// `task_lists`, when given, keeps the schedule's task lists the memory model walks, for the
// estimate and the next plans of the same pipeline shape.
StepProgram BuildStep(const ModelSpec& model, const PlanSpec& plan, TaskLists* task_lists = nullptr);

}  // namespace shardsim::strategies
