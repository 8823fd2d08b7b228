// MoE dispatch (a counting sort of the assignments by expert), gather and combine.
#include "runtime/moe_dispatch.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace shardsim::runtime {

void BuildExpertDispatch(int32_t* offsets, int32_t* assignments, const int32_t* top_experts, int t,
                         int e, int top_k) {
  SHARDSIM_CHECK(t >= 0 && e > 0 && top_k >= 1, "BuildExpertDispatch: bad sizes");
  const int64_t n = int64_t{t} * top_k;
  std::fill_n(offsets, e + 1, 0);
  for (int64_t a = 0; a < n; ++a) {
    SHARDSIM_CHECK(top_experts[a] >= 0 && top_experts[a] < e, "BuildExpertDispatch: bad expert id");
    ++offsets[top_experts[a] + 1];
  }
  for (int j = 0; j < e; ++j) offsets[j + 1] += offsets[j];
  std::vector<int32_t> next(offsets, offsets + e);
  for (int64_t a = 0; a < n; ++a) assignments[next[top_experts[a]]++] = static_cast<int32_t>(a);
}

void DispatchGatherForward(float* rows, const float* x, const int32_t* assignments, int n,
                           int top_k, int d) {
  SHARDSIM_CHECK(n >= 0 && top_k >= 1 && d > 0, "DispatchGatherForward: bad sizes");
  for (int i = 0; i < n; ++i) {
    std::copy_n(x + int64_t{assignments[i] / top_k} * d, d, rows + int64_t{i} * d);
  }
}

void DispatchGatherBackward(float* dx, const float* d_rows, const int32_t* assignments, int n,
                            int top_k, int d) {
  SHARDSIM_CHECK(n >= 0 && top_k >= 1 && d > 0, "DispatchGatherBackward: bad sizes");
  for (int i = 0; i < n; ++i) {
    float* to = dx + int64_t{assignments[i] / top_k} * d;
    const float* from = d_rows + int64_t{i} * d;
    for (int j = 0; j < d; ++j) to[j] += from[j];
  }
}

void CombineForward(float* y, const float* expert_out, const float* gates,
                    const int32_t* assignments, int n, int top_k, int d) {
  SHARDSIM_CHECK(n >= 0 && top_k >= 1 && d > 0, "CombineForward: bad sizes");
  for (int i = 0; i < n; ++i) {
    const int32_t a = assignments[i];
    float* to = y + int64_t{a / top_k} * d;
    const float* from = expert_out + int64_t{i} * d;
    const float g = gates[a];
    for (int j = 0; j < d; ++j) to[j] += g * from[j];
  }
}

void CombineBackward(float* d_expert_out, float* d_gates, const float* dy, const float* expert_out,
                     const float* gates, const int32_t* assignments, int n, int top_k, int d) {
  SHARDSIM_CHECK(n >= 0 && top_k >= 1 && d > 0, "CombineBackward: bad sizes");
  for (int i = 0; i < n; ++i) {
    const int32_t a = assignments[i];
    const float* g_row = dy + int64_t{a / top_k} * d;
    const float* out = expert_out + int64_t{i} * d;
    float* d_out = d_expert_out + int64_t{i} * d;
    const float g = gates[a];
    double dot = 0.0;
    for (int j = 0; j < d; ++j) {
      d_out[j] = g * g_row[j];
      dot += double{g_row[j]} * out[j];
    }
    d_gates[a] += static_cast<float>(dot);
  }
}

}  // namespace shardsim::runtime
