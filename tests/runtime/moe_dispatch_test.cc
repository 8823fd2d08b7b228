#include "runtime/moe_dispatch.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/runtime/kernel_test_util.h"

namespace shardsim::runtime {
namespace {

using testing::ExpectAllNear;
using testing::NumericGradient;
using testing::Probe;
using testing::RandomVector;

// Four tokens, top-2 of three experts.
const std::vector<int32_t> kTop = {2, 0, 0, 1, 2, 1, 0, 2};
constexpr int kT = 4, kE = 3, kK = 2, kD = 3;

TEST(MoeDispatchTest, AssignmentsGroupedByExpertInTokenOrder) {
  std::vector<int32_t> offsets(kE + 1), assignments(kT * kK);
  BuildExpertDispatch(offsets.data(), assignments.data(), kTop.data(), kT, kE, kK);
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 3, 5, 8}));
  // Expert 0: (token 0, slot 1), (1, 0), (3, 0); expert 1: (1, 1), (2, 1); expert 2: (0, 0),
  // (2, 0), (3, 1).
  EXPECT_EQ(assignments, (std::vector<int32_t>{1, 2, 6, 3, 5, 0, 4, 7}));
}

TEST(MoeDispatchTest, GatherCombineRoundTripAndGradients) {
  std::vector<int32_t> offsets(kE + 1), assignments(kT * kK);
  BuildExpertDispatch(offsets.data(), assignments.data(), kTop.data(), kT, kE, kK);
  const int n = kT * kK;
  auto x = RandomVector(kT * kD, 1);
  std::vector<float> rows(n * kD);
  DispatchGatherForward(rows.data(), x.data(), assignments.data(), n, kK, kD);
  for (int i = 0; i < n; ++i)
    for (int d = 0; d < kD; ++d) EXPECT_EQ(rows[i * kD + d], x[assignments[i] / kK * kD + d]);

  // Combine with gates summing to 1 per token gives x back when experts are the identity.
  std::vector<float> gates = {0.25f, 0.75f, 0.5f, 0.5f, 1.0f, 0.0f, 0.1f, 0.9f};
  std::vector<float> y(kT * kD, 0.0f);
  CombineForward(y.data(), rows.data(), gates.data(), assignments.data(), n, kK, kD);
  ExpectAllNear(y, testing::ToDouble(x), 1e-6, 1e-6, "y");

  // Gradients of sum(probe * combine(gather(x) * 2, gates)) by finite differences.
  const auto probe = RandomVector(kT * kD, 2);
  auto expert_out = RandomVector(n * kD, 3);
  auto loss = [&] {
    std::vector<float> out(kT * kD, 0.0f);
    CombineForward(out.data(), expert_out.data(), gates.data(), assignments.data(), n, kK, kD);
    return Probe(out, probe);
  };
  std::vector<float> d_expert_out(n * kD), d_gates(n, 0.0f);
  CombineBackward(d_expert_out.data(), d_gates.data(), probe.data(), expert_out.data(),
                  gates.data(), assignments.data(), n, kK, kD);
  ExpectAllNear(d_expert_out, NumericGradient(expert_out, loss, 1e-2f), 1e-4, 1e-3, "d_out");
  ExpectAllNear(d_gates, NumericGradient(gates, loss, 1e-2f), 1e-4, 1e-3, "d_gates");

  auto gather_loss = [&] {
    std::vector<float> r(n * kD);
    DispatchGatherForward(r.data(), x.data(), assignments.data(), n, kK, kD);
    return Probe(r, expert_out);
  };
  std::vector<float> dx(kT * kD, 0.0f);
  DispatchGatherBackward(dx.data(), expert_out.data(), assignments.data(), n, kK, kD);
  ExpectAllNear(dx, NumericGradient(x, gather_loss, 1e-2f), 1e-4, 1e-3, "dx");
}

}  // namespace
}  // namespace shardsim::runtime
