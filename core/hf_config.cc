// Hugging Face config.json import (model_json.h). Field names follow the transformers
// configuration classes of each model type (LlamaConfig, MistralConfig, MixtralConfig,
// Qwen2Config, DeepseekV3Config, GptOssConfig, GPT2Config, GPTNeoXConfig, NemotronHConfig).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/json_input.h"
#include "core/model_json.h"
#include "core/suggest.h"

namespace shardsim {
namespace {

using nlohmann::json;

// hidden / heads, the head width a config without head_dim implies, checked here so that an
// error names the keys the config has (`heads_key`), not the head_dim it lacks. `or_key`: how the
// family gives another width ("or a head_dim key"; empty where it has none).
int64_t ImpliedHeadDim(JsonReader& r, int64_t hidden, int64_t heads, const char* hidden_key, const char* heads_key, const std::string& or_key) {
  const std::string heads_name = heads_key;
  if (hidden % heads != 0) {
    r.Fail(heads_key, std::string(hidden_key) + "=" + std::to_string(hidden) + " is not divisible by " + heads_name + "=" + std::to_string(heads),
           "a divisor of " + std::string(hidden_key) + or_key, "check " + heads_name + " for a typo");
  }
  const int64_t head_dim = hidden / heads;
  if (head_dim > kMaxModelHeads) {
    r.Fail(heads_key, std::string(hidden_key) + " / " + heads_name + " = " + std::to_string(head_dim) + ", the head width it implies, is too large",
           "a head width of 1 to " + std::to_string(kMaxModelHeads) + or_key, "check " + heads_name + " for a typo");
  }
  return head_dim;
}

// LLaMA-family attention and MLP (llama, mistral, qwen2, mixtral, deepseek share these keys).
ModelSpec LlamaFamily(JsonReader& r, const std::string& name) {
  ModelSpec m;
  m.name = name;
  m.num_layers = r.Int("num_hidden_layers", 1, kMaxModelLayers);
  m.hidden_size = r.Int("hidden_size", 1, kMaxModelWidth);
  m.num_heads = r.Int("num_attention_heads", 1, kMaxModelHeads);
  m.num_kv_heads = r.IntOr("num_key_value_heads", m.num_heads, 1, kMaxModelHeads);
  m.head_dim = r.Has("head_dim") ? r.Int("head_dim", 1, kMaxModelHeads) : ImpliedHeadDim(r, m.hidden_size, m.num_heads, "hidden_size", "num_attention_heads", ", or a head_dim key");
  m.ffn_hidden_size = r.Int("intermediate_size", 1, kMaxModelWidth);
  m.vocab_size = r.Int("vocab_size", 1, kMaxModelVocab);
  m.max_seq_len = r.IntOr("max_position_embeddings", 4096, 1, kMaxModelSeqLen);
  m.tied_embeddings = r.BoolOr("tie_word_embeddings", false);
  m.mlp = MlpKind::kSwiGlu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRope;
  return m;
}

ModelSpec Gpt2(JsonReader& r, const std::string& name) {
  ModelSpec m;
  m.name = name;
  m.num_layers = r.Int("n_layer", 1, kMaxModelLayers);
  m.hidden_size = r.Int("n_embd", 1, kMaxModelWidth);
  m.num_heads = r.Int("n_head", 1, kMaxModelHeads);
  m.num_kv_heads = m.num_heads;
  m.head_dim = ImpliedHeadDim(r, m.hidden_size, m.num_heads, "n_embd", "n_head", "");
  // n_inner null or absent: 4 x n_embd (GPT2Config), checked against the width limit at n_embd.
  if (!r.Has("n_inner") && 4 * m.hidden_size > kMaxModelWidth) {
    r.Fail("n_embd", "4 x n_embd = " + std::to_string(4 * m.hidden_size) + ", the MLP width with n_inner unset, is too large",
           "n_embd of 1 to " + std::to_string(kMaxModelWidth / 4) + ", or an n_inner", "check n_embd for a typo");
  }
  m.ffn_hidden_size = r.IntOr("n_inner", 4 * m.hidden_size, 1, kMaxModelWidth);
  m.vocab_size = r.Int("vocab_size", 1, kMaxModelVocab);
  m.max_seq_len = r.IntOr("n_positions", 1024, 1, kMaxModelSeqLen);
  m.tied_embeddings = r.BoolOr("tie_word_embeddings", true);
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kLearned;
  m.linear_bias = true;
  m.dropout = r.NumberOr("attn_pdrop", 0.1, 0, 1) > 0;
  return m;
}

ModelSpec GptNeoX(JsonReader& r, const std::string& name) {
  ModelSpec m;
  m.name = name;
  m.num_layers = r.Int("num_hidden_layers", 1, kMaxModelLayers);
  m.hidden_size = r.Int("hidden_size", 1, kMaxModelWidth);
  m.num_heads = r.Int("num_attention_heads", 1, kMaxModelHeads);
  m.num_kv_heads = m.num_heads;
  m.head_dim = ImpliedHeadDim(r, m.hidden_size, m.num_heads, "hidden_size", "num_attention_heads", "");
  m.ffn_hidden_size = r.Int("intermediate_size", 1, kMaxModelWidth);
  m.vocab_size = r.Int("vocab_size", 1, kMaxModelVocab);
  m.max_seq_len = r.IntOr("max_position_embeddings", 2048, 1, kMaxModelSeqLen);
  m.tied_embeddings = r.BoolOr("tie_word_embeddings", false);
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kRope;
  m.linear_bias = r.BoolOr("attention_bias", true);
  return m;
}

// Mixtral's and gpt-oss's experts: num_local_experts of `width` in every layer, no shared one.
MoeSpec LocalExpertsEveryLayer(JsonReader& r, int64_t width) {
  const int64_t experts = r.Int("num_local_experts", 1, kMaxModelExperts);
  return MoeSpec{.num_experts = experts,
                 .top_k = r.Int("num_experts_per_tok", 1, std::min(kMaxModelTopK, experts)),
                 .num_shared_experts = 0,
                 .expert_ffn_hidden_size = width,
                 .first_dense_layers = 0,
                 .layer_interval = 1};
}

// The sliding window: `sliding_window` (null or absent: none) over the layers `layer_types` marks
// "sliding_attention" (every layer when the config has no such list, as MistralConfig's
// v0.1 window covers; gpt-oss's default alternates, `default_every`). The list must repeat
// local layers closed by one global one (SlidingWindowSpec); other patterns are refused.
void ReadSlidingWindow(JsonReader& r, ModelSpec& m, int64_t default_every) {
  if (!r.Has("sliding_window")) return;
  SlidingWindowSpec w{.window = r.Int("sliding_window", 1, kMaxModelSeqLen), .global_every = default_every};
  if (r.Has("layer_types")) {
    const std::vector<std::string> types = r.StringList("layer_types");
    if (static_cast<int64_t>(types.size()) != m.num_layers) {
      r.Fail("layer_types", std::to_string(types.size()) + " entries for num_hidden_layers=" + std::to_string(m.num_layers), "one entry per layer");
    }
    const auto first_global = std::find(types.begin(), types.end(), "full_attention");
    w.global_every = first_global == types.end() ? 0 : first_global - types.begin() + 1;
    ModelSpec pattern = m;
    pattern.sliding_window = w;
    for (size_t i = 0; i < types.size(); ++i) {
      const bool global = !IsLocalAttentionLayer(pattern, static_cast<int64_t>(i));
      if (types[i] != (global ? "full_attention" : "sliding_attention")) {
        r.Fail("layer_types", "layer " + std::to_string(i) + " is '" + types[i] + "', which breaks a pattern of local layers closed by one global layer",
               "sliding_attention and full_attention repeating with the last of each run global",
               "write the model as a shardsim model JSON with sliding_window {window, global_every} (docs/domain.md)");
      }
    }
    if (w.global_every == 1) return;  // every layer global: no local layer
  } else if (w.global_every > m.num_layers) {
    w.global_every = 0;  // the default pattern's global layer is beyond the last: every layer local
  }
  m.sliding_window = w;
}

// Group-limited routing (DeepseekV3Config's and NemotronHConfig's n_group / topk_group); one
// group (Kimi K2's n_group 1) limits nothing.
void ReadRoutingGroups(JsonReader& r, MoeSpec& moe) {
  const int64_t groups = r.IntOr("n_group", 0, 0, moe.num_experts);
  if (groups > 1) moe.groups = groups, moe.group_top_k = r.Int("topk_group", 1, groups);
}

// NemotronH (Nemotron-H, Nemotron 3): a hybrid of Mamba-2 mixers, attention, MLP and expert
// blocks, one per layer (transformers' configuration_nemotron_h.py NemotronHConfig at 13923c63:
// layers_block_type, or the legacy hybrid_override_pattern its configs on the Hub carry; the
// mamba_* spellings its __post_init__ accepts for n_groups, conv_kernel and chunk_size). No
// position embedding (the attention has no RoPE), RMSNorm, squared-ReLU MLPs.
ModelSpec NemotronH(JsonReader& r, const std::string& name) {
  ModelSpec m;
  m.name = name;
  if (r.Has("hybrid_override_pattern")) {
    m.hybrid_pattern = r.String("hybrid_override_pattern");
  } else if (!r.Has("layers_block_type")) {
    r.Fail("layers_block_type", "a nemotron_h config names its layers in layers_block_type or hybrid_override_pattern, and this one in neither",
           "a list of linear_attention, full_attention, moe, mlp; or a pattern of M, *, E, -");
  } else {
    for (const std::string& type : r.StringList("layers_block_type")) {
      // The current names, then the legacy ones NemotronHConfig migrates.
      const char c = type == "linear_attention" || type == "mamba" ? kHybridMamba
                     : type == "full_attention" || type == "attention" ? kHybridAttention
                     : type == "moe" ? kHybridMoe
                     : type == "mlp" ? kHybridMlp
                                     : '?';
      if (c == '?') r.Fail("layers_block_type", "unknown layer type '" + type + "'", "linear_attention (mamba), full_attention (attention), moe, mlp");
      m.hybrid_pattern += c;
    }
  }
  m.num_layers = static_cast<int64_t>(m.hybrid_pattern.size());
  if (r.Has("num_hidden_layers") && r.Int("num_hidden_layers", 1, kMaxModelLayers) != m.num_layers) {
    r.Fail("num_hidden_layers", "is " + std::to_string(r.Int("num_hidden_layers", 1, kMaxModelLayers)) + " but the layer pattern has " + std::to_string(m.num_layers) + " layers",
           std::to_string(m.num_layers) + " (or leave it out: NemotronHConfig counts the pattern)");
  }
  m.hidden_size = r.Int("hidden_size", 1, kMaxModelWidth);
  m.num_heads = r.Int("num_attention_heads", 1, kMaxModelHeads);
  m.num_kv_heads = r.IntOr("num_key_value_heads", m.num_heads, 1, kMaxModelHeads);
  m.head_dim = r.IntOr("head_dim", 128, 1, kMaxModelHeads);
  m.ffn_hidden_size = r.IntOr("intermediate_size", 0, 0, kMaxModelWidth);
  m.vocab_size = r.IntOr("vocab_size", 131072, 1, kMaxModelVocab);
  m.max_seq_len = r.IntOr("max_position_embeddings", 4096, 1, kMaxModelSeqLen);
  m.tied_embeddings = r.BoolOr("tie_word_embeddings", false);
  m.linear_bias = r.BoolOr("attention_bias", false) || r.BoolOr("mlp_bias", false);
  if (r.Has("mlp_hidden_act") && r.String("mlp_hidden_act") != "relu2") r.Fail("mlp_hidden_act", "only relu2 (squared ReLU) MLPs are modelled in a NemotronH model", "relu2");
  m.mlp = MlpKind::kRelu2;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kNone;
  auto either = [&](const char* key, const char* legacy, int64_t fallback, int64_t max) {
    return r.Has(key) ? r.Int(key, 1, max) : r.IntOr(legacy, fallback, 1, max);
  };
  m.mamba = MambaSpec{.num_heads = r.IntOr("mamba_num_heads", 128, 1, kMaxModelHeads),
                      .head_dim = r.IntOr("mamba_head_dim", 64, 1, kMaxModelWidth),
                      .state_size = r.IntOr("ssm_state_size", 128, 1, kMaxModelWidth),
                      .groups = either("n_groups", "mamba_n_groups", 8, kMaxModelHeads),
                      .conv_kernel = either("conv_kernel", "mamba_d_conv", 4, 64),
                      .chunk_size = either("chunk_size", "mamba_chunk_size", 128, kMaxModelSeqLen)};
  if (m.hybrid_pattern.find(kHybridMoe) != std::string::npos) {
    const int64_t experts = r.Int("n_routed_experts", 1, kMaxModelExperts), width = r.Int("moe_intermediate_size", 1, kMaxModelWidth);
    // Shared experts are counted in routed experts' widths: n_shared_experts of
    // moe_shared_expert_intermediate_size columns.
    const int64_t shared = r.IntOr("n_shared_experts", 1, 0, kMaxModelExperts) * r.IntOr("moe_shared_expert_intermediate_size", 0, 0, kMaxModelWidth);
    if (shared % width != 0) {
      r.Fail("moe_shared_expert_intermediate_size", "the shared experts' " + std::to_string(shared) + " columns are not a whole number of routed experts' " + std::to_string(width),
             "a multiple of moe_intermediate_size", "write the model as a shardsim model JSON (num_shared_experts counts experts of expert_ffn_hidden_size)");
    }
    m.moe = MoeSpec{.num_experts = experts, .top_k = r.Int("num_experts_per_tok", 1, std::min(kMaxModelTopK, experts)), .num_shared_experts = shared / width, .expert_ffn_hidden_size = width};
    m.moe->latent_size = r.IntOr("moe_latent_size", 0, 0, kMaxModelWidth);
    ReadRoutingGroups(r, *m.moe);
  }
  // Multi-token-prediction modules: num_nextn_predict_layers of the layers mtp_hybrid_override_pattern
  // ("*E") or mtp_layers_block_type (["attention", "moe"]) names (NeMo AutoModel's nemotron_v3
  // mtp.py reads either; without one, it trains none); mtp_use_repeated_layer shares one module's
  // weights.
  const int64_t mtp = r.IntOr("num_nextn_predict_layers", 0, 0, kMaxMtpLayers);
  if (r.Has("mtp_hybrid_override_pattern")) {
    m.mtp_pattern = r.String("mtp_hybrid_override_pattern");
  } else if (r.Has("mtp_layers_block_type")) {
    for (const std::string& type : r.StringList("mtp_layers_block_type")) {
      const char c = type == "mamba" ? kHybridMamba : type == "attention" ? kHybridAttention : type == "moe" ? kHybridMoe : type == "mlp" ? kHybridMlp : '?';
      if (c == '?') r.Fail("mtp_layers_block_type", "unknown layer type '" + type + "'", "mamba, attention, moe, mlp");
      m.mtp_pattern += c;
    }
  }
  if (mtp > 0 && !m.mtp_pattern.empty()) {
    m.mtp_layers = mtp;
    m.mtp_shared_weights = r.BoolOr("mtp_use_repeated_layer", false);
  } else {
    m.mtp_pattern.clear();
  }
  return m;
}

// The config's keys for ModelSpec's fields (ValidateModel's errors name them), by model type
// and, where NemotronHConfig takes two spellings, the one the config uses.
ModelFieldNames HfFieldNames(const std::string& type, JsonReader& r) {
  auto spelt = [&](const char* key, const char* legacy) { return r.Has(key) || !r.Has(legacy) ? key : legacy; };
  if (type == "gpt2") {
    return {{"num_layers", "n_layer"}, {"hidden_size", "n_embd"}, {"num_heads", "n_head"}, {"num_kv_heads", "n_head"},
            {"ffn_hidden_size", "n_inner"}, {"max_seq_len", "n_positions"}};
  }
  ModelFieldNames names = {{"num_layers", "num_hidden_layers"}, {"num_heads", "num_attention_heads"}, {"num_kv_heads", "num_key_value_heads"},
                           {"ffn_hidden_size", "intermediate_size"}, {"max_seq_len", "max_position_embeddings"}, {"mtp_layers", "num_nextn_predict_layers"},
                           {"moe/num_experts", "n_routed_experts"}, {"moe/top_k", "num_experts_per_tok"}, {"moe/num_shared_experts", "n_shared_experts"},
                           {"moe/expert_ffn_hidden_size", "moe_intermediate_size"}, {"moe/first_dense_layers", "first_k_dense_replace"},
                           {"moe/layer_interval", "moe_layer_freq"}, {"moe/latent_size", "moe_latent_size"}, {"moe/groups", "n_group"},
                           {"moe/group_top_k", "topk_group"}, {"moe", "n_routed_experts"}, {"sliding_window/window", "sliding_window"},
                           {"sliding_window/global_every", "layer_types"}, {"mamba/num_heads", "mamba_num_heads"}, {"mamba/head_dim", "mamba_head_dim"},
                           {"mamba/state_size", "ssm_state_size"}, {"mamba/groups", spelt("n_groups", "mamba_n_groups")},
                           {"mamba/conv_kernel", spelt("conv_kernel", "mamba_d_conv")}, {"mamba/chunk_size", spelt("chunk_size", "mamba_chunk_size")},
                           {"hybrid_pattern", r.Has("hybrid_override_pattern") ? "hybrid_override_pattern" : "layers_block_type"},
                           {"mtp_pattern", r.Has("mtp_hybrid_override_pattern") ? "mtp_hybrid_override_pattern" : "mtp_layers_block_type"},
                           {"mtp_shared_weights", "mtp_use_repeated_layer"}};
  for (const char* mla : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) names[std::string("mla/") + mla] = mla;
  if (type == "mixtral" || type == "gpt_oss") {
    names["moe/num_experts"] = names["moe"] = "num_local_experts";
    names["moe/expert_ffn_hidden_size"] = "intermediate_size";
  }
  return names;
}

}  // namespace

bool IsHfConfig(const json& value) { return value.is_object() && value.contains("model_type"); }

std::vector<std::string> HfModelTypes() {
  return {"llama", "mistral", "mixtral", "qwen2", "qwen3", "deepseek_v2", "deepseek_v3", "gpt_oss", "gpt2", "gpt_neox", "nemotron_h"};
}

ModelSpec ModelFromHfConfig(const json& value, const std::string& where, const std::string& name) {
  JsonReader r(value, where);
  const std::vector<std::string> types = HfModelTypes();
  const std::string type = r.String("model_type");
  if (std::find(types.begin(), types.end(), type) == types.end()) {
    r.Fail("model_type", "unsupported model_type '" + type + "'", JoinNames(types),
           "write the hyper-parameters as a shardsim model JSON (shardsim describe --model llama3-8b --write-model F shows the format)");
  }
  ModelSpec m;
  if (type == "nemotron_h") {
    m = NemotronH(r, name);
    const int64_t mtp = r.IntOr("num_nextn_predict_layers", 0, 0, kMaxMtpLayers);
    m.source = "Hugging Face config.json (" + where + ", model_type nemotron_h" +
               (mtp > 0 && m.mtp_layers == 0 ? "; its " + std::to_string(mtp) + " multi-token-prediction layer(s) left out: no mtp_hybrid_override_pattern or mtp_layers_block_type names their layers" : std::string()) + ")";
    ValidateModel(m, where + ":", HfFieldNames(type, r));
    return m;
  }
  if (type == "gpt2") {
    m = Gpt2(r, name);
  } else if (type == "gpt_neox") {
    m = GptNeoX(r, name);
  } else {
    m = LlamaFamily(r, name);
    if (type == "qwen2") m.qkv_bias = true;
    if (type == "llama" || type == "qwen3") m.qkv_bias = r.BoolOr("attention_bias", false);
  }
  // Qwen2/3 put their window on the layers from max_window_layers on (not a repeating pattern).
  if ((type == "qwen2" || type == "qwen3") && r.BoolOr("use_sliding_window", false)) {
    r.Fail("use_sliding_window", "sliding-window layers from max_window_layers on are not modelled", "false",
           "write the model as a shardsim model JSON with sliding_window {window, global_every} (docs/domain.md)");
  }
  if (type == "mistral" || type == "mixtral") ReadSlidingWindow(r, m, 0);
  // gpt-oss: every layer MoE with biased projections, experts and router (modeling_gpt_oss.py),
  // local and global layers alternating; its per-head attention sinks (one logit each) are left
  // out of the counts, H parameters and a few FLOPs per layer.
  if (type == "gpt_oss") {
    m.moe = LocalExpertsEveryLayer(r, m.ffn_hidden_size);
    m.linear_bias = true;  // its experts' biases are there whatever attention_bias says
    ReadSlidingWindow(r, m, 2);
  }
  if (type == "mixtral") m.moe = LocalExpertsEveryLayer(r, m.ffn_hidden_size);
  if (type == "deepseek_v2" || type == "deepseek_v3") {
    MlaSpec a;
    a.q_lora_rank = r.Has("q_lora_rank") ? r.Int("q_lora_rank", 0, kMaxModelWidth) : 0;  // null: no compression
    a.kv_lora_rank = r.Int("kv_lora_rank", 1, kMaxModelWidth);
    a.qk_nope_head_dim = r.Int("qk_nope_head_dim", 1, kMaxModelHeads);
    a.qk_rope_head_dim = r.Int("qk_rope_head_dim", 1, kMaxModelHeads);
    a.v_head_dim = r.Int("v_head_dim", 1, kMaxModelHeads);
    m.mla = a;
    m.head_dim = a.v_head_dim;
    m.num_kv_heads = m.num_heads;  // MLA: every head has its own (decompressed) K and V
    if (r.Has("n_routed_experts")) {
      const int64_t experts = r.Int("n_routed_experts", 1, kMaxModelExperts);
      m.moe = MoeSpec{.num_experts = experts,
                      .top_k = r.Int("num_experts_per_tok", 1, std::min(kMaxModelTopK, experts)),
                      .num_shared_experts = r.IntOr("n_shared_experts", 0, 0, kMaxModelExperts),
                      .expert_ffn_hidden_size = r.Int("moe_intermediate_size", 1, kMaxModelWidth),
                      .first_dense_layers = r.IntOr("first_k_dense_replace", 0, 0, m.num_layers - 1),
                      .layer_interval = r.IntOr("moe_layer_freq", 1, 1, kMaxModelLayers)};
      ReadRoutingGroups(r, *m.moe);
    }
    m.mtp_layers = r.IntOr("num_nextn_predict_layers", 0, 0, kMaxMtpLayers);
  }
  m.source = "Hugging Face config.json (" + where + ", model_type " + type + ")";
  ValidateModel(m, where + ":", HfFieldNames(type, r));
  return m;
}

}  // namespace shardsim
