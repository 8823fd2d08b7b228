// Builds a LayerProgram from forward pieces: each piece is a forward op and the backward ops it
// implies (a matmul's input gradient and weight gradient; a collective's conjugate), so every
// strategy states its forward work once and the backward follows in reverse order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strategies/step_program.h"

namespace shardsim::strategies {

// Shapes of one micro-batch on one device. Letters as in docs/domain.md.
struct LayerShape {
  int64_t tokens = 0;          // b x S / context: tokens this device's attention queries cover
  int64_t seq_len = 0;         // S: the full sequence (keys each query can see)
  int64_t tensor = 1;          // t
  bool sequence_parallel = false;
  double element_bytes = 2;    // activations and weights (bf16)
  // An FP8 product's share of its weight's cast per micro-batch, forward and input gradient
  // (WeightCastShares): the dense weights', and the routed experts' (sharded their own way).
  double weight_cast_forward = 1, weight_cast_backward = 1;
  double expert_weight_cast_forward = 1, expert_weight_cast_backward = 1;
  // Whether the weight-gradient products run at 16 bits in an fp8 plan (SixteenBitWgrad).
  bool sixteen_bit_wgrad = false;
  // Whether the plan's products run in FP8 (dtype fp8), which SixteenBitMatmul's keep out of.
  bool fp8 = false;
};

class LayerBuilder {
 public:
  LayerBuilder(LayerKind kind, LayerShape shape) : kind_(kind), shape_(shape) {}

  const LayerShape& shape() const { return shape_; }
  LayerKind kind() const { return kind_; }

  // out[m, n] = in[m, k] x W[k, n]: forward 2mkn FLOPs; backward input 2mkn, weight 2mkn.
  // `expert_weight`: W is a routed expert's (its FP8 cast shares are the experts').
  void Matmul(std::string_view name, int64_t m, int64_t k, int64_t n, bool expert_weight = false);
  // The same product kept at 16 bits in an fp8 plan (Op::sixteen_bit; an ordinary product in others).
  void SixteenBitMatmul(std::string_view name, int64_t m, int64_t k, int64_t n);
  // A memory-bound op reading and writing `bytes` forward, `backward_factor` x that backward.
  void Elementwise(std::string_view name, double bytes, double backward_factor = 2.0);
  // Attention core (QK^T, softmax, AV): `flops` forward, 2x backward; `bytes` of Q, K, V, O.
  void Attention(std::string_view name, double flops, double bytes);
  // A Mamba-2 mixer's chunked scan: `flops` forward, 2x backward (the states recomputed and the
  // four products' gradients); `bytes` of x, B, C, dt and y.
  void Scan(std::string_view name, double flops, double bytes);
  // A collective forward on `stream`, and its conjugate backward (pass kind "none" by giving
  // has_forward/has_backward false). Megatron's f and g operators are such pairs.
  void Collective(std::string_view name, Stream stream, std::vector<std::string> axes, double bytes, bool has_forward,
                  CollectiveOp forward, bool has_backward, CollectiveOp backward, bool overlapped, int64_t repeat = 1);
  // The same pair where the backward moves `backward_bytes` (another width than the forward's:
  // FP8 expert dispatch), both routed as `routing` says (an expert all-to-all's tokens), their
  // kernels on `comm_units` compute units (Op::comm_units).
  void Collective(std::string_view name, Stream stream, std::vector<std::string> axes, double forward_bytes, CollectiveOp forward,
                  double backward_bytes, CollectiveOp backward, bool overlapped, TokenRouting routing = {}, int64_t comm_units = 0);
  // An op appended as is (already in its phase), e.g. the loss.
  void Raw(Op op);

  // Forward ops in order, then B ops in reverse piece order, then W ops in reverse piece order.
  LayerProgram Build() const;

 private:
  struct Piece {
    std::vector<Op> forward, backward_input, backward_weight;
  };
  LayerKind kind_;
  LayerShape shape_;
  std::vector<Piece> pieces_;
};

}  // namespace shardsim::strategies
