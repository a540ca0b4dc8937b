#include "model/architecture.h"

#include <fmt/format.h>

#include <array>

#include "gerbil/error.h"

namespace gerbil {
namespace {

using Names = std::vector<std::pair<Role, std::string_view>>;

// NAMES with the entries of CHANGES added, replacing any entry for the same role.
Names with(Names names, const Names& changes) {
  for (const auto& change : changes) {
    std::erase_if(names, [&](const auto& entry) { return entry.first == change.first; });
    names.push_back(change);
  }
  return names;
}

const Names kLlamaNames = {
    {Role::Embed, "model.embed_tokens"},
    {Role::FinalNorm, "model.norm"},
    {Role::LmHead, "lm_head"},
    {Role::AttnNorm, "input_layernorm"},
    {Role::MlpNorm, "post_attention_layernorm"},
    {Role::Q, "self_attn.q_proj"},
    {Role::K, "self_attn.k_proj"},
    {Role::V, "self_attn.v_proj"},
    {Role::O, "self_attn.o_proj"},
    {Role::Gate, "mlp.gate_proj"},
    {Role::Up, "mlp.up_proj"},
    {Role::Down, "mlp.down_proj"},
};
const Names kQkNormNames = {{Role::QNorm, "self_attn.q_norm"}, {Role::KNorm, "self_attn.k_norm"}};

std::vector<ArchitectureSpec> make_table() {
  std::vector<ArchitectureSpec> table;
  table.push_back({.name = "LlamaForCausalLM",
                   .qkv_bias = BiasRule::IfAttentionBias,
                   .o_bias = BiasRule::IfAttentionBias,
                   .mlp_bias = BiasRule::IfMlpBias,
                   .layer_prefix = "model.layers.{}.",
                   .names = kLlamaNames});
  table.push_back({.name = "MistralForCausalLM",
                   .sliding = SlidingRule::AllLayersIfWindow,
                   .layer_prefix = "model.layers.{}.",
                   .names = kLlamaNames});
  table.push_back({.name = "Qwen2ForCausalLM",
                   .qkv_bias = BiasRule::Always,
                   .sliding = SlidingRule::AfterMaxWindowLayers,
                   .layer_prefix = "model.layers.{}.",
                   .names = kLlamaNames});
  table.push_back({.name = "Qwen3ForCausalLM",
                   .qkv_bias = BiasRule::IfAttentionBias,
                   .o_bias = BiasRule::IfAttentionBias,
                   .sliding = SlidingRule::AfterMaxWindowLayers,
                   .layer_prefix = "model.layers.{}.",
                   .names = with(kLlamaNames, kQkNormNames)});
  table.push_back({.name = "Phi3ForCausalLM",
                   .sliding = SlidingRule::AllLayersIfWindow,
                   .layer_prefix = "model.layers.{}.",
                   .names = {{Role::Embed, "model.embed_tokens"},
                             {Role::FinalNorm, "model.norm"},
                             {Role::LmHead, "lm_head"},
                             {Role::AttnNorm, "input_layernorm"},
                             {Role::MlpNorm, "post_attention_layernorm"},
                             {Role::Qkv, "self_attn.qkv_proj"},
                             {Role::O, "self_attn.o_proj"},
                             {Role::GateUp, "mlp.gate_up_proj"},
                             {Role::Down, "mlp.down_proj"}}});
  table.push_back({.name = "PhiForCausalLM",
                   .norm = NormKind::LayerNorm,
                   .parallel_block = true,
                   .qkv_bias = BiasRule::Always,
                   .o_bias = BiasRule::Always,
                   .mlp_bias = BiasRule::Always,
                   .lm_head_bias = BiasRule::Always,
                   .default_partial_rotary = 0.5,
                   .layer_prefix = "model.layers.{}.",
                   .names = {{Role::Embed, "model.embed_tokens"},
                             {Role::FinalNorm, "model.final_layernorm"},
                             {Role::LmHead, "lm_head"},
                             {Role::AttnNorm, "input_layernorm"},
                             {Role::Q, "self_attn.q_proj"},
                             {Role::K, "self_attn.k_proj"},
                             {Role::V, "self_attn.v_proj"},
                             {Role::O, "self_attn.dense"},
                             {Role::Up, "mlp.fc1"},
                             {Role::Down, "mlp.fc2"}}});
  table.push_back({.name = "GPT2LMHeadModel",
                   .norm = NormKind::LayerNorm,
                   .positions = PositionKind::Learned,
                   .conv1d_weights = true,
                   .qkv_bias = BiasRule::Always,
                   .o_bias = BiasRule::Always,
                   .mlp_bias = BiasRule::Always,
                   .default_tied = true,
                   .default_mlp_ratio = 4,
                   .layer_prefix = "transformer.h.{}.",
                   .names = {{Role::Embed, "transformer.wte"},
                             {Role::PosEmbed, "transformer.wpe"},
                             {Role::FinalNorm, "transformer.ln_f"},
                             {Role::LmHead, "lm_head"},
                             {Role::AttnNorm, "ln_1"},
                             {Role::MlpNorm, "ln_2"},
                             {Role::Qkv, "attn.c_attn"},
                             {Role::O, "attn.c_proj"},
                             {Role::Up, "mlp.c_fc"},
                             {Role::Down, "mlp.c_proj"}}});
  table.push_back({.name = "GemmaForCausalLM",
                   .norm = NormKind::RmsNormPlusOne,
                   .embed_scale_sqrt_hidden = true,
                   .qkv_bias = BiasRule::IfAttentionBias,
                   .o_bias = BiasRule::IfAttentionBias,
                   .default_tied = true,
                   .layer_prefix = "model.layers.{}.",
                   .names = kLlamaNames});
  table.push_back(
      {.name = "Gemma3ForCausalLM",
       .norm = NormKind::RmsNormPlusOne,
       .embed_scale_sqrt_hidden = true,
       .qkv_bias = BiasRule::IfAttentionBias,
       .o_bias = BiasRule::IfAttentionBias,
       .sliding = SlidingRule::Gemma3Pattern,
       .query_pre_attn_scalar = true,
       .default_tied = true,
       .layer_prefix = "model.layers.{}.",
       .names = with(kLlamaNames, with(kQkNormNames, {{Role::AttnPostNorm, "post_attention_layernorm"},
                                                      {Role::MlpNorm, "pre_feedforward_layernorm"},
                                                      {Role::MlpPostNorm, "post_feedforward_layernorm"}}))});
  return table;
}

constexpr std::array<std::string_view, std::size_t(Role::Count)> kRoleNames = {
    "embed",    "pos_embed",     "final_norm", "lm_head", "attn_norm", "q_norm", "k_norm", "attn_post_norm",
    "mlp_norm", "mlp_post_norm", "q",          "k",       "v",         "qkv",    "o",      "gate",
    "up",       "gate_up",       "down",
};

}  // namespace

std::string_view role_name(Role role) { return kRoleNames.at(std::size_t(role)); }
bool is_layer_role(Role role) { return role >= Role::AttnNorm && role < Role::Count; }
bool is_norm_role(Role role) {
  return role == Role::FinalNorm || (role >= Role::AttnNorm && role <= Role::MlpPostNorm);
}
bool is_linear_role(Role role) { return role == Role::LmHead || (role >= Role::Q && role < Role::Count); }

bool stored_in_out(const ArchitectureSpec& arch, Role role) {
  return arch.conv1d_weights && is_linear_role(role) && role != Role::LmHead;
}

bool ArchitectureSpec::has(Role role) const { return !base_name(role).empty(); }

std::string_view ArchitectureSpec::base_name(Role role) const {
  for (const auto& [entry_role, entry_name] : names)
    if (entry_role == role) return entry_name;
  return {};
}

std::string ArchitectureSpec::tensor_name(Role role, int layer, std::string_view suffix) const {
  std::string_view base = base_name(role);
  if (base.empty()) fail("{} has no {} tensor", name, role_name(role));
  std::string full = is_layer_role(role) ? fmt::format(fmt::runtime(layer_prefix), layer) : std::string();
  return fmt::format("{}{}.{}", full, base, suffix);
}

const std::vector<ArchitectureSpec>& architectures() {
  static const std::vector<ArchitectureSpec> table = make_table();
  return table;
}

const ArchitectureSpec* find_architecture(std::string_view name) {
  for (const auto& spec : architectures())
    if (spec.name == name) return &spec;
  return nullptr;
}

std::string supported_architectures() {
  std::vector<std::string_view> names;
  for (const auto& spec : architectures()) names.push_back(spec.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace gerbil
