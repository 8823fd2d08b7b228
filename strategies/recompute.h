// Activation recomputation: the forward work a plan's recompute policy redoes before each
// layer's backward (phase kRecompute). What each policy keeps and reruns is one table,
// saved_tensors.h; full reruns the layer's whole forward (compute and tensor collectives),
// selective the attention core (Korthikanti et al. 2022).
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// Adds the recomputation ops (phase kRecompute) of the plan's policy to a transformer layer
// program: each forward op its policy reruns, scaled by the share rerun.
void ApplyRecompute(LayerProgram& layer, const ModelSpec& model, const PlanSpec& plan);

}  // namespace shardsim::strategies
