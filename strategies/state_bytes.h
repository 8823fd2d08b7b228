// Bytes of training state per parameter, in one place for the step program's collectives, the
// optimizer's traffic and the memory model. Mixed-precision Adam as ZeRO counts it (Rajbhandari
// et al. 2019, section 3): bf16 parameters and gradients, fp32 master weights and Adam m and v.
#pragma once

namespace shardsim::strategies {

// Held per parameter (memory); what data-parallel collectives move per element is the plan's
// ParamGatherBytes / GradReduceBytes (core/plan_spec.h).
inline constexpr double kParamBytes = 2;            // bf16 weights
inline constexpr double kGradBytes = 2;             // bf16 gradients
inline constexpr double kOptimizerStateBytes = 12;  // fp32 master + Adam m + Adam v, held
// HBM traffic of one AdamW update per parameter: reads gradient, master, m, v (2 + 4 + 4 + 4)
// and writes master, m, v and the bf16 parameter (4 + 4 + 4 + 2); counted twice for the
// separate unscale / clip pass frameworks run over the same tensors.
inline constexpr double kOptimizerTrafficBytes = 14 + 14;

}  // namespace shardsim::strategies
