#include <algorithm>
#include "core/model_json.h"

#include <nlohmann/json.hpp>

#include "core/json_input.h"

namespace shardsim {
namespace {
using nlohmann::json;
}  // namespace

json ModelToJson(const ModelSpec& m) {
  json j = json::object();
  j["name"] = m.name;
  j["num_layers"] = m.num_layers;
  j["hidden_size"] = m.hidden_size;
  j["num_heads"] = m.num_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["head_dim"] = m.head_dim;
  j["ffn_hidden_size"] = m.ffn_hidden_size;
  j["mlp"] = ToString(m.mlp);
  j["norm"] = ToString(m.norm);
  j["position"] = ToString(m.position);
  j["vocab_size"] = m.vocab_size;
  j["max_seq_len"] = m.max_seq_len;
  j["tied_embeddings"] = m.tied_embeddings;
  j["linear_bias"] = m.linear_bias;
  j["qkv_bias"] = m.qkv_bias;
  j["dropout"] = m.dropout;
  if (m.moe) {
    j["moe"] = {{"num_experts", m.moe->num_experts},
                {"top_k", m.moe->top_k},
                {"num_shared_experts", m.moe->num_shared_experts},
                {"expert_ffn_hidden_size", m.moe->expert_ffn_hidden_size},
                {"first_dense_layers", m.moe->first_dense_layers},
                {"layer_interval", m.moe->layer_interval}};
    if (m.moe->latent_size > 0) j["moe"]["latent_size"] = m.moe->latent_size;
    if (m.moe->groups > 0) j["moe"]["groups"] = m.moe->groups, j["moe"]["group_top_k"] = m.moe->group_top_k;
  } else {
    j["moe"] = nullptr;
  }
  if (m.mla) {
    j["mla"] = {{"q_lora_rank", m.mla->q_lora_rank},
                {"kv_lora_rank", m.mla->kv_lora_rank},
                {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                {"v_head_dim", m.mla->v_head_dim}};
  } else {
    j["mla"] = nullptr;
  }
  if (m.sliding_window) {
    j["sliding_window"] = {{"window", m.sliding_window->window}, {"global_every", m.sliding_window->global_every}};
  } else {
    j["sliding_window"] = nullptr;
  }
  j["mtp_layers"] = m.mtp_layers;
  if (!m.mtp_pattern.empty()) j["mtp_pattern"] = m.mtp_pattern;
  if (m.mtp_shared_weights) j["mtp_shared_weights"] = true;
  if (IsHybrid(m)) j["hybrid_pattern"] = m.hybrid_pattern;
  if (m.mamba) {
    j["mamba"] = {{"num_heads", m.mamba->num_heads},   {"head_dim", m.mamba->head_dim},       {"state_size", m.mamba->state_size},
                  {"groups", m.mamba->groups},         {"conv_kernel", m.mamba->conv_kernel}, {"chunk_size", m.mamba->chunk_size}};
  }
  j["source"] = m.source;
  return j;
}

ModelSpec ModelFromJson(const json& value, const std::string& where) {
  JsonReader r(value, where);
  r.SetFieldDocs("shardsim describe --model llama3-8b --write-model F writes a model JSON to compare with");
  if (value.is_object() && value.contains("chip") && value.contains("topology") && !value.contains("num_layers")) {
    r.Fail("num_layers", "missing: this is a cluster file, not a model", "a model JSON: name, num_layers, hidden_size, num_heads, ...",
           "shardsim describe --model llama3-8b --write-model F writes one to start from");
  }
  ModelSpec m;
  m.name = r.String("name");
  if (m.name.empty()) r.Fail("name", "name must not be empty", "a short name such as 'my-7b'");
  m.num_layers = r.Int("num_layers", 1, kMaxModelLayers);
  m.hidden_size = r.Int("hidden_size", 1, kMaxModelWidth);
  m.num_heads = r.Int("num_heads", 1, kMaxModelHeads);
  m.num_kv_heads = r.IntOr("num_kv_heads", m.num_heads, 1, kMaxModelHeads);
  const int64_t default_head_dim = m.hidden_size % m.num_heads == 0 ? m.hidden_size / m.num_heads : 0;
  if (!r.Has("head_dim") && default_head_dim == 0) {
    r.Fail("head_dim", "hidden_size=" + std::to_string(m.hidden_size) + " is not divisible by num_heads=" +
                           std::to_string(m.num_heads) + ", so head_dim must be given", "a whole number >= 1");
  }
  m.head_dim = r.IntOr("head_dim", default_head_dim, 1, kMaxModelHeads);
  const std::string mlp = r.EnumOr("mlp", "swiglu", {"gelu", "swiglu", "relu2"});
  m.mlp = mlp == "gelu" ? MlpKind::kGelu : mlp == "relu2" ? MlpKind::kRelu2 : MlpKind::kSwiGlu;
  m.norm = r.EnumOr("norm", "rmsnorm", {"layernorm", "rmsnorm"}) == "layernorm" ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  const std::string position = r.EnumOr("position", "rope", {"rope", "learned", "none"});
  m.position = position == "learned" ? PositionKind::kLearned : position == "none" ? PositionKind::kNone : PositionKind::kRope;
  m.vocab_size = r.Int("vocab_size", 1, kMaxModelVocab);
  m.max_seq_len = r.Int("max_seq_len", 1, kMaxModelSeqLen);
  m.tied_embeddings = r.BoolOr("tied_embeddings", false);
  m.linear_bias = r.BoolOr("linear_bias", false);
  m.qkv_bias = r.BoolOr("qkv_bias", false);
  m.dropout = r.BoolOr("dropout", false);
  if (auto moe = r.Object("moe")) {
    MoeSpec e;
    e.num_experts = moe->Int("num_experts", 1, kMaxModelExperts);
    e.top_k = moe->Int("top_k", 1, std::min(kMaxModelTopK, e.num_experts));
    e.num_shared_experts = moe->IntOr("num_shared_experts", 0, 0, kMaxModelExperts);
    e.expert_ffn_hidden_size = moe->Int("expert_ffn_hidden_size", 1, kMaxModelWidth);
    e.first_dense_layers = moe->IntOr("first_dense_layers", 0, 0, kMaxModelLayers);
    e.layer_interval = moe->IntOr("layer_interval", 1, 1, kMaxModelLayers);
    e.latent_size = moe->IntOr("latent_size", 0, 0, kMaxModelWidth);
    e.groups = moe->IntOr("groups", 0, 0, kMaxModelExperts);
    e.group_top_k = moe->IntOr("group_top_k", 0, 0, kMaxModelExperts);
    moe->Finish();
    m.moe = e;
  }
  m.hybrid_pattern = r.StringOr("hybrid_pattern", "");
  // A dense layer needs an MLP width; a model whose every layer is MoE, or a hybrid one without
  // MLP layers, may leave it out.
  const bool all_moe = (m.moe && m.moe->first_dense_layers == 0 && m.moe->layer_interval == 1) ||
                       (!m.hybrid_pattern.empty() && m.hybrid_pattern.find(kHybridMlp) == std::string::npos);
  m.ffn_hidden_size = all_moe ? r.IntOr("ffn_hidden_size", 0, 0, kMaxModelWidth) : r.Int("ffn_hidden_size", 1, kMaxModelWidth);
  if (auto mla = r.Object("mla")) {
    MlaSpec a;
    a.q_lora_rank = mla->IntOr("q_lora_rank", 0, 0, kMaxModelWidth);
    a.kv_lora_rank = mla->Int("kv_lora_rank", 1, kMaxModelWidth);
    a.qk_nope_head_dim = mla->Int("qk_nope_head_dim", 1, kMaxModelHeads);
    a.qk_rope_head_dim = mla->Int("qk_rope_head_dim", 1, kMaxModelHeads);
    a.v_head_dim = mla->Int("v_head_dim", 1, kMaxModelHeads);
    mla->Finish();
    m.mla = a;
  }
  if (auto window = r.Object("sliding_window")) {
    SlidingWindowSpec w;
    w.window = window->Int("window", 1, kMaxModelSeqLen);
    w.global_every = window->IntOr("global_every", 0, 0, kMaxModelLayers);
    window->Finish();
    m.sliding_window = w;
  }
  m.mtp_layers = r.IntOr("mtp_layers", 0, 0, kMaxMtpLayers);
  m.mtp_pattern = r.StringOr("mtp_pattern", "");
  m.mtp_shared_weights = r.BoolOr("mtp_shared_weights", false);
  if (auto mamba = r.Object("mamba")) {
    MambaSpec s;
    s.num_heads = mamba->Int("num_heads", 1, kMaxModelHeads);
    s.head_dim = mamba->Int("head_dim", 1, kMaxModelHeads);
    s.state_size = mamba->IntOr("state_size", 128, 1, kMaxModelHeads);
    s.groups = mamba->IntOr("groups", 8, 1, kMaxModelHeads);
    s.conv_kernel = mamba->IntOr("conv_kernel", 4, 1, 64);
    s.chunk_size = mamba->IntOr("chunk_size", 128, 1, kMaxModelSeqLen);
    mamba->Finish();
    m.mamba = s;
  }
  m.source = r.StringOr("source", "");
  r.Finish();
  ValidateModel(m, where + ":");
  return m;
}

}  // namespace shardsim
