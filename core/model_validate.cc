// ValidateModel (model_spec.h): a model's sizes and their consistency, each error naming the
// field as the input spells it (ModelFieldNames: a Hugging Face config's keys differ).
#include <algorithm>

#include "core/error.h"
#include "core/model_spec.h"

namespace shardsim {
namespace {

// A field's path and name in the input: `where` + "/" + its input path, and that path's last
// part; a field the names leave out keeps its ModelSpec path.
class Fields {
 public:
  Fields(const std::string& where, const ModelFieldNames& names) : where_(where), names_(names) {}
  std::string Path(const std::string& field) const { return where_ + "/" + InInput(field); }
  std::string Name(const std::string& field) const {
    const std::string path = InInput(field);
    return path.substr(path.rfind('/') + 1);
  }
  // "name=value", for the messages.
  std::string Is(const std::string& field, int64_t value) const { return Name(field) + "=" + std::to_string(value); }
  const std::string& where() const { return where_; }

 private:
  std::string InInput(const std::string& field) const {
    const auto it = names_.find(field);
    return it == names_.end() ? field : it->second;
  }
  const std::string& where_;
  const ModelFieldNames& names_;
};

void RequirePositive(int64_t value, const Fields& f, const std::string& field) {
  if (value <= 0) throw InputError(f.Path(field), f.Is(field, value) + " must be positive", "a whole number >= 1");
}

// moe/groups and moe/group_top_k: both or neither; the groups split the experts evenly and the
// chosen ones, at most all of them, hold at least top_k experts. One group limits nothing.
void ValidateRoutingGroups(const MoeSpec& e, const Fields& f) {
  if (e.groups == 0 && e.group_top_k == 0) return;
  const std::string groups = f.Name("moe/groups"), group_top_k = f.Name("moe/group_top_k");
  if (e.groups == 0 || e.group_top_k == 0) {
    const bool no_groups = e.groups == 0;
    throw InputError(f.Path(no_groups ? "moe/groups" : "moe/group_top_k"),
                     (no_groups ? group_top_k + " without " + groups : groups + " without " + group_top_k) + ": group-limited routing needs both",
                     "both " + groups + " and " + group_top_k + ", or neither", "DeepSeek-V3 routes within 4 of 8 groups (n_group 8, topk_group 4)");
  }
  if (e.groups < 1 || e.num_experts % e.groups != 0) {
    throw InputError(f.Path("moe/groups"), f.Is("moe/groups", e.groups) + " does not split " + f.Is("moe/num_experts", e.num_experts) + " into equal groups",
                     "a divisor of " + f.Name("moe/num_experts"), "DeepSeek-V3 routes within 8 groups of its 256 experts (n_group)");
  }
  if (e.group_top_k < 1 || e.group_top_k > e.groups) {
    throw InputError(f.Path("moe/group_top_k"), f.Is("moe/group_top_k", e.group_top_k) + " with " + f.Is("moe/groups", e.groups),
                     "1 to " + f.Is("moe/groups", e.groups), "a token's experts come from " + group_top_k + " of the groups");
  }
  const int64_t per_group = e.num_experts / e.groups;
  if (e.group_top_k * per_group < e.top_k) {
    const int64_t least = (e.top_k + per_group - 1) / per_group;
    throw InputError(f.Path("moe/group_top_k"),
                     f.Is("moe/group_top_k", e.group_top_k) + " groups of " + std::to_string(per_group) + " experts cannot hold " + f.Is("moe/top_k", e.top_k) + " experts",
                     std::to_string(least) + " to " + std::to_string(e.groups), "DeepSeek-V3 picks 4 of its 8 groups of 32 (topk_group)");
  }
}

void ValidateHybrid(const ModelSpec& m, const Fields& f) {
  const std::string pattern = f.Path("hybrid_pattern");
  if (!IsHybrid(m)) {
    if (m.mamba) throw InputError(f.Path("mamba"), "a mamba spec without hybrid_pattern", "a hybrid_pattern with 'M' layers", "say which layers are Mamba-2 mixers");
    if (!m.mtp_pattern.empty()) {
      throw InputError(f.Path("mtp_pattern"), "an mtp_pattern without hybrid_pattern", "leave it out: a transformer model's module runs one layer of its own kind",
                       "mtp_pattern names a hybrid model's module layers");
    }
    return;
  }
  const size_t bad = m.hybrid_pattern.find_first_not_of("M*-E");
  if (bad != std::string::npos) {
    throw InputError(pattern, std::string("layer ") + std::to_string(bad) + " is '" + m.hybrid_pattern[bad] + "'",
                     "M (Mamba-2), * (attention), - (MLP), E (mixture of experts)", "Megatron-core's --hybrid-layer-pattern without its '|' stage marks");
  }
  if (static_cast<int64_t>(m.hybrid_pattern.size()) != m.num_layers) {
    throw InputError(pattern, f.Name("hybrid_pattern") + " has " + std::to_string(m.hybrid_pattern.size()) + " layers, " + f.Is("num_layers", m.num_layers),
                     "one entry per layer", "set " + f.Name("num_layers") + " to the pattern's length");
  }
  if (NumHybridLayers(m, kHybridMamba) > 0 && !m.mamba) {
    throw InputError(f.Path("mamba"), "hybrid_pattern has Mamba-2 layers but no mamba spec", "{num_heads, head_dim, state_size, groups}", "add the mixer's sizes");
  }
  if (NumHybridLayers(m, kHybridMoe) > 0 && !m.moe) throw InputError(pattern, "hybrid_pattern has MoE layers ('E') but no moe spec", "a moe object", "add the experts' sizes");
  if (m.moe && NumHybridLayers(m, kHybridMoe) == 0) throw InputError(f.Path("moe"), "a moe spec but no 'E' layer in hybrid_pattern", "'E' layers", "drop the moe object");
  if (m.moe && (m.moe->first_dense_layers != 0 || m.moe->layer_interval != 1)) {
    throw InputError(f.Path("moe"), "first_dense_layers and layer_interval in a hybrid model", "0 and 1 (leave them out)",
                     "hybrid_pattern's 'E' marks the MoE layers");
  }
  if (NumHybridLayers(m, kHybridMlp) > 0) RequirePositive(m.ffn_hidden_size, f, "ffn_hidden_size");
  auto unsupported = [&](bool present, const char* field, const std::string& what) {
    if (present) throw InputError(f.Path(field), what + " in a hybrid model is not modelled", "leave it out of a hybrid model", "or write the model without hybrid_pattern");
  };
  unsupported(m.mla.has_value(), "mla", "multi-head latent attention");
  unsupported(m.sliding_window.has_value(), "sliding_window", "sliding-window attention");
  // A hybrid model's multi-token-prediction modules name their layers.
  if (m.mtp_layers > 0 && m.mtp_pattern.empty()) {
    throw InputError(f.Path("mtp_pattern"), "a hybrid model's multi-token-prediction modules need their layers", "hybrid symbols, e.g. \"*E\"",
                     "Megatron-core's --mtp-hybrid-override-pattern (Nemotron 3 Super and Ultra: *E)");
  }
  if (!m.mtp_pattern.empty()) {
    const std::string field = f.Path("mtp_pattern");
    const size_t bad_block = m.mtp_pattern.find_first_not_of("M*-E");
    if (bad_block != std::string::npos) {
      throw InputError(field, std::string("layer ") + std::to_string(bad_block) + " is '" + m.mtp_pattern[bad_block] + "'",
                       "M (Mamba-2), * (attention), - (MLP), E (mixture of experts)", "the module's layers in hybrid_pattern's symbols");
    }
    if (m.mtp_pattern.find(kHybridMoe) != std::string::npos && !m.moe) throw InputError(field, "an 'E' layer but no moe spec", "layers the model has", "add the experts' sizes");
    if (m.mtp_pattern.find(kHybridMamba) != std::string::npos && !m.mamba) throw InputError(field, "an 'M' layer but no mamba spec", "layers the model has", "add the mixer's sizes");
    if (m.mtp_pattern.find(kHybridMlp) != std::string::npos) RequirePositive(m.ffn_hidden_size, f, "ffn_hidden_size");
    if (m.mtp_layers == 0) throw InputError(field, "a pattern without modules (mtp_layers 0)", "mtp_layers 1 or more", "or leave mtp_pattern out");
    if (m.mtp_pattern.size() > 16) throw InputError(field, "has " + std::to_string(m.mtp_pattern.size()) + " layers", "1 to 16 layers", "check for a typo");
  }
  unsupported(m.dropout, "dropout", "dropout");
  if (m.mamba) {
    const MambaSpec& s = *m.mamba;
    for (const auto& [value, field] : {std::pair{s.num_heads, "mamba/num_heads"}, {s.head_dim, "mamba/head_dim"}, {s.state_size, "mamba/state_size"},
                                       {s.groups, "mamba/groups"}, {s.conv_kernel, "mamba/conv_kernel"}, {s.chunk_size, "mamba/chunk_size"}}) {
      RequirePositive(value, f, field);
    }
    if (s.num_heads % s.groups != 0) {
      throw InputError(f.Path("mamba/groups"), f.Is("mamba/groups", s.groups) + " must divide " + f.Is("mamba/num_heads", s.num_heads),
                       "a divisor of " + f.Name("mamba/num_heads"), "each group's B and C serve a share of the heads");
    }
  }
}

void ValidateMoe(const ModelSpec& m, const Fields& f) {
  const MoeSpec& e = *m.moe;
  RequirePositive(e.num_experts, f, "moe/num_experts");
  RequirePositive(e.top_k, f, "moe/top_k");
  RequirePositive(e.expert_ffn_hidden_size, f, "moe/expert_ffn_hidden_size");
  RequirePositive(e.layer_interval, f, "moe/layer_interval");
  if (e.top_k > e.num_experts) {
    throw InputError(f.Path("moe/top_k"), f.Is("moe/top_k", e.top_k) + " exceeds " + f.Is("moe/num_experts", e.num_experts), "1 to " + f.Name("moe/num_experts"));
  }
  if (e.num_shared_experts < 0) throw InputError(f.Path("moe/num_shared_experts"), "must not be negative", "0 or more");
  if (e.latent_size < 0 || e.latent_size > m.hidden_size) {
    throw InputError(f.Path("moe/latent_size"), f.Is("moe/latent_size", e.latent_size) + " is out of range",
                     "0 (no latent projection) to " + f.Is("hidden_size", m.hidden_size), "LatentMoE narrows the routed experts' rows to at most the hidden size");
  }
  ValidateRoutingGroups(e, f);
  if (!IsHybrid(m) && (e.first_dense_layers < 0 || e.first_dense_layers >= m.num_layers)) {
    throw InputError(f.Path("moe/first_dense_layers"),
                     f.Is("moe/first_dense_layers", e.first_dense_layers) + " leaves no MoE layer among " + f.Is("num_layers", m.num_layers),
                     "0 to " + std::to_string(m.num_layers - 1), "drop the moe object for a dense model");
  }
}

}  // namespace

void ValidateModel(const ModelSpec& m, const std::string& where, const ModelFieldNames& names) {
  const Fields f(where, names);
  ValidateHybrid(m, f);
  for (const auto& [value, field] : {std::pair{m.num_layers, "num_layers"}, {m.hidden_size, "hidden_size"}, {m.num_heads, "num_heads"},
                                     {m.num_kv_heads, "num_kv_heads"}, {m.head_dim, "head_dim"}, {m.vocab_size, "vocab_size"}, {m.max_seq_len, "max_seq_len"}}) {
    RequirePositive(value, f, field);
  }
  if (!IsHybrid(m) && (!m.moe || m.moe->first_dense_layers > 0 || m.moe->layer_interval > 1)) RequirePositive(m.ffn_hidden_size, f, "ffn_hidden_size");
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0) {
    throw InputError(f.Path("num_kv_heads"), f.Is("num_kv_heads", m.num_kv_heads) + " must divide " + f.Is("num_heads", m.num_heads),
                     "a divisor of " + f.Name("num_heads"), "grouped-query attention shares each K/V head among several query heads");
  }
  if (m.moe) ValidateMoe(m, f);
  if (m.mla) {
    for (const auto& [value, field] : {std::pair{m.mla->kv_lora_rank, "mla/kv_lora_rank"}, {m.mla->qk_nope_head_dim, "mla/qk_nope_head_dim"},
                                       {m.mla->qk_rope_head_dim, "mla/qk_rope_head_dim"}, {m.mla->v_head_dim, "mla/v_head_dim"}}) {
      RequirePositive(value, f, field);
    }
    if (m.mla->q_lora_rank < 0) throw InputError(f.Path("mla/q_lora_rank"), "must not be negative", "0 (no query compression) or more");
  }
  if (m.mtp_shared_weights && m.mtp_layers == 0) {
    throw InputError(f.Path("mtp_shared_weights"), "shared weights without modules (mtp_layers 0)", "false, or mtp_layers 1 or more", "or leave it out");
  }
  if (m.mtp_layers < 0 || m.mtp_layers > kMaxMtpLayers) {
    throw InputError(f.Path("mtp_layers"), f.Is("mtp_layers", m.mtp_layers) + " is out of range", "0 to " + std::to_string(kMaxMtpLayers),
                     "DeepSeek-V3 trains one multi-token-prediction module (num_nextn_predict_layers 1)");
  }
  if (m.sliding_window) {
    RequirePositive(m.sliding_window->window, f, "sliding_window/window");
    if (m.sliding_window->window > kMaxModelSeqLen) {
      throw InputError(f.Path("sliding_window/window"), f.Is("sliding_window/window", m.sliding_window->window) + " is too large",
                       "1 to " + std::to_string(kMaxModelSeqLen), "check for a typo");
    }
    if (m.sliding_window->global_every < 0 || m.sliding_window->global_every == 1 || m.sliding_window->global_every > m.num_layers) {
      throw InputError(f.Path("sliding_window/global_every"),
                       f.Is("sliding_window/global_every", m.sliding_window->global_every) + " is not a pattern of local and global layers",
                       "0 (every layer local) or 2 to " + f.Is("num_layers", m.num_layers),
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
    if (l.value > l.max) throw InputError(f.Path(l.field), f.Is(l.field, l.value) + " is too large", "1 to " + std::to_string(l.max), "check for a typo");
  }
  try {
    (void)CountParams(m);
  } catch (const InputError& e) {
    const std::string input = where.ends_with(":") ? where.substr(0, where.size() - 1) : where;
    throw InputError(input, "the parameter count of model '" + m.name + "' overflows 64 bits", "",
                     "a size field (layers, widths, experts) is absurdly large");
  }
}

}  // namespace shardsim
