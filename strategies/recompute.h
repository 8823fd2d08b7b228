// Activation recomputation (Korthikanti et al. 2022): `full` reruns a layer's whole forward
// (compute and tensor collectives) before its backward, keeping only the layer input;
// `selective` reruns only the attention core, whose S x S activations dominate memory.
#pragma once

#include "core/plan_spec.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// Adds the recomputation ops (phase kRecompute) of `mode` to a transformer layer program.
void ApplyRecompute(LayerProgram& layer, Recompute mode);

}  // namespace shardsim::strategies
