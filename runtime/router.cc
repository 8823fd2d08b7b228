// MoE router: softmax, top-k, renormalised gates, load-balancing loss, and their backward.
#include "runtime/router.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace shardsim::runtime {

void RouterForward(float* probs, int32_t* top_experts, float* gates, const float* logits, int t,
                   int e, int top_k) {
  SHARDSIM_CHECK(t >= 0 && top_k >= 1 && top_k <= e, "RouterForward: need 1 <= top_k <= e");
  std::vector<char> taken(e);
  for (int i = 0; i < t; ++i) {
    const float* l = logits + int64_t{i} * e;
    float* p = probs + int64_t{i} * e;
    const float m = *std::max_element(l, l + e);
    double sum = 0.0;
    for (int j = 0; j < e; ++j) {
      p[j] = std::exp(l[j] - m);
      sum += p[j];
    }
    for (int j = 0; j < e; ++j) p[j] = static_cast<float>(p[j] / sum);
    // k passes of argmax: strict > keeps the lower index on ties.
    std::fill(taken.begin(), taken.end(), 0);
    int32_t* chosen = top_experts + int64_t{i} * top_k;
    double chosen_sum = 0.0;
    for (int s = 0; s < top_k; ++s) {
      int best = -1;
      for (int j = 0; j < e; ++j) {
        if (!taken[j] && (best < 0 || l[j] > l[best])) best = j;
      }
      taken[best] = 1;
      chosen[s] = best;
      chosen_sum += p[best];
    }
    for (int s = 0; s < top_k; ++s) {
      gates[int64_t{i} * top_k + s] = static_cast<float>(p[chosen[s]] / chosen_sum);
    }
  }
}

void RouterGatesBackward(float* d_logits, const float* d_gates, const int32_t* top_experts,
                         const float* gates, int t, int e, int top_k) {
  SHARDSIM_CHECK(t >= 0 && top_k >= 1 && top_k <= e, "RouterGatesBackward: need 1 <= top_k <= e");
  for (int i = 0; i < t; ++i) {
    const float* g = gates + int64_t{i} * top_k;
    const float* dg = d_gates + int64_t{i} * top_k;
    const int32_t* chosen = top_experts + int64_t{i} * top_k;
    double dot = 0.0;
    for (int s = 0; s < top_k; ++s) dot += double{g[s]} * dg[s];
    for (int s = 0; s < top_k; ++s) {
      d_logits[int64_t{i} * e + chosen[s]] += static_cast<float>(g[s] * (dg[s] - dot));
    }
  }
}

void RouterExpertCounts(int64_t* counts, const int32_t* top_experts, int t, int e, int top_k) {
  SHARDSIM_CHECK(t >= 0 && top_k >= 1 && top_k <= e, "RouterExpertCounts: need 1 <= top_k <= e");
  std::fill_n(counts, e, 0);
  for (int64_t a = 0; a < int64_t{t} * top_k; ++a) {
    SHARDSIM_CHECK(top_experts[a] >= 0 && top_experts[a] < e, "RouterExpertCounts: bad expert id");
    ++counts[top_experts[a]];
  }
}

double RouterAuxLoss(const float* probs, const int64_t* counts, int t, int e, int top_k,
                     double total_tokens, float coeff) {
  SHARDSIM_CHECK(t >= 0 && e > 0 && top_k >= 1 && total_tokens > 0.0, "RouterAuxLoss: bad sizes");
  double loss = 0.0;
  for (int j = 0; j < e; ++j) {
    double prob_sum = 0.0;
    for (int i = 0; i < t; ++i) prob_sum += probs[int64_t{i} * e + j];
    const double f = counts[j] / (double{1.0} * top_k * total_tokens);
    loss += f * prob_sum / total_tokens;
  }
  return coeff * double{1.0} * e * loss;
}

void RouterAuxLossBackward(float* d_logits, const float* probs, const int64_t* counts, int t, int e,
                           int top_k, double total_tokens, float coeff) {
  SHARDSIM_CHECK(t >= 0 && e > 0 && top_k >= 1 && total_tokens > 0.0,
                 "RouterAuxLossBackward: bad sizes");
  // dL/dp_j, the same for every token.
  std::vector<double> dp(e);
  for (int j = 0; j < e; ++j) {
    dp[j] =
        coeff * double{1.0} * e * counts[j] / (double{1.0} * top_k * total_tokens) / total_tokens;
  }
  for (int i = 0; i < t; ++i) {
    const float* p = probs + int64_t{i} * e;
    double dot = 0.0;
    for (int j = 0; j < e; ++j) dot += p[j] * dp[j];
    for (int j = 0; j < e; ++j) {
      d_logits[int64_t{i} * e + j] += static_cast<float>(p[j] * (dp[j] - dot));
    }
  }
}

}  // namespace shardsim::runtime
