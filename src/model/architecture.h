// What distinguishes one decoder-only family from another, as data: one ArchitectureSpec per Hugging
// Face `architectures` entry drives both the weight loader (which tensors must exist, under which
// names) and the single decoder-block graph builder. Adding a family is one table entry in
// architecture.cpp. What config.json decides (activation function, partial rotary factor, biases
// switched by attention_bias/mlp_bias, sliding layers) is resolved into ModelConfig (config.h).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gerbil {

enum class NormKind {
  RmsNorm,         // x / rms(x) * w
  RmsNormPlusOne,  // x / rms(x) * (1 + w)   (Gemma: the stored w is centred on 0)
  LayerNorm,       // (x - mean) / std * w + b
};

enum class PositionKind {
  Rotary,   // RoPE on q and k (on the first partial_rotary_factor * head_dim dims of each head)
  Learned,  // a position-embedding table added to the token embeddings (GPT-2)
};

// When a group of linear layers carries a bias.
enum class BiasRule { Never, Always, IfAttentionBias, IfMlpBias };

// Which layers use sliding-window attention when config.json has no explicit `layer_types`.
enum class SlidingRule {
  None,                  // every layer attends to everything
  AllLayersIfWindow,     // Mistral, Phi3: all layers slide when `sliding_window` is set
  AfterMaxWindowLayers,  // Qwen2/3: with `use_sliding_window`, layers >= `max_window_layers` slide
  Gemma3Pattern,         // every `sliding_window_pattern`-th layer is global, the rest slide
};

// Logical tensors. Global roles, then per-layer norms, then per-layer linear layers.
enum class Role {
  Embed,         // [vocab, hidden]
  PosEmbed,      // [max_positions, hidden] (learned positions only)
  FinalNorm,     // [hidden]
  LmHead,        // [vocab, hidden]; absent from the file when embeddings are tied
  AttnNorm,      // pre-attention norm, [hidden] (Phi: the one norm of its parallel block)
  QNorm,         // per-head norm of q, [head_dim]
  KNorm,         // per-head norm of k, [head_dim]
  AttnPostNorm,  // norm of the attention output before the residual add (Gemma3)
  MlpNorm,       // pre-MLP norm, [hidden]
  MlpPostNorm,   // norm of the MLP output before the residual add (Gemma3)
  Q,
  K,
  V,
  Qkv,  // fused [q; k; v] rows (Phi3 qkv_proj, GPT-2 c_attn)
  O,
  Gate,
  Up,      // gated MLP: down(act(gate(x)) * up(x)); plain MLP: down(act(up(x)))
  GateUp,  // fused [gate; up] rows (Phi3)
  Down,
  Count
};

std::string_view role_name(Role role);
bool is_layer_role(Role role);
bool is_norm_role(Role role);    // FinalNorm and the per-layer norms
bool is_linear_role(Role role);  // LmHead and the per-layer linear layers
struct ArchitectureSpec;
// Whether ARCH's checkpoints store ROLE's weight [in, out]: GPT-2's Conv1D layers, not its lm_head (an
// nn.Linear, [out, in] like every other family's linear weights).
bool stored_in_out(const ArchitectureSpec& arch, Role role);

struct ArchitectureSpec {
  std::string_view name;  // the Hugging Face `architectures` entry
  NormKind norm = NormKind::RmsNorm;
  PositionKind positions = PositionKind::Rotary;
  bool parallel_block = false;           // h = x + attn(norm(x)) + mlp(norm(x)) (Phi)
  bool embed_scale_sqrt_hidden = false;  // embeddings multiplied by sqrt(hidden) (Gemma)
  bool conv1d_weights = false;           // linear weights stored [in, out], y = x W + b (GPT-2)
  BiasRule qkv_bias = BiasRule::Never;   // q, k, v (or the fused qkv)
  BiasRule o_bias = BiasRule::Never;
  BiasRule mlp_bias = BiasRule::Never;  // gate, up, down
  BiasRule lm_head_bias = BiasRule::Never;
  SlidingRule sliding = SlidingRule::None;
  bool query_pre_attn_scalar = false;  // attention scale query_pre_attn_scalar^-0.5, not head_dim^-0.5 (Gemma3)
  // Defaults for config.json fields the family's Hugging Face config class fills in when absent.
  bool default_tied = false;
  double default_partial_rotary = 1.0;
  int default_mlp_ratio =
      0;  // intermediate = ratio * hidden when absent (GPT-2's n_inner: null); 0 = required
  // Tensor base names ("+.weight"/".bias"/".qweight"...): global roles are full names, per-layer roles
  // follow `layer_prefix` with {} standing for the layer index. Roles not listed do not exist.
  std::string_view layer_prefix;
  std::vector<std::pair<Role, std::string_view>> names;

  bool has(Role role) const;
  std::string_view base_name(Role role) const;  // "" when absent
  // Full tensor name, e.g. tensor_name(Role::Q, 3, "weight") = "model.layers.3.self_attn.q_proj.weight".
  std::string tensor_name(Role role, int layer, std::string_view suffix) const;

  bool gated_mlp() const { return has(Role::Gate) || has(Role::GateUp); }
  bool qk_norm() const { return has(Role::QNorm); }
  bool sandwich_norms() const { return has(Role::AttnPostNorm); }
  bool norm_has_bias() const { return norm == NormKind::LayerNorm; }
};

const std::vector<ArchitectureSpec>& architectures();
// nullptr when NAME is not supported.
const ArchitectureSpec* find_architecture(std::string_view name);
// "GPT2LMHeadModel, Gemma3ForCausalLM, ..." for error messages.
std::string supported_architectures();

}  // namespace gerbil
