#include "strategies/elementwise_kernels.h"

namespace shardsim::strategies {
namespace {

constexpr double kFp32 = 4;  // the width eager code upcasts to

ElementwisePasses Norm(const ModelSpec& model, bool eager, double e) {
  if (!eager || model.norm != NormKind::kRmsNorm) return {2, 4};
  const double f = kFp32;
  // x.float() and type_as: a copy each way where the activations are narrower than fp32.
  const double casts = e < f ? 2 * (e + f) : 0;
  // Forward: pow(2) (2f), mean (f), x * rsqrt (2f), then the weight's product (2e).
  const double forward = casts + 5 * f + 2 * e;
  // Backward: the weight's product (its input gradient 2e, the weight's gradient: the product's
  // 3e and its reduction e), x * rsqrt (6f: both gradients and a reduction), mean's expansion (f),
  // pow's (3f) and the two gradients of x summed (3f), and the casts back.
  const double backward = casts + 6 * e + 13 * f;
  return {forward / e, backward / e};
}

ElementwisePasses Activation(const ModelSpec& model, bool eager) {
  // Squared ReLU eagerly: relu then its square, two kernels each way (read, write; backward read
  // two, write one).
  if (model.mlp == MlpKind::kRelu2) return eager ? ElementwisePasses{4, 6} : ElementwisePasses{2, 4};
  if (model.mlp != MlpKind::kSwiGlu) return {2, 4};
  if (!eager) return {3, 6};
  // silu(gate) (read, write), then its product with up (two reads, a write); backward: the
  // product's two gradients (three passes each) and silu's (three).
  return {5, 9};
}

}  // namespace

ElementwisePasses NormPasses(const ModelSpec& model, const PlanSpec& plan, double e) { return Norm(model, EagerNorms(plan), e); }

ElementwisePasses ActivationPasses(const ModelSpec& model, const PlanSpec& plan, double) { return Activation(model, EagerElementwise(plan)); }

ElementwisePasses FusedNormPasses(const ModelSpec& model) { return Norm(model, false, 2); }

ElementwisePasses FusedActivationPasses(const ModelSpec& model) { return Activation(model, false); }

ElementwisePasses RopePasses(const PlanSpec& plan, double e) {
  if (!EagerElementwise(plan)) return {2, 2};
  const double f = kFp32;
  // x.float() (e + f), the complex product (2f), type_as (f + e); the backward the same in reverse.
  const double passes = (e < f ? 2 * (e + f) : 0) + 2 * f;
  return {passes / e, passes / e};
}

}  // namespace shardsim::strategies
