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

std::string MtpBlocks(const ModelSpec& model) {
  if (IsHybrid(model)) return model.mtp_pattern;
  return std::string{kHybridAttention, MtpLayerIsMoe(model) ? kHybridMoe : kHybridMlp};
}

int64_t MtpWeightCopies(const ModelSpec& model) { return model.mtp_shared_weights && model.mtp_layers > 0 ? 1 : model.mtp_layers; }

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
    // Per module: the two input norms, the 2D -> D projection, its layers (each block with its
    // pre-norm: attention, MLP, experts or a Mamba-2 mixer) and the head's own norm.
    const int64_t entry = c.Add(c.Mul(3, NormParams(m)), c.Mul(2, m.hidden_size, m.hidden_size));
    int64_t all = entry, active = entry, matmul = c.Mul(2, m.hidden_size, m.hidden_size);
    for (const char block : MtpBlocks(m)) {
      int64_t block_all = 0, block_active = 0, block_matmul = 0;
      if (block == kHybridAttention) {
        block_all = block_active = block_matmul = p.per_layer_attention;
      } else if (block == kHybridMlp) {
        block_all = block_active = block_matmul = MlpParams(m, m.ffn_hidden_size, c);
      } else if (block == kHybridMoe) {
        const int64_t expert = MlpParams(m, m.moe->expert_ffn_hidden_size, c, RoutedWidth(m));
        const int64_t shared_and_router = c.Add(c.Mul(m.moe->num_shared_experts, MlpParams(m, m.moe->expert_ffn_hidden_size, c)), RouterParams(m, c));
        block_all = c.Add(shared_and_router, c.Mul(m.moe->num_experts, expert));
        block_active = block_matmul = c.Add(shared_and_router, c.Mul(m.moe->top_k, expert));
      } else {  // kHybridMamba
        block_all = block_active = mixer.all;
        block_matmul = mixer.matmul;
      }
      all = c.Add(all, c.Add(block_all, NormParams(m)));
      active = c.Add(active, c.Add(block_active, NormParams(m)));
      matmul = c.Add(matmul, block_matmul);
    }
    p.mtp = c.Mul(MtpWeightCopies(m), all);
    p.mtp_active = c.Mul(m.mtp_layers, active);
    p.mtp_matmul = c.Mul(m.mtp_layers, matmul);
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
  if (m.mtp_layers > 0) f.matmul += 2.0 * static_cast<double>(p.mtp_matmul) + mtp * head;
  const double qk_dim = m.mla ? static_cast<double>(m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim)
                              : static_cast<double>(m.head_dim);
  const double v_dim = m.mla ? static_cast<double>(m.mla->v_head_dim) : static_cast<double>(m.head_dim);
  const double per_key = 2.0 * static_cast<double>(m.num_heads) * (qk_dim + v_dim);
  const double attention_layers = static_cast<double>(NumHybridLayers(m, kHybridAttention));
  const double local = static_cast<double>(NumLocalAttentionLayers(m)), global = attention_layers - local;
  // The modules' attention layers attend globally; their Mamba-2 mixers scan as the model's do.
  const std::string blocks = MtpBlocks(m);
  const double mtp_attention = mtp * static_cast<double>(std::count(blocks.begin(), blocks.end(), kHybridAttention));
  const double mtp_mamba = mtp * static_cast<double>(std::count(blocks.begin(), blocks.end(), kHybridMamba));
  f.attention = per_key * static_cast<double>(seq_len) * (attention_layers + mtp_attention);
  f.scan = (static_cast<double>(NumHybridLayers(m, kHybridMamba)) + mtp_mamba) * MambaScanFlopsPerToken(m, seq_len);
  f.causal_attention = per_key * ((global + mtp_attention) * CausalKeysPerQuery(m, false, seq_len) + local * CausalKeysPerQuery(m, true, seq_len));
  return f;
}

double MambaGroupScanFlopsPerToken(const ModelSpec& m, int64_t seq_len) {
  if (!m.mamba) return 0;
  const MambaSpec& s = *m.mamba;
  return 2 * static_cast<double>(std::min(s.chunk_size, seq_len)) * static_cast<double>(s.state_size);
}

double MambaScanFlopsPerToken(const ModelSpec& m, int64_t seq_len) {
  if (!m.mamba) return 0;
  const MambaSpec& s = *m.mamba;
  const double q = static_cast<double>(std::min(s.chunk_size, seq_len)), n = static_cast<double>(s.state_size), p = static_cast<double>(s.head_dim);
  const double h = static_cast<double>(s.num_heads), g = static_cast<double>(s.groups);
  // Per token: the diagonal blocks' C B^T per group (2QN) and their product with X per head
  // (2QP); the chunk states B^T X and their read-out C h per head (2NP each). The convolution's
  // 2K per channel is left out (under 0.2% of the mixer).
  return MambaGroupScanFlopsPerToken(m, seq_len) * g + h * (2 * q * p + 4 * n * p);
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
