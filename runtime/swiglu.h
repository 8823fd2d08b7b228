// SwiGLU activation (Shazeer 2020), the LLaMA MLP's nonlinearity: h = silu(a) * u with
// a = x W_gate and u = x W_up. The three matmuls stay in linear.h, so tensor parallelism can shard
// W_gate and W_up by columns (F/t) and W_down by rows and call these on [T, F/t] unchanged.
#pragma once

namespace shardsim::runtime {

// h [T, F] = silu(gate) * up, silu(a) = a * sigmoid(a); gate, up [T, F] pre-activations.
// h overwritten; h may alias gate or up. REQUIRES: t, f >= 0.
void SwigluForward(float* h, const float* gate, const float* up, int t, int f);

// d_gate, d_up [T, F] overwritten (they feed LinearBackward next) from dh [T, F] and the forward's
// gate, up. d_gate and d_up must not alias gate, up or dh.
void SwigluBackward(float* d_gate, float* d_up, const float* dh, const float* gate, const float* up,
                    int t, int f);

}  // namespace shardsim::runtime
