// What the step program predicts for ring attention on this machine: its context-parallel ops for
// an attention shape, costed by the estimator with rates measured here, and the Ring Attention
// paper's compute/transfer crossover for the same rates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardsim::validation {

// This machine's rates, measured in the same run. FLOP counts follow the step program's
// convention for the attention op: a forward over Sq queries and Skv keys is 4·B·Sq·Skv·H·K, its
// backward twice that.
struct RingMeasuredRates {
  // The block kernels as the ring runs them (its pieces, merges, sums) on unmasked blocks: a
  // compute-only ring pass with causal off.
  double forward_flop_per_s = 0;
  double backward_flop_per_s = 0;
  double p2p_bytes_per_s = 0;  // each way, both neighbours exchanging one K/V block at once
  double p2p_latency_s = 0;    // the same exchange of 8 bytes
};

struct RingPassPrediction {
  double time_s = 0;             // the estimator's time for the phase's context-parallel ops
  double compute_s = 0;          // its attention op(s) alone (roofline at the measured rate)
  double transfers_s = 0;        // its ring transfer ops alone, summed
  std::vector<std::string> ops;  // "attention: compute 1.07e+09 FLOP", "cp_kv: permute 524288 B"
};

struct RingPrediction {
  RingPassPrediction forward, backward;
  std::string source;  // where the numbers come from, in words
};

// The step program (strategies::BuildStep) of a one-layer model with this attention shape on a
// plan with `ranks` context ranks, fp32, context overlap on; of its dense layer only the
// context-parallel part: the attention op (kind attention) and the ring transfers (context
// stream). sim::Estimate costs them, per phase, on a `ranks`-core local cluster whose fp32 peak
// is the measured kernel rate of that phase and whose shared-memory link has the measured
// bandwidth and latency, every efficiency 1. Throws InputError for shapes the planner's
// validation refuses. REQUIRES: rates positive, ranks >= 1.
RingPrediction PredictRingAttention(int64_t batch, int64_t seq_len, int64_t heads, int64_t kv_heads,
                                    int64_t head_dim, bool causal, int64_t ranks,
                                    const RingMeasuredRates& rates);

// The smallest block size (tokens per rank) at which one ring step's attention takes as long as
// moving what the step moves, by the Ring Attention condition (Liu et al. 2023, section 3:
// 4·d·c² / F >= 4·c·d / B in bf16 MHA, so c >= F / B), here with fp32 K/V of G heads and their
// int32 positions: per step 4·B·c²·H·K FLOPs (half of them when causal: zigzag steps each see
// half the pairs) against (2·B·G·K·4 + 4)·c bytes. A backward step computes twice the FLOPs
// (at the backward rate) and moves a dK/dV accumulator (2·B·G·K·4·c bytes) beside the K/V block.
// `flop_per_s` in the step program's convention (see RingMeasuredRates).
double FormulaCrossoverBlockTokens(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                   bool causal, bool backward, double flop_per_s,
                                   double p2p_bytes_per_s);

}  // namespace shardsim::validation
