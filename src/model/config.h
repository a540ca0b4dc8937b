// ModelConfig: the numbers a Hugging Face config.json (plus generation_config.json) fixes for a
// decoder-only model, normalised across the naming conventions of the supported families (GPT-2's
// n_embd/n_layer/..., rope_parameters vs rope_theta/rope_scaling, rms_norm_eps vs layer_norm_eps).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/architecture.h"

namespace gerbil {

// Upper bounds on config.json's sizes: several times what the largest released models use (Llama 3.1 405B:
// 126 layers, 128 heads, hidden 16384, intermediate 53248; Gemma 3: 262,208 logits; Llama 4 Scout: 10M
// positions). A lying number is refused before it sizes anything, every size fits the uint32_t the GPU graph
// takes, and the product of any two sizes fits uint64_t (and int64_t) without overflow.
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 1024;  // query and key/value heads
inline constexpr int64_t kMaxHeadDim = 4096;
inline constexpr int64_t kMaxHidden = int64_t(1) << 17;
inline constexpr int64_t kMaxIntermediate = int64_t(1) << 19;
inline constexpr int64_t kMaxVocab = int64_t(1) << 22;      // also bounds every token id
inline constexpr int64_t kMaxPositions = int64_t(1) << 30;  // positions, sliding windows, rope contexts

enum class Activation { SiLU, GeluTanh };
enum class RopeType { Default, Linear, Llama3, Yarn, LongRope };
enum class AttentionKind { Full, Sliding };

struct RopeParams {
  RopeType type = RopeType::Default;
  double theta = 10000.0;
  double factor = 1.0;                 // linear, llama3, yarn; longrope: the context's growth over the original
  double low_freq_factor = 1.0;        // llama3
  double high_freq_factor = 4.0;       // llama3
  int64_t original_max_positions = 0;  // llama3, yarn, longrope: the context the model was trained at
  double beta_fast = 32, beta_slow = 1;  // yarn: rotation counts bounding the band between kept and scaled
  bool truncate = true;                  // yarn: that band's ends rounded out to whole frequencies
  // longrope: each frequency's divisor, the long set when the engine's context exceeds original_max_positions.
  std::vector<double> short_factors, long_factors;
  // yarn, longrope: cos and sin are scaled by it (so are the rotated dims of q and k, and their products by its
  // square), which keeps attention's sharpness at stretched positions.
  double attention_factor = 1.0;
};

// How a checkpoint's int4 linear layers are stored. Both run on GPTQ's kernels: AWQ is repacked at load.
enum class Int4Format {
  Gptq,  // GPTQ "v1" (quant_method gptq, checkpoint_format gptq), act-order off
  Awq,   // AutoAWQ's GEMM layout (quant_method awq, version gemm, zero_point true)
};

// A 4-bit group-quantised checkpoint (GPTQ, or AWQ once repacked: model/quant.h).
struct GptqConfig {
  Int4Format format = Int4Format::Gptq;
  int bits = 4;
  int64_t group_size = 128;  // -1 in config.json (one group over the whole input) is stored as 0
  bool sym = false;  // GPTQ only
};

// Sampling defaults from generation_config.json (absent fields stay empty).
struct GenerationDefaults {
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p, repetition_penalty;
  std::optional<int64_t> top_k, max_new_tokens, max_length;
};

struct ModelConfig {
  std::filesystem::path file;  // config.json it came from
  const ArchitectureSpec* arch = nullptr;
  std::string model_type;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double norm_eps = 0;
  Activation activation = Activation::SiLU;
  bool tie_word_embeddings = false;

  // Resolved from the architecture's BiasRules and config's attention_bias / mlp_bias.
  bool qkv_bias = false, o_bias = false, mlp_bias = false, lm_head_bias = false;

  // Rotary embedding (unused for learned positions): rope(layer) gives the layer's parameters.
  RopeParams rope_full;     // full-attention layers (all layers, for most families)
  RopeParams rope_sliding;  // sliding-window layers (differs only for Gemma3)
  double partial_rotary_factor = 1.0;
  int64_t rotary_dim = 0;  // head_dim * partial_rotary_factor, even

  std::vector<AttentionKind> layer_types;  // one per layer
  int64_t sliding_window = 0;              // > 0 when some layer slides; query i sees keys (i-W, i]
  double attention_scale = 0;              // query_pre_attn_scalar^-0.5 (Gemma3), else head_dim^-0.5
  std::optional<double> query_pre_attn_scalar;

  std::optional<int64_t> bos_token_id, pad_token_id;
  std::vector<int64_t> eos_token_ids;  // from generation_config.json first, then config.json; no repeats
  GenerationDefaults generation;

  std::optional<GptqConfig> gptq;

  const RopeParams& rope(int64_t layer) const;
  bool sliding(int64_t layer) const { return layer_types.at(std::size_t(layer)) == AttentionKind::Sliding; }
};

// Reads DIR/config.json and, when present, DIR/generation_config.json (int4 settings come from config.json's
// quantization_config or, when that is absent, from AutoGPTQ's quantize_config.json or AutoAWQ's
// quant_config.json).
ModelConfig load_config(const std::filesystem::path& dir);
// Parses already-loaded JSON; FILE names config.json in error messages. GENERATION may be null.
ModelConfig parse_config(const nlohmann::json& config, const std::filesystem::path& file,
                         const nlohmann::json* generation = nullptr);

// RoPE inverse frequencies of LAYER, rotary_dim / 2 of them: theta^(-2i/rotary_dim), adjusted by the layer's
// scaling (linear, llama3, yarn, longrope). LongRoPE takes its long factors when CONTEXT_TOKENS (the positions
// the engine holds) exceed the original context, as llama.cpp does, so that every cached key is rotated alike.
// Computed in double, rounded to float.
std::vector<float> rope_inv_freq(const ModelConfig& config, int64_t layer, int64_t context_tokens = 0);

// The positions the model is meant to hold, a default context: max_position_embeddings, or YaRN's original context
// times its factor where that is more (Qwen2.5 / Qwen3 configs given YaRN keep their original max_position_embeddings;
// vLLM derives its max_model_len the same way).
int64_t context_length(const ModelConfig& config);

std::string_view activation_name(Activation activation);

}  // namespace gerbil
