// The model spec: a dense or mixture-of-experts decoder-only transformer, as plain values, and
// what follows from it alone (parameter counts, FLOPs per token). Letters as in docs/domain.md:
// L layers, D width, H heads, Hkv key/value heads, K head dim, F MLP width, V vocabulary,
// E experts, k experts per token.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/collective_op.h"

namespace shardsim {

// Upper bounds on spec fields, shared by every reader: anything larger is a typo, and staying
// under them keeps per-layer counts in 64 bits (CountParams still checks every product).
inline constexpr int64_t kMaxModelLayers = 100000;
inline constexpr int64_t kMaxModelWidth = int64_t{1} << 24;    // hidden, MLP, ranks
inline constexpr int64_t kMaxModelHeads = int64_t{1} << 16;    // head counts and head dims
inline constexpr int64_t kMaxModelVocab = int64_t{1} << 26;
inline constexpr int64_t kMaxModelSeqLen = int64_t{1} << 30;
// Routed experts and experts per token: the dispatch model's miss probabilities cost experts x
// top_k (sim/routed_all_to_all.cc); today's models hold hundreds and route a few each.
inline constexpr int64_t kMaxModelExperts = int64_t{1} << 14;
inline constexpr int64_t kMaxModelTopK = 1024;
inline constexpr int64_t kMaxMtpLayers = 64;  // multi-token-prediction depth (DeepSeek-V3 trains 1)

// GELU and squared-ReLU MLPs: 2 matrices (up, down); SwiGLU: 3 (gate, up, down).
enum class MlpKind { kGelu, kSwiGlu, kRelu2 };
enum class NormKind { kLayerNorm, kRmsNorm };      // LayerNorm has a bias vector, RMSNorm does not
enum class PositionKind { kRope, kLearned, kNone };  // learned adds a [max_seq_len, D] table

// Mixture of experts. Layers [0, first_dense_layers) are dense; after them every
// `layer_interval`-th layer is MoE (1 = all of them), the others dense.
struct MoeSpec {
  int64_t num_experts = 0;             // E routed experts per MoE layer
  int64_t top_k = 0;                   // k routed experts per token
  int64_t num_shared_experts = 0;      // always-active experts (DeepSeek), each of expert width
  int64_t expert_ffn_hidden_size = 0;  // width of one routed (and shared) expert's MLP
  int64_t first_dense_layers = 0;
  int64_t layer_interval = 1;
  // LatentMoE (Nemotron 3 Super and Ultra; Megatron-core's --moe-latent-size): the routed experts
  // read and write this narrower width, a projection D -> latent before the dispatch and latent ->
  // D after the combine (moe_layer.py fc1_latent_proj / fc2_latent_proj, replicated over tensor);
  // the shared experts keep D. 0: none.
  int64_t latent_size = 0;
  // Group-limited routing (DeepSeek-V2's device-limited and DeepSeek-V3's node-limited routing;
  // the config's n_group / topk_group, Megatron-core's --moe-router-num-groups / -group-topk):
  // the experts fall in `groups` equal groups and a token's top_k experts come from its best
  // `group_top_k` groups. 0: no limit.
  int64_t groups = 0;
  int64_t group_top_k = 0;
  bool operator==(const MoeSpec&) const = default;
};

// DeepSeek multi-head latent attention (DeepSeek-V2 paper, section 2.1). q_lora_rank = 0 means
// queries are projected directly from the hidden state.
struct MlaSpec {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool operator==(const MlaSpec&) const = default;
};

// Sliding-window (local) attention (Mistral 7B v0.1; Gemma 2 and 3; gpt-oss): a local layer's
// queries see only the `window` latest positions, their own included. Within every run of
// `global_every` layers the last is global (full causal attention), the rest local: gpt-oss and
// Gemma 2 alternate (2), Gemma 3 keeps one global layer in 6; 0: every layer local.
struct SlidingWindowSpec {
  int64_t window = 0;
  int64_t global_every = 0;
  bool operator==(const SlidingWindowSpec&) const = default;
};

// Mamba-2 mixers (Dao and Gu 2024, "Transformers are SSMs": the SSD layer), as Megatron-core's
// MambaMixer builds them (core/ssm/mamba_mixer.py): an input projection to z, x, B, C and dt
// (2 d_inner + 2 G N + H columns, d_inner = H P), a causal depthwise convolution of width
// `conv_kernel` over x, B and C, the chunked state-space scan (chunks of `chunk_size` tokens),
// a gated RMSNorm over d_inner and an output projection back to D.
struct MambaSpec {
  int64_t num_heads = 0;     // H (mamba_num_heads)
  int64_t head_dim = 0;      // P (mamba_head_dim)
  int64_t state_size = 0;    // N (ssm_state_size; Megatron-core's mamba_state_dim, 128 by default)
  int64_t groups = 0;        // G: heads sharing one B and C (n_groups; mamba_num_groups, 8 by default)
  int64_t conv_kernel = 4;   // (conv_kernel; Megatron-core's d_conv)
  int64_t chunk_size = 128;  // SSD's chunk length Q (Megatron-core's MambaMixer default)
  int64_t inner() const { return num_heads * head_dim; }
  bool operator==(const MambaSpec&) const = default;
};

struct ModelSpec {
  std::string name;
  int64_t num_layers = 0;        // L
  int64_t hidden_size = 0;       // D
  int64_t num_heads = 0;         // H
  int64_t num_kv_heads = 0;      // Hkv (GQA when < H; = H for MHA)
  int64_t head_dim = 0;          // K (usually D / H)
  int64_t ffn_hidden_size = 0;   // F of dense layers
  MlpKind mlp = MlpKind::kSwiGlu;
  NormKind norm = NormKind::kRmsNorm;
  PositionKind position = PositionKind::kRope;
  int64_t vocab_size = 0;        // V
  int64_t max_seq_len = 0;       // positions the model was trained for (size of a learned table)
  bool tied_embeddings = false;  // output head shares the embedding matrix
  bool linear_bias = false;      // every linear layer has a bias (GPT-2/3, NeoX)
  bool qkv_bias = false;         // only the Q, K, V projections have a bias (Qwen2)
  bool dropout = false;          // dropout after softmax, attention output and MLP (Megatron GPT)
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;
  std::optional<SlidingWindowSpec> sliding_window;
  // Multi-token-prediction modules (DeepSeek-V3 section 2.2; config.json num_nextn_predict_layers):
  // module k normalises the previous depth's hidden state and the embedding of token i+k,
  // projects their concatenation from 2D to D, runs one transformer layer (the kind the layer
  // pattern gives the layer after the last, global attention) and the shared output head with
  // its own norm and loss. They train with the model and are dropped for inference.
  int64_t mtp_layers = 0;
  // A hybrid model's module layers, one hybrid symbol each (Megatron-core's
  // --mtp-hybrid-override-pattern, NemotronH's mtp_hybrid_override_pattern: "*E", attention then
  // experts, for Nemotron 3 Super and Ultra); empty for other models, whose module runs one
  // transformer layer. See MtpBlocks.
  std::string mtp_pattern;
  // One module's weights serve every depth (Megatron-core's --mtp-use-repeated-layer, AutoModel's
  // mtp_use_repeated_layer): the modules' work is mtp_layers modules', their parameters one's.
  bool mtp_shared_weights = false;
  // A hybrid model's layers (Megatron-core's --hybrid-layer-pattern, nemotron_h's
  // hybrid_override_pattern): one character per layer, 'M' a Mamba-2 mixer, '*' attention, '-'
  // an MLP, 'E' a mixture of experts, each with its own pre-norm and residual. Empty: every layer
  // attention then an MLP or experts (the moe object's pattern).
  std::string hybrid_pattern;
  std::optional<MambaSpec> mamba;
  std::string source;            // where the hyper-parameters come from
  bool operator==(const ModelSpec&) const = default;
};

// Whether `seq_len` is beyond the model's own length: learned positions refuse it (plan rules);
// rotary ones are costed as given, a context extension, which the reports say.
inline bool ExtendsContext(const ModelSpec& model, int64_t seq_len) { return seq_len > model.max_seq_len; }

// How an input names ModelSpec's fields, by their paths ("num_kv_heads", "moe/top_k"): a Hugging
// Face config's key ("num_key_value_heads", "num_experts_per_tok"). A field left out keeps its path.
using ModelFieldNames = std::map<std::string, std::string>;

// Checks the spec for positive sizes, consistent head counts (H divisible by Hkv), MoE and MLA
// fields, and that parameter counts fit in 64 bits (model_validate.cc). Throws InputError naming
// `where` + the field as `names` spells it.
void ValidateModel(const ModelSpec& model, const std::string& where, const ModelFieldNames& names = {});

// The layer kinds of a hybrid pattern (ModelSpec::hybrid_pattern).
inline constexpr char kHybridMamba = 'M', kHybridAttention = '*', kHybridMlp = '-', kHybridMoe = 'E';
bool IsHybrid(const ModelSpec& model);
// Layers of a hybrid model whose pattern character is `kind`; of a transformer model, attention
// ('*') counts every layer and 'M' none.
int64_t NumHybridLayers(const ModelSpec& model, char kind);

// The width the routed experts read and write and their rows travel at: the MoE's latent size,
// else the model's hidden size. 0 for a dense model.
int64_t RoutedWidth(const ModelSpec& model);

// True when layer `layer` (0-based) is a MoE layer.
bool IsMoeLayer(const ModelSpec& model, int64_t layer);
int64_t NumMoeLayers(const ModelSpec& model);
// True when the multi-token-prediction modules' layer is MoE: the layer pattern continued past the
// model's last layer (DeepSeek-V3's is).
bool MtpLayerIsMoe(const ModelSpec& model);
// A multi-token-prediction module's layers in hybrid symbols: a hybrid model's mtp_pattern, else
// attention then the MLP or experts of the layer pattern continued ("*-" or "*E").
std::string MtpBlocks(const ModelSpec& model);
// The modules whose weights the model holds: 1 with mtp_shared_weights, else mtp_layers.
int64_t MtpWeightCopies(const ModelSpec& model);
// True when layer `layer` (0-based) attends over a sliding window (SlidingWindowSpec).
bool IsLocalAttentionLayer(const ModelSpec& model, int64_t layer);
int64_t NumLocalAttentionLayers(const ModelSpec& model);
// Keys one query reads under causal attention, averaged over the `seq_len` positions of a
// sequence: S/2 over the whole prefix (the masked half skipped), and for a `local` layer's window
// of W <= S, W - W^2/(2S) (the first W positions see fewer).
double CausalKeysPerQuery(const ModelSpec& model, bool local, int64_t seq_len);

// Parameter counts, in parameters. "active" counts what one token uses: shared weights, the
// router and k of the E routed experts per MoE layer (embedding and head included, as Mixtral's
// and DeepSeek-V3's published active counts do).
struct ParamCounts {
  int64_t embedding = 0;       // token (+ learned position) embeddings
  int64_t head = 0;            // output projection (0 when tied)
  int64_t attention = 0;       // all layers' attention projections, their biases and norms
  int64_t dense_mlp = 0;       // MLPs of dense layers
  int64_t routed_experts = 0;  // all routed experts of all MoE layers
  int64_t shared_experts = 0;
  int64_t router = 0;          // routers, and a LatentMoE's two projections per MoE layer
  int64_t norms = 0;           // per-layer pre-norms and the final norm
  int64_t total = 0;
  int64_t active = 0;
  int64_t per_layer_attention = 0;  // one layer's attention (identical across layers)
  int64_t mamba = 0;           // all Mamba-2 mixers (their in-mixer norms, convolutions and scan parameters included)
  int64_t mamba_matmul = 0;    // of them, the input and output projections' weights
  // The multi-token-prediction modules' own parameters (their embedding and output head are the
  // model's), all and per token, beside total and active: DeepSeek-V3 publishes 671B for the
  // main model, its MTP module apart.
  int64_t mtp = 0;
  int64_t mtp_active = 0;
  int64_t mtp_matmul = 0;  // of mtp_active, the weights products read (norms and Mamba-2 scan parameters aside)
};
ParamCounts CountParams(const ModelSpec& model);

// Forward FLOPs per token at sequence length `seq_len` (2 FLOPs per multiply-add). `matmul` counts
// the weight matmuls of the active parameters, output head included (2 per weight); `attention`
// counts QK^T and AV over the full, non-causal context (PaLM's convention): 2*S*H*(Kqk + Kv) per
// layer, which is 4*S*D for multi-head attention, local layers included (a convention, as the
// frameworks that count full attention count it); `causal_attention` the same over the keys
// causal attention reads (CausalKeysPerQuery: half the context, a local layer's window).
// Training FLOPs per token are 3x forward (backward = 2x forward).
// `scan` counts the Mamba-2 mixers' chunked scan (SSD, Dao and Gu 2024 section 6: per token and
// head 2Q(P) for the diagonal blocks' outputs and 4NP for the chunk states, per group 2QN for
// C B^T over its chunk of Q), which every convention counts whole.
struct FlopsPerToken {
  double matmul = 0;
  double attention = 0;
  double causal_attention = 0;
  double scan = 0;
  double forward() const { return matmul + attention + scan; }
  double training() const { return 3 * forward(); }
  // Training FLOPs with causal attention counted over the keys it reads (the masked blocks
  // skipped: half of full attention): what MFU counts throughout shardsim (PaLM's count is
  // training()).
  double causal_training() const { return 3 * (matmul + causal_attention + scan); }
};
FlopsPerToken ForwardFlopsPerToken(const ModelSpec& model, int64_t seq_len);
// One Mamba-2 mixer's scan FLOPs per token over sequences of `seq_len`, forward (0 without a
// mamba spec): its chunks hold min(chunk_size, seq_len) tokens.
double MambaScanFlopsPerToken(const ModelSpec& model, int64_t seq_len);
// Of it, one group's share: C B^T within its chunk, 2·min(chunk_size, seq_len)·state_size (what
// a copy of a group's state costs where context parallelism repeats it).
double MambaGroupScanFlopsPerToken(const ModelSpec& model, int64_t seq_len);

// Names for enums, as they appear in JSON.
std::string ToString(MlpKind kind);
std::string ToString(NormKind kind);
std::string ToString(PositionKind kind);

}  // namespace shardsim
