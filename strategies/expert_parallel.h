// Expert parallelism for mixture-of-experts layers (GShard; DeepSeek-V3 section 3.2): experts
// split over `expert` (E/e per rank), each expert's MLP split over tensor like a dense MLP; the
// `expert` axis is data parallel for everything else.
// Sharding: W_expert[E_expert, D, Fe_tensor]; tokens X[B_(data,expert), S, D].
// Collectives: forward all-to-all dispatch and all-to-all combine over `expert`, each moving the
// T x k x capacity token copies of width D a rank sends, split over tensor (nccl-tests
// all-to-all size); with tensor > 1 an all-gather of the routed tokens over tensor before the
// experts and a reduce-scatter after; backward the mirror of each. Shared experts run as a dense
// MLP beside the routed ones.
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/layer_builder.h"

namespace shardsim::strategies {

void AppendMoeBlock(LayerBuilder& layer, const ModelSpec& model, const PlanSpec& plan);

}  // namespace shardsim::strategies
