// MoE router (Switch Transformer, GShard, Mixtral): softmax over the router logits [T, E]
// (= x W_router from LinearForward), deterministic top-k, gates renormalised over the k chosen
// experts, and the load-balancing auxiliary loss, each with its backward into the logits.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// probs [T, E] = softmax(logits [T, E]) over E, overwritten (kept for the aux loss).
// top_experts [T, k] overwritten: per token the k experts with the largest logits, largest first,
// ties going to the lower expert index (deterministic on every rank).
// gates [T, k] overwritten: probs at top_experts divided by their sum, so each token's k gates sum
// to 1 (Mixtral; with k = 1 every gate is 1). REQUIRES: t >= 0, 1 <= top_k <= e.
void RouterForward(float* probs, int32_t* top_experts, float* gates, const float* logits, int t,
                   int e, int top_k);

// d_logits [T, E] += the gradient of sum(d_gates * gates): the renormalised gates are a softmax
// over the k chosen logits, so d_logit[s_i] += g_i (dg_i - sum_j g_j dg_j) and unchosen experts
// get nothing (the selection is piecewise constant). d_gates, gates [T, k]; accumulates.
void RouterGatesBackward(float* d_logits, const float* d_gates, const int32_t* top_experts,
                         const float* gates, int t, int e, int top_k);

// counts [E] = the number of (token, slot) assignments to each expert over these T tokens,
// overwritten. Sum them over ranks holding other tokens to get global counts.
void RouterExpertCounts(int64_t* counts, const int32_t* top_experts, int t, int e, int top_k);

// Load-balancing loss (Switch Transformer eq. 4, GShard): coeff * E * sum_e f_e P_e with
// f_e = counts[e] / (k N), the fraction of assignments routed to e, and P_e = (sum over these T
// tokens of probs[:, e]) / N, N = total_tokens. Returns that value; with global counts and N the
// global token count, the values returned for disjoint token shards sum to the global loss.
// Perfectly uniform routing gives coeff. REQUIRES: total_tokens > 0.
double RouterAuxLoss(const float* probs, const int64_t* counts, int t, int e, int top_k,
                     double total_tokens, float coeff);

// d_logits [T, E] += the gradient of RouterAuxLoss with f_e held constant (as is usual: counts are
// not differentiable): dL/dprobs[t, e] = coeff * E * f_e / N, then through the softmax.
// Accumulates.
void RouterAuxLossBackward(float* d_logits, const float* probs, const int64_t* counts, int t, int e,
                           int top_k, double total_tokens, float coeff);

}  // namespace shardsim::runtime
