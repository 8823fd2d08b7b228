// Rotary position embedding (Su et al. 2021) in the LLaMA / Hugging Face rotate-half pairing:
// dimension i is rotated with i + K/2 by angle pos * theta^(-2i/K), for i in [0, K/2).
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// y [T, N, K] = rotate(x [T, N, K]) with N heads (H for queries, G for keys) and head dim K;
// positions [T] are each token's absolute position (explicit, since a context-parallel rank holds
// non-contiguous positions). y overwritten; y may alias x. REQUIRES: K even, positions >= 0.
void RopeForward(float* y, const float* x, const int32_t* positions, int t, int n_heads,
                 int head_dim, float theta);

// dx [T, N, K] = the inverse rotation of dy (the rotation is orthogonal); dx overwritten and may
// alias dy. Same sizes and preconditions as RopeForward.
void RopeBackward(float* dx, const float* dy, const int32_t* positions, int t, int n_heads,
                  int head_dim, float theta);

}  // namespace shardsim::runtime
