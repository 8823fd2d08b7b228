// GELU (Hendrycks & Gimpel 2016) in the tanh approximation GPT-2 and GPT-3 use (OpenAI's
// gpt-2 model.py `gelu`; PyTorch's gelu(approximate="tanh")):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// y [n] = gelu(x [n]) (y may be x).
void GeluForward(float* y, const float* x, int64_t n);

// dx [n] = dy [n] * gelu'(x [n]) (overwritten).
void GeluBackward(float* dx, const float* dy, const float* x, int64_t n);

}  // namespace shardsim::runtime
