#include "core/model_spec.h"

#include <algorithm>

#include "core/error.h"
#include "core/units.h"

namespace shardsim {
namespace {

// Checked arithmetic bound to one message, so every count derived from user sizes either fits
// in 64 bits or is reported as an error.
struct Counter {
  std::string where;
  int64_t Mul(int64_t a, int64_t b) const { return CheckedMul(a, b, where); }
  int64_t Mul(int64_t a, int64_t b, int64_t c) const { return Mul(Mul(a, b), c); }
  int64_t Add(int64_t a, int64_t b) const { return CheckedAdd(a, b, where); }
};

int64_t NormParams(const ModelSpec& m) { return m.norm == NormKind::kLayerNorm ? 2 * m.hidden_size : m.hidden_size; }

// One MLP of width `width` over rows of `input` (the hidden size, or a LatentMoE's latent width
// for routed experts): GELU has up and down, SwiGLU gate, up and down.
int64_t MlpParams(const ModelSpec& m, int64_t width, const Counter& c, int64_t input = 0) {
  const int64_t matrices = m.mlp == MlpKind::kSwiGlu ? 3 : 2, rows = input > 0 ? input : m.hidden_size;
  int64_t params = c.Mul(matrices, rows, width);
  if (m.linear_bias) params = c.Add(params, (matrices - 1) * width + rows);
  return params;
}

// A MoE layer's router and, with LatentMoE, its two projections, with their biases under
// linear_bias (gpt-oss's router is biased).
int64_t RouterParams(const ModelSpec& m, const Counter& c) {
  const int64_t latent = m.moe->latent_size;
  const int64_t biases = m.linear_bias ? m.moe->num_experts + (latent > 0 ? latent + m.hidden_size : 0) : 0;
  return c.Add(c.Add(c.Mul(m.hidden_size, m.moe->num_experts), c.Mul(2, m.hidden_size, latent)), biases);
}

int64_t AttentionParams(const ModelSpec& m, const Counter& c) {
  const int64_t d = m.hidden_size;
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    const int64_t qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
    int64_t q = 0;
    if (a.q_lora_rank > 0) {
      q = c.Add(c.Add(c.Mul(d, a.q_lora_rank), a.q_lora_rank), c.Mul(a.q_lora_rank, m.num_heads, qk_dim));
    } else {
      q = c.Mul(d, m.num_heads, qk_dim);
    }
    const int64_t kv_down = c.Add(c.Mul(d, a.kv_lora_rank + a.qk_rope_head_dim), a.kv_lora_rank);
    const int64_t kv_up = c.Mul(a.kv_lora_rank, m.num_heads, a.qk_nope_head_dim + a.v_head_dim);
    const int64_t out = c.Mul(m.num_heads, a.v_head_dim, d);
    return c.Add(c.Add(q, kv_down), c.Add(kv_up, out));
  }
  const int64_t q_width = c.Mul(m.num_heads, m.head_dim);
  const int64_t kv_width = c.Mul(m.num_kv_heads, m.head_dim);
  int64_t params = c.Mul(d, c.Add(c.Mul(2, q_width), c.Mul(2, kv_width)));
  if (m.linear_bias) params = c.Add(params, q_width + 2 * kv_width + d);
  if (m.qkv_bias && !m.linear_bias) params = c.Add(params, q_width + 2 * kv_width);
  return params;
}

// One Mamba-2 mixer: the input projection (z, x, B, C, dt), the convolution's weights and bias
// over x, B and C, dt's bias, A and D per head, the gated norm over d_inner, the output projection.
struct MambaCounts {
  int64_t all = 0, matmul = 0;
};
MambaCounts MambaParams(const ModelSpec& m, const Counter& c) {
  if (!m.mamba) return {};
  const MambaSpec& s = *m.mamba;
  const int64_t inner = c.Mul(s.num_heads, s.head_dim), bc = c.Mul(2, s.groups, s.state_size);
  const int64_t in_width = c.Add(c.Add(c.Mul(2, inner), bc), s.num_heads);
  const int64_t matmul = c.Add(c.Mul(m.hidden_size, in_width), c.Mul(inner, m.hidden_size));
  const int64_t conv = c.Mul(c.Add(inner, bc), s.conv_kernel + 1);
  return {.all = c.Add(c.Add(matmul, conv), c.Add(c.Mul(3, s.num_heads), inner)), .matmul = matmul};
}

void RequirePositive(int64_t value, const std::string& where, const char* field) {
  if (value <= 0) {
    throw InputError(where + "/" + field, std::string(field) + "=" + std::to_string(value) + " must be positive",
                     "a whole number >= 1");
  }
}

// moe/groups and moe/group_top_k: both or neither; the groups split the experts evenly and the
// chosen ones, at most all of them, hold at least top_k experts. One group limits nothing.
void ValidateRoutingGroups(const MoeSpec& e, const std::string& w) {
  if (e.groups == 0 && e.group_top_k == 0) return;
  if (e.groups == 0 || e.group_top_k == 0) {
    const std::string missing = e.groups == 0 ? "groups" : "group_top_k", given = e.groups == 0 ? "group_top_k" : "groups";
    throw InputError(w + "/" + missing, given + " without " + missing + ": group-limited routing needs both", "both groups and group_top_k, or neither",
                     "DeepSeek-V3 sets groups 8 and group_top_k 4 (n_group, topk_group)");
  }
  if (e.groups < 1 || e.num_experts % e.groups != 0) {
    throw InputError(w + "/groups", "groups=" + std::to_string(e.groups) + " does not split num_experts=" + std::to_string(e.num_experts) + " into equal groups",
                     "a divisor of num_experts", "DeepSeek-V3 routes within 8 groups of its 256 experts (n_group)");
  }
  if (e.group_top_k < 1 || e.group_top_k > e.groups) {
    throw InputError(w + "/group_top_k", "group_top_k=" + std::to_string(e.group_top_k) + " with groups=" + std::to_string(e.groups),
                     "1 to groups=" + std::to_string(e.groups), "a token's experts come from group_top_k of the groups");
  }
  const int64_t per_group = e.num_experts / e.groups;
  if (e.group_top_k * per_group < e.top_k) {
    const int64_t least = (e.top_k + per_group - 1) / per_group;
    throw InputError(w + "/group_top_k",
                     "group_top_k=" + std::to_string(e.group_top_k) + " groups of " + std::to_string(per_group) + " experts cannot hold top_k=" +
                         std::to_string(e.top_k) + " experts",
                     std::to_string(least) + " to " + std::to_string(e.groups), "DeepSeek-V3 picks 4 of its 8 groups of 32 (topk_group)");
  }
}

}  // namespace

bool IsHybrid(const ModelSpec& model) { return !model.hybrid_pattern.empty(); }

int64_t RoutedWidth(const ModelSpec& model) {
  if (!model.moe) return 0;
  return model.moe->latent_size > 0 ? model.moe->latent_size : model.hidden_size;
}

int64_t NumHybridLayers(const ModelSpec& model, char kind) {
  if (!IsHybrid(model)) return kind == kHybridAttention ? model.num_layers : 0;
  return static_cast<int64_t>(std::count(model.hybrid_pattern.begin(), model.hybrid_pattern.end(), kind));
}

bool IsMoeLayer(const ModelSpec& model, int64_t layer) {
  if (!model.moe) return false;
  if (IsHybrid(model)) return layer >= 0 && layer < static_cast<int64_t>(model.hybrid_pattern.size()) && model.hybrid_pattern[static_cast<size_t>(layer)] == kHybridMoe;
  if (layer < model.moe->first_dense_layers) return false;
  return (layer - model.moe->first_dense_layers) % model.moe->layer_interval == 0;
}

int64_t NumMoeLayers(const ModelSpec& model) {
  if (IsHybrid(model)) return model.moe ? NumHybridLayers(model, kHybridMoe) : 0;
  if (!model.moe || model.num_layers <= model.moe->first_dense_layers) return 0;
  const int64_t candidates = model.num_layers - model.moe->first_dense_layers;
  return (candidates + model.moe->layer_interval - 1) / model.moe->layer_interval;
}

bool MtpLayerIsMoe(const ModelSpec& model) { return IsMoeLayer(model, model.num_layers); }

bool IsLocalAttentionLayer(const ModelSpec& model, int64_t layer) {
  if (!model.sliding_window) return false;
  const int64_t every = model.sliding_window->global_every;
  return every == 0 || (layer + 1) % every != 0;
}

int64_t NumLocalAttentionLayers(const ModelSpec& model) {
  if (!model.sliding_window) return 0;
  const int64_t every = model.sliding_window->global_every;
  return every == 0 ? model.num_layers : model.num_layers - model.num_layers / every;
}

double CausalKeysPerQuery(const ModelSpec& model, bool local, int64_t seq_len) {
  const double s = static_cast<double>(seq_len);
  const double w = local && model.sliding_window ? std::min(s, static_cast<double>(model.sliding_window->window)) : s;
  return w - w * w / (2 * s);
}

ParamCounts CountParams(const ModelSpec& m) {
  const Counter c{"model '" + m.name + "'"};
  ParamCounts p;
  p.embedding = c.Mul(m.vocab_size, m.hidden_size);
  if (m.position == PositionKind::kLearned) p.embedding = c.Add(p.embedding, c.Mul(m.max_seq_len, m.hidden_size));
  p.head = m.tied_embeddings ? 0 : c.Mul(m.vocab_size, m.hidden_size);
  p.per_layer_attention = AttentionParams(m, c);
  p.attention = c.Mul(p.per_layer_attention, NumHybridLayers(m, kHybridAttention));
  // Two pre-norms per transformer layer, one per hybrid layer; the final norm.
  p.norms = c.Add(c.Mul((IsHybrid(m) ? 1 : 2) * m.num_layers, NormParams(m)), NormParams(m));
  const MambaCounts mixer = MambaParams(m, c);
  p.mamba = c.Mul(mixer.all, NumHybridLayers(m, kHybridMamba));
  p.mamba_matmul = c.Mul(mixer.matmul, NumHybridLayers(m, kHybridMamba));

  const int64_t moe_layers = NumMoeLayers(m);
  const int64_t dense_layers = IsHybrid(m) ? NumHybridLayers(m, kHybridMlp) : m.num_layers - moe_layers;
  p.dense_mlp = c.Mul(dense_layers, MlpParams(m, m.ffn_hidden_size, c));
  int64_t active_experts = 0;
  if (m.moe) {
    const int64_t expert = MlpParams(m, m.moe->expert_ffn_hidden_size, c, RoutedWidth(m)), shared = MlpParams(m, m.moe->expert_ffn_hidden_size, c);
    p.routed_experts = c.Mul(moe_layers, m.moe->num_experts, expert);
    p.shared_experts = c.Mul(moe_layers, m.moe->num_shared_experts, shared);
    p.router = c.Mul(moe_layers, RouterParams(m, c));
    active_experts = c.Mul(moe_layers, m.moe->top_k, expert);
  }
  const int64_t shared = c.Add(c.Add(c.Add(c.Add(p.embedding, p.head), c.Add(p.attention, p.norms)),
                                     c.Add(c.Add(p.dense_mlp, p.shared_experts), p.router)),
                               p.mamba);
  p.total = c.Add(shared, p.routed_experts);
  p.active = c.Add(shared, active_experts);
  if (m.mtp_layers > 0) {
    // Per module: the two input norms, the 2D -> D projection, the layer (attention, its two
    // norms, its MLP or experts) and the head's own norm.
    const int64_t entry = c.Add(c.Mul(3, NormParams(m)), c.Mul(2, m.hidden_size, m.hidden_size));
    int64_t all = c.Add(c.Add(entry, p.per_layer_attention), c.Mul(2, NormParams(m))), active = all;
    if (MtpLayerIsMoe(m)) {
      const int64_t expert = MlpParams(m, m.moe->expert_ffn_hidden_size, c, RoutedWidth(m));
      const int64_t shared_and_router = c.Add(c.Mul(m.moe->num_shared_experts, MlpParams(m, m.moe->expert_ffn_hidden_size, c)), RouterParams(m, c));
      all = c.Add(all, c.Add(shared_and_router, c.Mul(m.moe->num_experts, expert)));
      active = c.Add(active, c.Add(shared_and_router, c.Mul(m.moe->top_k, expert)));
    } else {
      all = c.Add(all, MlpParams(m, m.ffn_hidden_size, c));
      active = all;
    }
    p.mtp = c.Mul(m.mtp_layers, all);
    p.mtp_active = c.Mul(m.mtp_layers, active);
  }
  return p;
}

FlopsPerToken ForwardFlopsPerToken(const ModelSpec& m, int64_t seq_len) {
  const ParamCounts p = CountParams(m);
  FlopsPerToken f;
  // Every weight that takes part in a matmul costs 2 FLOPs per token; embeddings are lookups,
  // norms and biases are not matmuls.
  const int64_t matmul_params = p.active - p.embedding - p.norms - (p.mamba - p.mamba_matmul);
  f.matmul = 2.0 * static_cast<double>(matmul_params);
  const double head = 2.0 * static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size);
  if (m.tied_embeddings) f.matmul += head;
  // Each multi-token-prediction module: its own products (norms aside) and the shared head again.
  const double mtp = static_cast<double>(m.mtp_layers);
  if (m.mtp_layers > 0) f.matmul += 2.0 * static_cast<double>(p.mtp_active - m.mtp_layers * 5 * NormParams(m)) + mtp * head;
  const double qk_dim = m.mla ? static_cast<double>(m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim)
                              : static_cast<double>(m.head_dim);
  const double v_dim = m.mla ? static_cast<double>(m.mla->v_head_dim) : static_cast<double>(m.head_dim);
  const double per_key = 2.0 * static_cast<double>(m.num_heads) * (qk_dim + v_dim);
  const double attention_layers = static_cast<double>(NumHybridLayers(m, kHybridAttention));
  const double local = static_cast<double>(NumLocalAttentionLayers(m)), global = attention_layers - local;
  f.attention = per_key * static_cast<double>(seq_len) * (attention_layers + mtp);
  f.scan = static_cast<double>(NumHybridLayers(m, kHybridMamba)) * MambaScanFlopsPerToken(m, seq_len);
  f.causal_attention = per_key * ((global + mtp) * CausalKeysPerQuery(m, false, seq_len) + local * CausalKeysPerQuery(m, true, seq_len));
  return f;
}

TokenRouting DispatchRouting(const ModelSpec& m) {
  if (!m.moe) return {};
  return TokenRouting{m.moe->num_experts, m.moe->top_k, m.moe->groups, m.moe->group_top_k};
}

double MambaScanFlopsPerToken(const ModelSpec& m, int64_t seq_len) {
  if (!m.mamba) return 0;
  const MambaSpec& s = *m.mamba;
  const double q = static_cast<double>(std::min(s.chunk_size, seq_len)), n = static_cast<double>(s.state_size), p = static_cast<double>(s.head_dim);
  const double h = static_cast<double>(s.num_heads), g = static_cast<double>(s.groups);
  // Per token: the diagonal blocks' C B^T per group (2QN) and their product with X per head
  // (2QP); the chunk states B^T X and their read-out C h per head (2NP each). The convolution's
  // 2K per channel is left out (under 0.2% of the mixer).
  return 2 * q * n * g + h * (2 * q * p + 4 * n * p);
}

namespace {

void ValidateHybrid(const ModelSpec& m, const std::string& where) {
  const std::string w = where + "/hybrid_pattern";
  if (!IsHybrid(m)) {
    if (m.mamba) throw InputError(where + "/mamba", "a mamba spec without hybrid_pattern", "a hybrid_pattern with 'M' layers", "say which layers are Mamba-2 mixers");
    return;
  }
  const size_t bad = m.hybrid_pattern.find_first_not_of("M*-E");
  if (bad != std::string::npos) {
    throw InputError(w, std::string("layer ") + std::to_string(bad) + " is '" + m.hybrid_pattern[bad] + "'",
                     "M (Mamba-2), * (attention), - (MLP), E (mixture of experts)", "Megatron-core's --hybrid-layer-pattern without its '|' stage marks");
  }
  if (static_cast<int64_t>(m.hybrid_pattern.size()) != m.num_layers) {
    throw InputError(w, "hybrid_pattern has " + std::to_string(m.hybrid_pattern.size()) + " layers, num_layers=" + std::to_string(m.num_layers),
                     "one character per layer", "set num_layers to the pattern's length");
  }
  if (NumHybridLayers(m, kHybridMamba) > 0 && !m.mamba) {
    throw InputError(where + "/mamba", "hybrid_pattern has Mamba-2 layers but no mamba spec", "{num_heads, head_dim, state_size, groups}", "add the mixer's sizes");
  }
  if (NumHybridLayers(m, kHybridMoe) > 0 && !m.moe) throw InputError(w, "hybrid_pattern has MoE layers ('E') but no moe spec", "a moe object", "add the experts' sizes");
  if (m.moe && NumHybridLayers(m, kHybridMoe) == 0) throw InputError(where + "/moe", "a moe spec but no 'E' layer in hybrid_pattern", "'E' layers", "drop the moe object");
  if (m.moe && (m.moe->first_dense_layers != 0 || m.moe->layer_interval != 1)) {
    throw InputError(where + "/moe", "first_dense_layers and layer_interval in a hybrid model", "0 and 1 (leave them out)",
                     "hybrid_pattern's 'E' marks the MoE layers");
  }
  if (NumHybridLayers(m, kHybridMlp) > 0) RequirePositive(m.ffn_hidden_size, where, "ffn_hidden_size");
  auto unsupported = [&](bool present, const char* field, const std::string& what) {
    if (present) throw InputError(where + "/" + field, what + " in a hybrid model is not modelled", "leave it out of a hybrid model", "or write the model without hybrid_pattern");
  };
  unsupported(m.mla.has_value(), "mla", "multi-head latent attention");
  unsupported(m.sliding_window.has_value(), "sliding_window", "sliding-window attention");
  unsupported(m.mtp_layers > 0, "mtp_layers", "multi-token prediction");
  unsupported(m.dropout, "dropout", "dropout");
  if (m.mamba) {
    const MambaSpec& s = *m.mamba;
    const std::string mw = where + "/mamba";
    RequirePositive(s.num_heads, mw, "num_heads");
    RequirePositive(s.head_dim, mw, "head_dim");
    RequirePositive(s.state_size, mw, "state_size");
    RequirePositive(s.groups, mw, "groups");
    RequirePositive(s.conv_kernel, mw, "conv_kernel");
    RequirePositive(s.chunk_size, mw, "chunk_size");
    if (s.num_heads % s.groups != 0) {
      throw InputError(mw + "/groups", "groups=" + std::to_string(s.groups) + " must divide num_heads=" + std::to_string(s.num_heads), "a divisor of num_heads",
                       "each group's B and C serve num_heads/groups heads");
    }
  }
}

}  // namespace

void ValidateModel(const ModelSpec& m, const std::string& where) {
  ValidateHybrid(m, where);
  RequirePositive(m.num_layers, where, "num_layers");
  RequirePositive(m.hidden_size, where, "hidden_size");
  RequirePositive(m.num_heads, where, "num_heads");
  RequirePositive(m.num_kv_heads, where, "num_kv_heads");
  RequirePositive(m.head_dim, where, "head_dim");
  RequirePositive(m.vocab_size, where, "vocab_size");
  RequirePositive(m.max_seq_len, where, "max_seq_len");
  if (!IsHybrid(m) && (!m.moe || m.moe->first_dense_layers > 0 || m.moe->layer_interval > 1)) {
    RequirePositive(m.ffn_hidden_size, where, "ffn_hidden_size");
  }
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0) {
    throw InputError(where + "/num_kv_heads",
                     "num_kv_heads=" + std::to_string(m.num_kv_heads) + " must divide num_heads=" +
                         std::to_string(m.num_heads),
                     "a divisor of num_heads", "grouped-query attention shares each K/V head among num_heads/num_kv_heads query heads");
  }
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    const std::string w = where + "/moe";
    RequirePositive(e.num_experts, w, "num_experts");
    RequirePositive(e.top_k, w, "top_k");
    RequirePositive(e.expert_ffn_hidden_size, w, "expert_ffn_hidden_size");
    RequirePositive(e.layer_interval, w, "layer_interval");
    if (e.top_k > e.num_experts) {
      throw InputError(w + "/top_k", "top_k=" + std::to_string(e.top_k) + " exceeds num_experts=" + std::to_string(e.num_experts),
                       "1 to num_experts");
    }
    if (e.num_shared_experts < 0) throw InputError(w + "/num_shared_experts", "must not be negative", "0 or more");
    if (e.latent_size < 0 || e.latent_size > m.hidden_size) {
      throw InputError(w + "/latent_size", "latent_size=" + std::to_string(e.latent_size) + " is out of range",
                       "0 (no latent projection) to hidden_size=" + std::to_string(m.hidden_size), "LatentMoE narrows the routed experts' rows to at most the hidden size");
    }
    ValidateRoutingGroups(e, w);
    if (!IsHybrid(m) && (e.first_dense_layers < 0 || e.first_dense_layers >= m.num_layers)) {
      throw InputError(w + "/first_dense_layers",
                       "first_dense_layers=" + std::to_string(e.first_dense_layers) + " leaves no MoE layer among num_layers=" +
                           std::to_string(m.num_layers),
                       "0 to " + std::to_string(m.num_layers - 1), "drop the moe object for a dense model");
    }
  }
  if (m.mla) {
    const std::string w = where + "/mla";
    RequirePositive(m.mla->kv_lora_rank, w, "kv_lora_rank");
    RequirePositive(m.mla->qk_nope_head_dim, w, "qk_nope_head_dim");
    RequirePositive(m.mla->qk_rope_head_dim, w, "qk_rope_head_dim");
    RequirePositive(m.mla->v_head_dim, w, "v_head_dim");
    if (m.mla->q_lora_rank < 0) throw InputError(w + "/q_lora_rank", "must not be negative", "0 (no query compression) or more");
  }
  if (m.mtp_layers < 0 || m.mtp_layers > kMaxMtpLayers) {
    throw InputError(where + "/mtp_layers", "mtp_layers=" + std::to_string(m.mtp_layers) + " is out of range", "0 to " + std::to_string(kMaxMtpLayers),
                     "DeepSeek-V3 trains one multi-token-prediction module (num_nextn_predict_layers 1)");
  }
  if (m.sliding_window) {
    const std::string w = where + "/sliding_window";
    RequirePositive(m.sliding_window->window, w, "window");
    if (m.sliding_window->window > kMaxModelSeqLen) {
      throw InputError(w + "/window", "window=" + std::to_string(m.sliding_window->window) + " is too large", "1 to " + std::to_string(kMaxModelSeqLen),
                       "check for a typo");
    }
    if (m.sliding_window->global_every < 0 || m.sliding_window->global_every == 1 || m.sliding_window->global_every > m.num_layers) {
      throw InputError(w + "/global_every",
                       "global_every=" + std::to_string(m.sliding_window->global_every) + " is not a pattern of local and global layers",
                       "0 (every layer local) or 2 to num_layers=" + std::to_string(m.num_layers),
                       "gpt-oss and Gemma 2 alternate (2); Gemma 3 keeps one global layer in 6 (6); a model without local layers has no sliding_window");
    }
  }
  const struct {
    const char* field;
    int64_t value, max;
  } limits[] = {{"num_layers", m.num_layers, kMaxModelLayers},     {"hidden_size", m.hidden_size, kMaxModelWidth},
                {"num_heads", m.num_heads, kMaxModelHeads},        {"head_dim", m.head_dim, kMaxModelHeads},
                {"ffn_hidden_size", m.ffn_hidden_size, kMaxModelWidth}, {"vocab_size", m.vocab_size, kMaxModelVocab},
                {"max_seq_len", m.max_seq_len, kMaxModelSeqLen}};
  for (const auto& l : limits) {
    if (l.value > l.max) {
      throw InputError(where + "/" + l.field, std::string(l.field) + "=" + std::to_string(l.value) + " is too large",
                       "1 to " + std::to_string(l.max), "check for a typo");
    }
  }
  try {
    (void)CountParams(m);
  } catch (const InputError& e) {
    const std::string input = where.ends_with(":") ? where.substr(0, where.size() - 1) : where;
    throw InputError(input, "the parameter count of model '" + m.name + "' overflows 64 bits", "",
                     "a size field (layers, widths, experts) is absurdly large");
  }
}

std::string ToString(MlpKind kind) {
  switch (kind) {
    case MlpKind::kGelu: return "gelu";
    case MlpKind::kSwiGlu: return "swiglu";
    case MlpKind::kRelu2: return "relu2";
  }
  return "swiglu";
}
std::string ToString(NormKind kind) { return kind == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }
std::string ToString(PositionKind kind) {
  switch (kind) {
    case PositionKind::kRope: return "rope";
    case PositionKind::kLearned: return "learned";
    case PositionKind::kNone: return "none";
  }
  return "rope";
}

}  // namespace shardsim
