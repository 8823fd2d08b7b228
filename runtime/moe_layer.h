// A mixture-of-experts MLP block (GShard; Mixtral; DeepSeekMoE's shared expert) on one rank, with
// expert parallelism: the E routed experts are split over the `expert` axis (E/e each, rank r
// holding experts [r E/e, (r+1) E/e)), and the token copies routed to them travel by all-to-all.
//
// Forward on the T tokens of a micro-batch this rank holds, h [T, D] (after the MLP norm):
//   router logits = h W_router [D, E]; softmax; top-k experts per token with gates renormalised
//   over the k; load-balancing loss (Switch Transformer) from the micro-batch's expert counts
//   (summed over context, whose ranks hold the same sequences' other tokens);
//   the T k token copies grouped by expert, all-to-all over expert (dispatch), each local expert's
//   SwiGLU MLP on its rows, all-to-all back (combine), y = sum of gate x expert output, plus the
//   shared experts' SwiGLU MLP on every token. Backward is the mirror, with the same all-to-alls.
// Dropless: every routed copy is computed (no capacity limit), so the all-to-all sizes follow the
// routing; the step program costs them at its capacity factor.
// With tensor parallelism (sequence parallel: each tensor rank holds its share of the tokens) the
// experts' and shared experts' matrices are split over tensor as a dense MLP's are: the routed rows
// are all-gathered over tensor after the dispatch and reduce-scattered back before the combine
// (moe_tensor.h), the shared experts' input all-gathered and output reduce-scattered; the router
// is replicated and the balancing loss's counts summed over tensor and context.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/model_spec.h"
#include "runtime/comm.h"
#include "runtime/memory_account.h"

namespace shardsim::runtime {

// Pointers to one MoE layer's weights (or their gradients), as this rank holds them.
struct MoeWeights {
  float* router = nullptr;                          // [D, E]
  float *shared_gate = nullptr, *shared_up = nullptr, *shared_down = nullptr;  // [D, Fs], [D, Fs], [Fs, D]
  std::vector<float*> gate, up, down;               // per local expert: [D, Fe], [D, Fe], [Fe, D]
};

// What the backward needs from the forward.
struct MoeSaved {
  std::vector<float> probs, gates, expert_out, shared_gate, shared_up, shared_act;
  std::vector<int32_t> top, offsets, assignments;
  std::vector<int64_t> counts;             // per expert over the micro-batch
  std::vector<int> send_counts, receive_counts;  // rows per expert rank (all-to-all)
  std::vector<int> expert_rows;            // rows per (source rank, local expert), source-major
  std::vector<int> tensor_rows;            // every tensor rank's expert_rows, rank-major (moe_tensor.h)
  std::vector<float> shared_h;             // the shared experts' input gathered over tensor (sequence parallel)
  std::vector<std::vector<float>> x, g, u, act;  // per local expert: its input rows, gate, up, activation
  int64_t sent_rows = 0;                         // this rank's token copies routed (tokens x top-k)
  // The routed rows held: received (the local experts' input rows, `width` elements each; none
  // may come) and sent (none once the layer's state is cleared).
  RoutedRows Routed(int64_t width) const {
    RoutedRows rows{0, sent_rows};
    for (const std::vector<float>& v : x) rows.received += static_cast<int64_t>(v.size()) / width;
    return rows;
  }
  int64_t Bytes() const {
    return HeldBytes(probs, gates, expert_out, shared_gate, shared_up, shared_act) + HeldBytes(top, offsets, assignments) + HeldBytes(counts) +
           HeldBytes(send_counts, receive_counts, expert_rows, tensor_rows) + HeldBytes(x, g, u, act) + HeldBytes(shared_h);
  }
  // Keeps only what deferred weight gradients read (the experts' input rows and activations,
  // the shared expert's input and activation); frees the rest.
  void KeepWeightGradInputs() {
    for (std::vector<float>* v : {&probs, &gates, &expert_out, &shared_gate, &shared_up}) std::vector<float>().swap(*v);
    for (std::vector<int32_t>* v : {&top, &offsets, &assignments}) std::vector<int32_t>().swap(*v);
    std::vector<int64_t>().swap(counts);
    for (std::vector<int>* v : {&send_counts, &receive_counts, &expert_rows, &tensor_rows}) std::vector<int>().swap(*v);
    std::vector<std::vector<float>>().swap(g);
    std::vector<std::vector<float>>().swap(u);
  }
};

class MoeLayer {
 public:
  // `aux_coeff`: the load-balancing loss's coefficient.
  MoeLayer(const ModelSpec& model, MeshComms& comms, float aux_coeff);
  int64_t local_experts() const { return local_experts_; }
  int64_t first_expert() const { return first_expert_; }
  // Counts the all-to-all buffers and scratch of each pass (as buffers) into `account`.
  void set_memory_account(MemoryAccount* account) { account_ = account; }
  // The rows this rank's experts received in each forward pass since the last clear, in pass
  // order (every rank of an expert group runs the same passes): what the routing loaded each
  // expert rank with, as the step program's balanced load cannot know.
  const std::vector<int64_t>& received_rows() const { return received_rows_; }
  void ClearReceivedRows() { received_rows_.clear(); }
  // y [T, D] overwritten with the block's output for h [T, D]. Returns this rank's share of the
  // load-balancing loss for the micro-batch of `batch_tokens` tokens, times `weight` (the micro-
  // batch's share of the step's loss). `op(name)` opens the trace span of the step program's op
  // of that name (strategies/op_names.h) for what follows.
  double Forward(float* y, const float* h, int t, int64_t batch_tokens, double weight, const MoeWeights& w, MoeSaved& s,
                 const std::function<void(std::string_view)>& op, const std::string& where);
  // dh [T, D] += the gradient through the block for dy [T, D]. Each weight gradient dW += x^T dy
  // (x [t, in], dy [t, out], dW [in, out] in `dw`) goes to `weight_grad` with its program op's
  // forward name, which runs it now or keeps it for the W task (x stays valid in `s` until then).
  using WeightGradFn = std::function<void(std::string_view op, float* dw, const float* x, const float* dy, int t, int in, int out)>;
  void Backward(float* dh, const float* dy, const float* h, int t, int64_t batch_tokens, double weight, const MoeWeights& w, const MoeWeights& dw,
                MoeSaved& s, const std::function<void(std::string_view)>& op, const WeightGradFn& weight_grad, const std::string& where);

 private:
  // rows [n, D] in this rank's dispatch order -> the expert ranks, or back (reverse = true).
  void Exchange(std::vector<float>& out, const std::vector<float>& in, const MoeSaved& s, bool reverse, const std::string& what);
  // Between block-major received rows (blocks of `table`: rows per (block, local expert), a block
  // per source rank, or per (tensor rank, source rank)) and expert-major rows (and back).
  void ToExpertMajor(std::vector<std::vector<float>>& per_expert, const std::vector<float>& received, const std::vector<int>& table);
  void FromExpertMajor(std::vector<float>& received, const std::vector<std::vector<float>>& per_expert, const std::vector<int>& table);
  int64_t d_ = 0, e_ = 0, k_ = 0, fe_ = 0, fs_ = 0;  // fe_, fs_: this tensor rank's widths
  int64_t tensor_ = 1;
  int64_t ranks_ = 1, local_experts_ = 0, first_expert_ = 0;
  float aux_coeff_ = 0;
  MeshComms& comms_;
  MemoryAccount* account_ = nullptr;
  std::vector<int64_t> received_rows_;
};

}  // namespace shardsim::runtime
