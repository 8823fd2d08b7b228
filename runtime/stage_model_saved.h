// What a StageModel keeps between a chunk's forward and its backward (and W task): private to
// stage_model.cc and transformer_layer.cc, which define its members.
#pragma once

#include <string>
#include <vector>

#include "runtime/memory_account.h"
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
  int64_t Bytes() const { return HeldBytes(dy); }  // x is counted where it lives
};

template <class D>  // StageModel::Deferred (private: deduced, not named)
int64_t DeferredBytes(const std::vector<D>& deferred) {
  int64_t bytes = 0;
  for (const D& d : deferred) bytes += d.Bytes();
  return bytes;
}

// What one layer's backward needs from its forward (T tokens of the micro-batch, Tl held).

struct StageModel::LayerSaved {
  // h_full, h2_full: the norm outputs over all T tokens the column-parallel products read. With
  // sequence parallelism only this rank's shards h, h2 are kept from the forward, and the
  // backward gathers them again (ops::Regather) before the products' weight gradients.
  Buffer x, rstd1, h_full, h, q, k, v, o, lse, x2, rstd2, h2_full, h2, gate, up, act;
  Buffer mean1, mean2;  // LayerNorm's row means
  // MLA: the query latent, its norm's statistic and output, the K/V latent, its statistic and
  // output, the attention output without padding (mla_attention.cc).
  Buffer cq, rstd_q, cqn, c, rstd_kv, cn, o_v;
  MoeSaved moe;
  std::vector<Deferred> deferred;
  int64_t Bytes() const {
    return HeldBytes(x, rstd1, h_full, h, q, k, v, o, lse, x2, rstd2, h2_full, h2, gate, up, act) + HeldBytes(mean1, mean2) +
           HeldBytes(cq, rstd_q, cqn, c, rstd_kv, cn, o_v) + moe.Bytes() + DeferredBytes(deferred);
  }
  // After a backward that left the weight gradients for the W task: frees what only the input
  // gradients read, keeping the inputs of the matmuls whose weight gradients wait (the
  // deferred x's point into h_full, o, h2_full, act, MLA's cqn, cn and o_v, and the MoE block's
  // expert rows).
  void KeepWeightGradInputs() {
    for (Buffer* b : {&x, &rstd1, &h, &q, &k, &v, &lse, &x2, &rstd2, &h2, &gate, &up, &mean1, &mean2, &cq, &rstd_q, &c, &rstd_kv}) Buffer().swap(*b);
    moe.KeepWeightGradInputs();
  }
};

struct StageModel::Saved {
  std::vector<LayerSaved> layers;
  std::vector<int32_t> ids, targets;  // the micro-batch's tokens on this context rank, and the next tokens
  // Last part: the final norm's input and statistics, its output over all tokens (with sequence
  // parallelism: this rank's shard final_h, gathered again in backward), the softmax numerators
  // of this rank's logit columns [T, V/t] and per token (sum, target logit).
  Buffer final_x, final_rstd, final_mean, final_h_full, final_h, probs, sums;
  double normaliser = 1;  // the loss's divisor (the step's tokens)
  std::vector<Deferred> head_deferred;  // the output matrix's gradient, left for the W task
  // Counted in the rank's MemoryAccount while this is kept: `activations` everything above but
  // the logits, `logits` (a buffer) the probabilities [T, V/t].
  MemoryHold activations, logits;
  RoutedRowsHold routed;  // the MoE layers' routed rows held (memory_account.h)
  // Counts what is held now in the account: the routed rows first (the account notes them when
  // the activations peak), then the bytes; `width`: the hidden size (an expert row's width).
  void Account(int64_t width) {
    RoutedRows rows;
    for (const LayerSaved& layer : layers) {
      const RoutedRows r = layer.moe.Routed(width);
      rows.received += r.received;
      rows.sent += r.sent;
    }
    routed.Set(rows);
    activations.Set(ActivationBytes());
  }
  int64_t ActivationBytes() const {
    int64_t bytes = HeldBytes(ids, targets) + HeldBytes(final_x, final_rstd, final_mean, final_h_full, final_h, sums) + DeferredBytes(head_deferred);
    for (const LayerSaved& layer : layers) bytes += layer.Bytes();
    return bytes;
  }
};

}  // namespace shardsim::runtime
