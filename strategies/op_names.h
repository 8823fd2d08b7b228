// The names of the step program's ops, one constant each, used by the strategies that emit
// them and by the runtime that executes them: a trace of a step and the program list the same
// ops under the same keys (op_keys.h). Backward ops are named from their forward op.
#pragma once

#include <string>
#include <string_view>

namespace shardsim::strategies::ops {

// Attention block (tensor_parallel.cc).
inline constexpr std::string_view kAttentionNorm = "attention_norm";
// Eager rotary embedding's own kernels (elementwise_kernels eager); fused, none.
inline constexpr std::string_view kRope = "rope";
inline constexpr std::string_view kTensorEnterAttention = "tp_enter_attention";
inline constexpr std::string_view kQkv = "qkv";
inline constexpr std::string_view kQ = "q", kQDown = "q_down", kQUp = "q_up", kKvDown = "kv_down",
                                  kKvUp = "kv_up";  // MLA
inline constexpr std::string_view kAttention = "attention";
inline constexpr std::string_view kAttentionScores = "attention_scores";
inline constexpr std::string_view kAttentionOut = "attention_out";
inline constexpr std::string_view kTensorExitAttention = "tp_exit_attention";
inline constexpr std::string_view kAttentionResidual = "attention_residual";

// An MLP block "<block>_<part>": the dense layer's (kMlp) and the MoE layer's shared experts
// (kSharedExpert).
inline constexpr std::string_view kMlp = "mlp", kSharedExpert = "shared_expert";
inline std::string BlockNorm(std::string_view block) { return std::string(block) + "_norm"; }
inline std::string BlockUp(std::string_view block) { return std::string(block) + "_up"; }
inline std::string BlockActivation(std::string_view block) {
  return std::string(block) + "_activation";
}
inline std::string BlockDown(std::string_view block) { return std::string(block) + "_down"; }
inline std::string BlockResidual(std::string_view block) {
  return std::string(block) + "_residual";
}
inline std::string TensorEnter(std::string_view block) { return "tp_enter_" + std::string(block); }
inline std::string TensorExit(std::string_view block) { return "tp_exit_" + std::string(block); }
// Sequence parallelism keeps a tensor-parallel region's input as this rank's shard and gathers it
// again in backward for the weight gradients (Megatron-LM's sequence-parallel linears): the
// second all-gather of the region entered by `enter`.
inline std::string Regather(std::string_view enter) { return std::string(enter) + "_regather"; }
// A regather, or its backward op (named by Grad).
inline bool IsRegather(std::string_view name) { return name.find("_regather") != std::string_view::npos; }

// A hybrid model's Mamba-2 block (mamba_layer.cc): its norm, enter, exit and residual are
// BlockNorm / TensorEnter / TensorExit / BlockResidual of kMamba.
inline constexpr std::string_view kMamba = "mamba";
inline constexpr std::string_view kMambaIn = "mamba_in", kMambaConv = "mamba_conv", kSsd = "ssd", kMambaGatedNorm = "mamba_gated_norm",
                                  kMambaOut = "mamba_out";
// Context parallelism's all-to-alls around the scan, one per tensor as Megatron-core sends them:
// z and x, B and C, dt to the heads' whole sequences, y back to the tokens; and their layout copies.
inline constexpr std::string_view kMambaZxToHeads = "mamba_zx_to_heads", kMambaBcToHeads = "mamba_bc_to_heads", kMambaDtToHeads = "mamba_dt_to_heads",
                                  kMambaToSequence = "mamba_y_to_sequence", kMambaContextLayout = "mamba_context_layout";
// Whether `name` is one of those all-to-alls (a forward op's name).
constexpr bool IsMambaContextExchange(std::string_view name) {
  return name == kMambaZxToHeads || name == kMambaBcToHeads || name == kMambaDtToHeads || name == kMambaToSequence;
}

// Context parallelism (context_parallel.cc): ring K/V passes and the dK/dV trip home.
inline constexpr std::string_view kContextKv = "cp_kv", kContextDkv = "cp_dkv",
                                  kContextKvAllGather = "cp_kv_allgather";

// Activation offloading (build_step.cc): a layer's kept activations copied to host memory in
// forward and back before its backward, on the host stream.
inline constexpr std::string_view kOffload = "offload", kReload = "reload";

// MoE block (expert_parallel.cc).
inline constexpr std::string_view kMoeNorm = "moe_norm";
inline constexpr std::string_view kRouter = "router";
inline constexpr std::string_view kRouterCounts = "router_counts";
// The routed copies gathered from the tokens, grouped by expert for the dispatch (Megatron-core's
// moe_utils.permute; its gradient scatters them back).
inline constexpr std::string_view kMoePermute = "moe_permute";
inline constexpr std::string_view kExpertDispatch = "ep_dispatch";
inline constexpr std::string_view kLatentDown = "moe_latent_down", kLatentUp = "moe_latent_up";  // LatentMoE's projections
inline constexpr std::string_view kTensorEnterExperts = "tp_enter_experts";
// The received rows sorted by local expert for the grouped products and back after them
// (Megatron-core's sort_chunks_by_idxs, its flex dispatcher's permute after DeepEP's dispatch).
inline constexpr std::string_view kExpertsSort = "experts_sort", kExpertsUnsort = "experts_unsort";
inline constexpr std::string_view kExpertsUp = "experts_up",
                                  kExpertsActivation = "experts_activation",
                                  kExpertsDown = "experts_down";
inline constexpr std::string_view kTensorExitExperts = "tp_exit_experts";
inline constexpr std::string_view kExpertCombine = "ep_combine";
inline constexpr std::string_view kMoeCombine = "moe_combine";

// Embedding and head (tensor_parallel.cc): vocabulary-parallel, with the cross-entropy's two
// reductions over tensor (the row maximum, then the sum of exponentials with the target logit).
inline constexpr std::string_view kEmbedding = "embedding";
inline constexpr std::string_view kTensorEmbedding = "tp_embedding";
inline constexpr std::string_view kFinalNorm = "final_norm";
inline constexpr std::string_view kTensorEnterHead = "tp_enter_head";
inline constexpr std::string_view kLogits = "logits";
inline constexpr std::string_view kCrossEntropy = "cross_entropy";
inline constexpr std::string_view kTensorLossMax = "tp_loss_max", kTensorLossSum = "tp_loss_sum";

// A multi-token-prediction module's entry (tensor_parallel.cc): the norms of the previous
// depth's hidden state and of the next token's embedding, and the 2D -> D projection of their
// concatenation, row-parallel over tensor.
inline constexpr std::string_view kMtpNorms = "mtp_norms";
inline constexpr std::string_view kTensorEnterMtp = "tp_enter_mtp";
inline constexpr std::string_view kMtpProjection = "mtp_projection";
inline constexpr std::string_view kTensorExitMtp = "tp_exit_mtp";

// Sharded parameters (data_parallel.cc), "<op>_<kind>" for kind dense or expert.
inline constexpr std::string_view kDense = "dense", kExpert = "expert";
inline std::string ParamAllGather(std::string_view kind) {
  return "param_allgather_" + std::string(kind);
}
inline std::string ParamAllGatherBackward(std::string_view kind) {
  return ParamAllGather(kind) + "_backward";
}
inline std::string GradReduceScatter(std::string_view kind) {
  return "grad_reduce_scatter_" + std::string(kind);
}
inline std::string DataAllReduce(std::string_view kind) {
  return "dp_allreduce_" + std::string(kind);
}
inline std::string DataReduceScatter(std::string_view kind) {
  return "dp_reduce_scatter_" + std::string(kind);
}
inline std::string ZeroParamAllGather(std::string_view kind) {
  return "zero_param_allgather_" + std::string(kind);
}
inline std::string StepParamAllGather(std::string_view kind) {
  return "fsdp_step_allgather_" + std::string(kind);
}
inline std::string StepGradReduceScatter(std::string_view kind) {
  return "fsdp_step_reduce_scatter_" + std::string(kind);
}
// Sequence parallelism's replicated weights (norms) see a share of the tokens on each tensor
// rank: their gradients are summed over tensor once per step.
inline constexpr std::string_view kTensorReplicatedGrads = "tp_replicated_grad_allreduce";
inline constexpr std::string_view kOptimizer = "optimizer";
inline constexpr std::string_view kTiedEmbeddingSync = "tied_embedding_grad_sync",
                                  kDualPipeCopySync = "dualpipe_copy_grad_sync";

// Pipeline point-to-point, per task of a chunk that has a neighbour on its path.
inline constexpr std::string_view kPipelineSend = "pp_send";
inline constexpr std::string_view kRecvForward = "pp_recv_forward",
                                  kSendForward = "pp_send_forward";
inline constexpr std::string_view kRecvBackward = "pp_recv_backward",
                                  kSendBackward = "pp_send_backward";

// Backward ops named from their forward op: a matmul's input gradient (B) and weight gradient
// (W), anything else's gradient (B).
inline std::string Dgrad(std::string_view op) { return std::string(op) + "_dgrad"; }
inline std::string Wgrad(std::string_view op) { return std::string(op) + "_wgrad"; }
inline std::string Grad(std::string_view op) { return std::string(op) + "_grad"; }
// A forward op redone before backward (activation recomputation).
inline std::string Recomputed(std::string_view op) { return std::string(op) + "_recompute"; }

}  // namespace shardsim::strategies::ops
