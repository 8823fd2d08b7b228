// MoE dispatch and combine: which (token, slot) assignments each expert processes, in a fixed
// order, and the row moves between token order [T, D] and expert order [T*k, D] with backward.
// An assignment is the flat index a = token * k + slot into top_experts [T, k] and gates [T, k].
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// offsets [E + 1] overwritten: expert e's assignments are assignments[offsets[e], offsets[e+1]).
// assignments [T * k] overwritten: grouped by expert in expert order, ascending within an expert
// (so by token, then slot). Deterministic. REQUIRES: expert ids in [0, E) (checked).
void BuildExpertDispatch(int32_t* offsets, int32_t* assignments, const int32_t* top_experts, int t,
                         int e, int top_k);

// rows [n, D] = x [T, D] at the tokens of assignments[0, n) (token = a / k); overwritten.
void DispatchGatherForward(float* rows, const float* x, const int32_t* assignments, int n,
                           int top_k, int d);

// dx [T, D] += d_rows [n, D] scattered back to the tokens; accumulates.
void DispatchGatherBackward(float* dx, const float* d_rows, const int32_t* assignments, int n,
                            int top_k, int d);

// y [T, D] += gates[a] * expert_out[i] for each i < n with a = assignments[i]; accumulates (into
// the residual stream, or across experts held by different calls).
void CombineForward(float* y, const float* expert_out, const float* gates,
                    const int32_t* assignments, int n, int top_k, int d);

// With a = assignments[i] and dy [T, D]: d_expert_out [n, D] row i = gates[a] * dy[a / k],
// overwritten; d_gates [T * k] entry a += dot(dy[a / k], expert_out[i]), accumulates.
void CombineBackward(float* d_expert_out, float* d_gates, const float* dy, const float* expert_out,
                     const float* gates, const int32_t* assignments, int n, int top_k, int d);

}  // namespace shardsim::runtime
