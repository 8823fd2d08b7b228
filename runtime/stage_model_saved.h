// What a StageModel keeps between a chunk's forward and its backward (and W task): private to
// stage_model.cc and transformer_layer.cc, which define its members.
#pragma once

#include <string>
#include <vector>

#include "runtime/moe_layer.h"
#include "runtime/stage_model.h"

namespace shardsim::runtime {

using Buffer = std::vector<float>;

// A weight gradient left for the W task (zero-bubble schedules): dW += x^T dy, for program op
// `op` (its W op is Wgrad(op)).
struct StageModel::Deferred {
  std::string op;
  float* dw = nullptr;       // the gradient it accumulates into
  const float* x = nullptr;  // a buffer of the saved activations
  Buffer dy;
  int t = 0, in = 0, out = 0;
};

// What one layer's backward needs from its forward (T tokens of the micro-batch, Tl held).

struct StageModel::LayerSaved {
  Buffer x, rstd1, h_full, q, k, v, o, lse, x2, rstd2, h2_full, gate, up, act;
  MoeSaved moe;
  std::vector<Deferred> deferred;
};

struct StageModel::Saved {
  std::vector<LayerSaved> layers;
  std::vector<int32_t> ids, targets;  // the micro-batch's tokens on this context rank, and the next tokens
  // Last part: the final norm's input and statistics, its output over all tokens, the softmax
  // numerators of this rank's logit columns [T, V/t] and per token (sum, target logit).
  Buffer final_x, final_rstd, final_h_full, probs, sums;
  double normaliser = 1;  // the loss's divisor (the step's tokens)
  std::vector<Deferred> head_deferred;  // the output matrix's gradient, left for the W task
};

}  // namespace shardsim::runtime
