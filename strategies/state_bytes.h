// Bytes of training state per parameter, in one place for the step program's optimizer traffic
// and the memory model, by the plan's master_weights (core/plan_spec.h):
// - fp32-copy: 16-bit weights (2), gradients at the reduction's width, an fp32 master copy and
//   Adam's m and v (12): mixed-precision Adam as ZeRO counts it (Rajbhandari et al. 2020,
//   "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", section 3.1),
//   Megatron-core's distributed optimizer (fp32 main_grad buffers under fp32 reduction).
// - fp32: fp32 weights, the master themselves (4), fp32 gradients (4: FSDP2 casts each reduced
//   shard to the parameter's dtype), Adam's m and v in fp32 (8): FSDP2 under a
//   MixedPrecisionPolicy (torchtitan), torch.autocast, and fp32 training.
// - bf16: bf16 weights, gradients and Adam's m and v (2 + 2 + 4), no fp32 copy: torch.optim.Adam
//   keeps its state in the parameters' dtype.
#pragma once

#include "core/plan_spec.h"

namespace shardsim::strategies {

struct StateBytes {
  double params = 0, grads = 0, optimizer = 0;  // held per parameter (memory)
  // HBM traffic of one Adam update per parameter: reading the gradient, the master weights and
  // Adam's m and v, writing them back and the 16-bit weights a separate master is cast to.
  double optimizer_traffic = 0;
};

// What data-parallel collectives move per element is the plan's ParamGatherBytes /
// GradReduceBytes (core/plan_spec.h); what is held is this.
inline StateBytes StateBytesOf(const PlanSpec& plan) {
  const std::string master = MasterWeightsOf(plan);
  StateBytes b;
  if (master == "fp32") b = {.params = 4, .grads = 4, .optimizer = 8};
  else if (master == "bf16") b = {.params = 2, .grads = 2, .optimizer = 4};
  else b = {.params = 2, .grads = GradReduceBytes(plan), .optimizer = 12};
  const bool copy = master == "fp32-copy";  // the master is in `optimizer`, the weights apart
  b.optimizer_traffic = (b.grads + b.optimizer + (copy ? 0 : b.params)) + (b.optimizer + b.params);
  return b;
}

}  // namespace shardsim::strategies
