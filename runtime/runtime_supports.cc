// What the runtime cannot run, refused in one line before anything is built (stage_model.h).
#include "core/error.h"
#include "core/suggest.h"
#include "runtime/stage_model.h"

namespace shardsim::runtime {

void CheckRuntimeSupports(const ModelSpec& m, const PlanSpec& p, const std::string& context_kv) {
  auto refuse = [](const std::string& where, const std::string& what, const std::string& valid) {
    throw InputError(where, what + ": the runtime does not implement it yet", valid, "plan and estimate it with shardsim plan / estimate instead");
  };
  if (m.moe && p.mesh.tensor > 1 && !p.sequence_parallel) {
    // Megatron-core's MoELayer refuses it too ("performance may degrade if MoE and tensor
    // parallelism are enabled without also enabling sequence parallelism"): each tensor rank
    // routes its own share of the tokens.
    refuse("plan:/sequence_parallel", "tensor parallelism of MoE layers without sequence parallelism", "sequence_parallel true with tensor > 1");
  }
  if (m.moe && m.moe->expert_ffn_hidden_size % p.mesh.tensor != 0) {
    refuse("plan:/mesh/tensor", "tensor not dividing the experts' width", "a divisor of expert_ffn_hidden_size");
  }
  if (m.linear_bias && m.mlp == MlpKind::kSwiGlu) refuse("model/linear_bias", "linear biases with a SwiGLU MLP", "linear_bias with a GELU MLP (GPT), or qkv_bias");
  if (m.moe && m.mlp != MlpKind::kSwiGlu) refuse("model/mlp", "GELU experts", "swiglu with an MoE model");
  if (m.mla && m.mla->qk_rope_head_dim % 2 != 0) refuse("model/mla/qk_rope_head_dim", "an odd qk_rope_head_dim (RoPE rotates pairs)", "an even one");
  if (m.mla && m.position != PositionKind::kRope) refuse("model/position", "MLA with " + ToString(m.position) + " positions", "rope (MLA's shared key part carries RoPE)");
  if (m.mla && m.num_kv_heads != m.num_heads) refuse("model/num_kv_heads", "MLA with fewer K/V heads than heads", "num_kv_heads = num_heads with MLA");
  if (!m.mla && m.num_heads * m.head_dim != m.hidden_size) refuse("model/head_dim", "head_dim x heads != hidden_size", "head_dim = hidden_size / heads");
  if (m.mtp_layers > 0) refuse("model/mtp_layers", "multi-token-prediction modules", "mtp_layers 0");
  if (IsHybrid(m)) refuse("model/hybrid_pattern", "a hybrid model's layers (Mamba-2 mixers, lone attention and MLP blocks)", "a transformer model without hybrid_pattern");
  if (m.mlp == MlpKind::kRelu2) refuse("model/mlp", "a squared-ReLU MLP", "swiglu or gelu");
  if (m.moe && m.moe->latent_size > 0) refuse("model/moe/latent_size", "LatentMoE's latent projections", "latent_size 0");
  if (m.sliding_window) refuse("model/sliding_window", "sliding-window attention (local layers)", "a model without sliding_window");
  if (m.vocab_size < 256) refuse("model/vocab_size", "a vocabulary smaller than the 256 bytes of the byte-level corpus", "256 or more");
  if (!m.mla && m.position == PositionKind::kRope && m.head_dim % 2 != 0) refuse("model/head_dim", "an odd head_dim (RoPE rotates pairs)", "an even head_dim");
  if (m.ffn_hidden_size % p.mesh.tensor != 0) refuse("plan:/mesh/tensor", "tensor not dividing ffn_hidden_size", "a divisor of ffn_hidden_size");
  if (p.mesh.context > 1 && p.context_kv != context_kv) {
    throw InputError("plan:/context_kv", "context_kv " + p.context_kv + ": " + (context_kv == "ring" ? "the CPU" : "the GPU") + " runtime does not implement it",
                     context_kv == "ring" ? "ring (the CPU runtime passes K/V around the ring)" : "all-gather (the GPU path gathers the group's K/V)",
                     "--set context_kv=" + context_kv + " (the same sums; other transfers)");
  }
  if (p.recompute != Recompute::kNone && p.recompute != Recompute::kSelective && p.recompute != Recompute::kFull) {
    refuse("plan:/recompute", "recompute " + ToString(p.recompute), "none, selective or full");
  }
  if (p.ep_dispatcher == "deepep") {
    refuse("plan:/ep_dispatcher", "a deduplicating expert dispatcher (DeepEP)", "alltoall (its MPI all-to-alls send every routed copy)");
  }
  if (EagerElementwise(p)) {
    refuse("plan:/elementwise_kernels", p.elementwise_kernels + " elementwise kernels (PyTorch primitives' extra memory traffic)", "fused (its own kernels read and write each tensor once)");
  }
  if (p.expert_routing == "round-robin") {
    refuse("plan:/expert_routing", "round-robin expert routing", "uniform (its router picks each token's top-k by score)");
  }
  if (!p.expert_axes.empty() && p.expert_axes != std::vector<std::string>{"expert"}) {
    refuse("plan:/expert_axes", "experts folded over " + JoinNames(p.expert_axes) + " (MoE parallel folding)",
           "expert_axes unset or [\"expert\"] (the runtime splits experts over its expert axis)");
  }
  if (p.repeat_kv && !m.mla && m.num_kv_heads < m.num_heads) {
    refuse("plan:/repeat_kv", "K/V repeated to every query head before the attention", "false (the runtime's attention reads the shared K/V heads)");
  }
  if (p.offload_layers > 0) {
    refuse("plan:/offload_layers", "activation offloading to host memory", "0 (a CPU rank's activations are in host memory already)");
  }
  if (!p.flash_attention) refuse("plan:/flash_attention", "an unfused attention kernel", "true (the runtime's attention is blockwise)");
  if (m.vocab_size % p.mesh.tensor != 0) refuse("plan:/mesh/tensor", "tensor not dividing vocab_size (the vocabulary is split over tensor)", "a divisor of vocab_size");
  if (p.zero_stage == 2 && p.mesh.fsdp > 1) {
    refuse("plan:/zero_stage", "ZeRO-2 with fsdp > 1 (gradients and parameters sharded over different groups)", "0, 1 or 3 with fsdp");
  }
}

}  // namespace shardsim::runtime
