// The ring-attention command's prediction: the estimator's cost of the step program's
// context-parallel ops at given rates, and the Ring Attention paper's crossover, as known answers.
#include "validation/ring_attention_prediction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace shardsim::validation {
namespace {

// The prediction is the estimator's cost of the step program's context-parallel ops: per phase,
// the attention op at the measured kernel rate and the ring transfers (c - 1 K/V permutes
// forward; c - 1 K/V and c - 1 dK/dV permutes backward) at latency + bytes / bandwidth, the
// transfers hidden under the phase's compute: max(compute, transfers).
TEST(RingAttentionPrediction, StepProgramOpsAtMeasuredRates) {
  const int64_t batch = 1, seq = 1024, heads = 8, kv_heads = 2, head_dim = 16, c = 4;
  const double tokens = static_cast<double>(batch * seq / c);
  const double block_bytes = tokens * 2 * kv_heads * head_dim * 4;  // fp32 K and V
  for (bool causal : {true, false}) {
    for (double bandwidth : {1e9, 1e6}) {  // compute-bound, then transfer-bound
      RingMeasuredRates rates;
      rates.forward_flop_per_s = 1e10;
      rates.backward_flop_per_s = 5e9;
      rates.p2p_bytes_per_s = bandwidth;
      rates.p2p_latency_s = 1e-6;
      const RingPrediction p =
          PredictRingAttention(batch, seq, heads, kv_heads, head_dim, causal, c, rates);
      const double keys = static_cast<double>(seq) * (causal ? 0.5 : 1.0);
      const double flops = 2 * tokens * keys * heads * (2 * head_dim);  // QK^T and AV
      const double transfer = 1e-6 + block_bytes / bandwidth;
      const std::string what =
          std::string(causal ? "causal" : "full") + " at " + std::to_string(bandwidth) + " B/s";
      EXPECT_NEAR(p.forward.compute_s, flops / 1e10, 1e-12) << what;
      EXPECT_NEAR(p.forward.transfers_s, 3 * transfer, 1e-9) << what;
      EXPECT_NEAR(p.forward.time_s, std::max(flops / 1e10, 3 * transfer), 1e-9) << what;
      EXPECT_NEAR(p.backward.compute_s, 2 * flops / 5e9, 1e-12) << what;
      EXPECT_NEAR(p.backward.transfers_s, 6 * transfer, 1e-9) << what;
      EXPECT_NEAR(p.backward.time_s, std::max(2 * flops / 5e9, 6 * transfer), 1e-9) << what;
      EXPECT_FALSE(p.source.empty());
      EXPECT_EQ(p.forward.ops.size(), 2u) << what;  // the ring transfers (x3) and the attention op
    }
  }
  // One rank: nothing moves.
  RingMeasuredRates rates{1e10, 1e10, 0, 0};
  const RingPrediction one = PredictRingAttention(1, 256, 4, 4, 16, true, 1, rates);
  EXPECT_EQ(one.forward.transfers_s, 0.0);
  EXPECT_GT(one.forward.time_s, 0.0);
}

// Liu et al.'s condition c >= F / B is for bf16 MHA (4·c·d bytes against 4·d·c² FLOPs a step):
// fp32 doubles the bytes, so non-causal MHA crosses at about 2 F / B; causal steps do half the
// FLOPs (4 F / B); GQA moves G/H of the K/V.
TEST(RingAttentionPrediction, FormulaCrossoverFollowsThePaper) {
  const double f = 2e10, b = 5e9;
  const double mha = FormulaCrossoverBlockTokens(1, 8, 8, 64, false, false, f, b);
  EXPECT_NEAR(mha, 2 * f / b, 0.01 * f / b);
  EXPECT_NEAR(FormulaCrossoverBlockTokens(1, 8, 8, 64, true, false, f, b), 2 * mha, 1e-9);
  EXPECT_NEAR(FormulaCrossoverBlockTokens(1, 8, 2, 64, false, false, f, b), mha / 4, 0.01 * mha);
  // Backward: twice the FLOPs and twice the bytes (the dK/dV accumulator) at its own rate.
  EXPECT_NEAR(FormulaCrossoverBlockTokens(1, 8, 8, 64, false, true, f, b), mha, 0.01 * mha);
  // At the crossover a step computes exactly as long as it transfers.
  const double c = FormulaCrossoverBlockTokens(2, 6, 3, 32, true, false, f, b);
  const double compute = c * c * 4 * 2 * 6 * 32 * 0.5 / f,
               transfer = c * (2.0 * 2 * 3 * 32 * 4 + 4) / b;
  EXPECT_NEAR(compute, transfer, 1e-12 * transfer);
}

}  // namespace
}  // namespace shardsim::validation
