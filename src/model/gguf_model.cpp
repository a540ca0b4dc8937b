#include "model/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <fstream>

#include "gerbil/error.h"
#include "model/architecture.h"

namespace gerbil {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A `general.architecture` gerbil runs, and the Hugging Face family it was converted from.
struct GgufFamily {
  std::string_view gguf_name;
  std::string_view hf_architecture;
  std::string_view model_type;
  std::string_view activation;
  bool permuted_qk = false;   // llama.cpp's converter reorders Q/K rows for its interleaved rope
  bool norms_plus_one = false;  // ... and stores Gemma's norms as 1 + w
};

constexpr GgufFamily kFamilies[] = {
    {"llama", "LlamaForCausalLM", "llama", "silu", true},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", "silu"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", "silu"},
    {"gemma", "GemmaForCausalLM", "gemma", "gelu_pytorch_tanh", false, true},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", "gelu_pytorch_tanh", false, true},
    {"phi3", "Phi3ForCausalLM", "phi3", "silu"},
    {"phi2", "PhiForCausalLM", "phi", "gelu_new"},
    {"gpt2", "GPT2LMHeadModel", "gpt2", "gelu_new"},  // its Conv1D weights stored [out, in] (stored_in_out)
};

const GgufFamily& family_of(const Gguf& gguf) {
  std::string_view arch = gguf.require_string("general.architecture");
  for (const GgufFamily& family : kFamilies)
    if (family.gguf_name == arch) return family;
  std::string supported;
  for (const GgufFamily& family : kFamilies) supported += (supported.empty() ? "" : ", ") + std::string(family.gguf_name);
  fail("{}: general.architecture \"{}\" is not supported (supported: {})", gguf.name(), arch, supported);
}

// llama.cpp's tensor base names for gerbil's roles (blk.N.<name> for per-layer roles).
std::string_view gguf_role_name(Role role, const ArchitectureSpec& arch) {
  switch (role) {
    case Role::Embed: return "token_embd";
    case Role::PosEmbed: return "position_embd";
    case Role::FinalNorm: return "output_norm";
    case Role::LmHead: return "output";
    case Role::AttnNorm: return "attn_norm";
    case Role::QNorm: return "attn_q_norm";
    case Role::KNorm: return "attn_k_norm";
    case Role::AttnPostNorm: return "post_attention_norm";
    case Role::MlpNorm: return "ffn_norm";
    case Role::MlpPostNorm: return "post_ffw_norm";
    case Role::Q: return "attn_q";
    case Role::K: return "attn_k";
    case Role::V: return "attn_v";
    case Role::Qkv: return "attn_qkv";
    case Role::O: return "attn_output";
    case Role::Gate: return "ffn_gate";
    case Role::Up: return arch.has(Role::GateUp) ? "" : "ffn_up";
    case Role::GateUp: return "ffn_up";  // Phi3 keeps gate and up fused in ffn_up
    case Role::Down: return "ffn_down";
    case Role::Count: break;
  }
  return "";
}

// Where a GGUF tensor goes: its role, layer (-1 for globals) and part ("weight" / "bias").
struct Placement {
  Role role = Role::Embed;
  int layer = -1;
  std::string part;
};

std::optional<Placement> place(std::string_view name, const ArchitectureSpec& arch, int64_t layers) {
  std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  Placement p;
  p.part = std::string(name.substr(dot + 1));
  if (p.part != "weight" && p.part != "bias") return std::nullopt;
  std::string_view base = name.substr(0, dot);
  if (base.starts_with("blk.")) {
    std::size_t next = base.find('.', 4);
    if (next == std::string_view::npos) return std::nullopt;
    std::string_view index = base.substr(4, next - 4);
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    p.layer = std::stoi(std::string(index));
    if (p.layer >= layers) return std::nullopt;
    base = base.substr(next + 1);
  }
  for (int r = 0; r < int(Role::Count); ++r) {
    Role role = Role(r);
    if (is_layer_role(role) != (p.layer >= 0) || !arch.has(role) || gguf_role_name(role, arch) != base) continue;
    p.role = role;
    return p;
  }
  return std::nullopt;
}

const GgufTensor& require_tensor(const Gguf& gguf, std::string_view name) {
  if (const GgufTensor* t = gguf.find_tensor(name)) return *t;
  fail("{}: tensor \"{}\" is missing", gguf.name(), name);
}

json rope_parameters(const Gguf& gguf, const std::string& prefix, double theta) {
  json rope = {{"rope_type", "default"}, {"rope_theta", theta}};
  std::string type(gguf.get_string(prefix + "rope.scaling.type").value_or("none"));
  double factor = gguf.get_float(prefix + "rope.scaling.factor").value_or(1.0);
  if (type == "linear" && factor != 1.0) {
    rope["rope_type"] = "linear";
    rope["factor"] = factor;
  } else if (type == "yarn") {  // llama.cpp's converter writes the factor and the original context (Qwen2.5, Qwen3)
    rope["rope_type"] = "yarn";
    rope["factor"] = factor;
    if (auto original = gguf.get_int(prefix + "rope.scaling.original_context_length"))
      rope["original_max_position_embeddings"] = *original;
    for (auto [key, field] : {std::pair{"rope.scaling.yarn_beta_fast", "beta_fast"}, {"rope.scaling.yarn_beta_slow", "beta_slow"}})
      if (auto beta = gguf.get_float(prefix + key)) rope[field] = *beta;
    // What llama.cpp multiplies into YaRN's own attention factor (DeepSeek's log multiplier, a given factor) has no
    // counterpart in the config's terms: refused unless neutral.
    for (auto [key, neutral] : {std::pair{"rope.scaling.yarn_log_multiplier", 0.0}, {"rope.scaling.attn_factor", 1.0}})
      if (auto value = gguf.get_float(prefix + key); value && *value != neutral)
        fail("{}: {}{} = {} with YaRN is not supported (only {})", gguf.name(), prefix, key, *value, neutral);
  } else if (type != "none" && type != "linear" && type != "longrope") {  // longrope: its factor tensors say the rest
    fail("{}: {}rope.scaling.type \"{}\" is not supported (none, linear, yarn and longrope are)", gguf.name(), prefix,
         type);
  }
  return rope;
}

// The positive finite factors of a one-dimensional F32 tensor (rope_freqs, rope_factors_long / _short), COUNT of them.
std::vector<double> frequency_factors(const Gguf& gguf, std::string_view name, int64_t count) {
  const GgufTensor& tensor = require_tensor(gguf, name);
  std::string what = fmt::format("{}: tensor \"{}\"", gguf.name(), name);
  if (count < 1 || tensor.numel() != uint64_t(count))
    fail("{} holds {} factors for {} rotary frequencies", what, tensor.numel(), count);
  std::vector<float> factors(tensor.numel());
  dequantize(tensor.type, tensor.bytes, factors, what);
  for (std::size_t i = 0; i < factors.size(); ++i)
    if (!(std::isfinite(factors[i]) && factors[i] > 0))
      fail("{}: factor {} is {}; frequency factors are positive", what, i, factors[i]);
  return {factors.begin(), factors.end()};
}

// Phi-3's LongRoPE (128k, 3.5, Phi-4-mini), as llama.cpp's converter stores it: the two factor sets as tensors,
// the original context and the attention factor as metadata (the context length is the stretched one).
json longrope_from_factors(const Gguf& gguf, const std::string& prefix, json rope, int64_t rotary_dim) {
  rope["rope_type"] = "longrope";
  rope["short_factor"] = frequency_factors(gguf, "rope_factors_short.weight", rotary_dim / 2);
  rope["long_factor"] = frequency_factors(gguf, "rope_factors_long.weight", rotary_dim / 2);
  std::string original_key = prefix + "rope.scaling.original_context_length";
  std::optional<int64_t> original = gguf.get_int(original_key);
  if (!original) fail("{}: LongRoPE factors without metadata \"{}\"", gguf.name(), original_key);
  rope["original_max_position_embeddings"] = *original;
  if (auto attention = gguf.get_float(prefix + "rope.scaling.attn_factor")) rope["attention_factor"] = *attention;
  return rope;
}

// Llama 3.1's rope scaling, which llama.cpp's converter stores as one factor per frequency (rope_freqs.weight:
// frequency i is divided by factors[i]), recovered as the rope_parameters that produce those factors: the
// largest factor is `factor`; between 1 and it the factors follow 1 / ((1 - s) / factor + s) with
// s = (context / wavelength - low) / (high - low), a line in 1 / wavelength whose slope and intercept give
// low and high for the context the file states. Only those ratios matter, so the result is exact.
json llama3_rope_from_factors(const Gguf& gguf, const std::string& prefix, json rope, int64_t rotary_dim) {
  std::vector<double> factors = frequency_factors(gguf, "rope_freqs.weight", rotary_dim / 2);
  std::string what = fmt::format("{}: tensor \"rope_freqs.weight\"", gguf.name());
  double theta = rope["rope_theta"].get<double>();
  double factor = *std::max_element(factors.begin(), factors.end());
  double context = double(gguf.get_int(prefix + "rope.scaling.original_context_length").value_or(8192));
  // Points (1 / wavelength, s) of the frequencies strictly between the two plateaus.
  std::vector<std::pair<double, double>> band;
  for (std::size_t i = 0; i < factors.size(); ++i) {
    double f = factors[i];
    if (!(f > 1.0 + 1e-6 && f < factor * (1 - 1e-6))) continue;
    double inv = std::pow(theta, -double(2 * i) / double(rotary_dim));
    band.emplace_back(inv / (2 * std::numbers::pi), (1 / f - 1 / factor) / (1 - 1 / factor));
  }
  if (band.size() < 2)
    fail("{}: fewer than two factors lie between 1 and {}; Llama 3's low/high frequency bounds cannot be recovered",
         what, factor);
  auto [x0, s0] = band.front();
  auto [x1, s1] = band.back();
  double slope = (s1 - s0) / (x1 - x0);  // = context / (high - low)
  double intercept = s0 - slope * x0;    // = -low / (high - low)
  double span = context / slope;
  rope["rope_type"] = "llama3";
  rope["factor"] = factor;
  rope["low_freq_factor"] = -intercept * span;
  rope["high_freq_factor"] = -intercept * span + span;
  rope["original_max_position_embeddings"] = int64_t(context);
  return rope;
}

}  // namespace

std::string gguf_tensor_name(const ArchitectureSpec& arch, Role role, int layer, std::string_view part) {
  std::string_view base = gguf_role_name(role, arch);
  if (layer < 0) return fmt::format("{}.{}", base, part);
  return fmt::format("blk.{}.{}.{}", layer, base, part);
}

// How the file stretches its rotary embedding, by what llama.cpp's converter leaves of each kind.
std::string rope_scaling_kind(const Gguf& gguf, std::string_view arch) {
  if (gguf.find_tensor("rope_factors_long.weight")) return "longrope";
  if (gguf.find_tensor("rope_freqs.weight")) return "llama3 (per-frequency factors)";
  if (arch.empty()) return "none";
  return std::string(gguf.get_string(std::string(arch) + ".rope.scaling.type").value_or("none"));
}

json gguf_summary(const Gguf& gguf) {
  std::string_view arch = gguf.get_string("general.architecture").value_or("");
  json types = json::object(), type_bytes = json::object();
  uint64_t parameters = 0;
  for (const GgufTensor& tensor : gguf.tensors()) {
    std::string type(ggml_type_name(tensor.type));
    types[type] = types.value(type, uint64_t(0)) + 1;
    type_bytes[type] = type_bytes.value(type, uint64_t(0)) + tensor.bytes.size();
    parameters += tensor.numel();
  }
  std::optional<int64_t> context =
      arch.empty() ? std::nullopt : gguf.get_int(std::string(arch) + ".context_length");
  std::optional<std::string_view> tokenizer = gguf.get_string("tokenizer.ggml.model");
  return {{"file", gguf.name()},
          {"version", gguf.version()},
          {"architecture", arch},
          {"name", gguf.get_string("general.name").value_or("")},
          {"parameters", parameters},
          {"context_length", context ? json(*context) : json(nullptr)},
          {"rope_scaling", rope_scaling_kind(gguf, arch)},
          {"tensors", gguf.tensors().size()},
          {"types", types},
          {"type_bytes", type_bytes},
          {"chat_template", gguf.find("tokenizer.chat_template") != nullptr},
          {"tokenizer", tokenizer ? json(std::string(*tokenizer)) : json(nullptr)}};
}

bool is_gguf_file(const fs::path& path) {
  std::error_code error;
  if (!fs::is_regular_file(path, error)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

json gguf_config_json(const Gguf& gguf) {
  const GgufFamily& family = family_of(gguf);
  const std::string prefix = std::string(family.gguf_name) + ".";
  auto required = [&](const char* key) { return gguf.require_int(prefix + key); };

  json config;
  config["architectures"] = {family.hf_architecture};
  config["model_type"] = family.model_type;
  config["hidden_act"] = family.activation;
  config["num_hidden_layers"] = required("block_count");
  config["hidden_size"] = required("embedding_length");
  config["intermediate_size"] = required("feed_forward_length");
  config["max_position_embeddings"] = required("context_length");
  int64_t heads = required("attention.head_count");
  if (heads <= 0) fail("{}: metadata \"{}attention.head_count\" must be positive, got {}", gguf.name(), prefix, heads);
  config["num_attention_heads"] = heads;
  config["num_key_value_heads"] = gguf.get_int(prefix + "attention.head_count_kv").value_or(heads);
  std::optional<int64_t> head_dim = gguf.get_int(prefix + "attention.key_length");
  if (head_dim) config["head_dim"] = *head_dim;
  std::optional<double> eps = gguf.get_float(prefix + "attention.layer_norm_rms_epsilon");
  if (!eps) eps = gguf.get_float(prefix + "attention.layer_norm_epsilon");
  if (!eps)
    fail("{}: neither {}attention.layer_norm_rms_epsilon nor {}attention.layer_norm_epsilon is present", gguf.name(),
         prefix, prefix);
  config["rms_norm_eps"] = *eps;
  // The vocabulary is the embedding table's row count (tokenizer arrays may be padded differently).
  const GgufTensor& embed = require_tensor(gguf, "token_embd.weight");
  if (embed.dims.size() != 2) fail("{}: tensor \"token_embd.weight\" is not a matrix", gguf.name());
  config["vocab_size"] = embed.dims[1];
  config["tie_word_embeddings"] = gguf.find_tensor("output.weight") == nullptr;
  config["attention_bias"] = gguf.find_tensor("blk.0.attn_q.bias") != nullptr;
  config["mlp_bias"] = gguf.find_tensor("blk.0.ffn_up.bias") != nullptr;
  if (auto bos = gguf.get_int("tokenizer.ggml.bos_token_id")) config["bos_token_id"] = *bos;
  // A turn ends at any of the end-of-generation ids llama.cpp stops at (Phi-3's <|end|>, Llama 3.1's
  // <|eom_id|>, Gemma's <end_of_turn> are not the file's EOS).
  json eos = json::array();
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (auto id = gguf.get_int(key); id && std::find(eos.begin(), eos.end(), json(*id)) == eos.end()) eos.push_back(*id);
  if (!eos.empty()) config["eos_token_id"] = eos;
  if (auto pad = gguf.get_int("tokenizer.ggml.padding_token_id")) config["pad_token_id"] = *pad;

  if (family.gguf_name == "gpt2") return config;  // learned positions: no rope
  double theta = gguf.get_float(prefix + "rope.freq_base").value_or(10000.0);
  json rope = rope_parameters(gguf, prefix, theta);
  if (auto rotary = gguf.get_int(prefix + "rope.dimension_count")) {
    int64_t dim = head_dim.value_or(config["hidden_size"].get<int64_t>() / heads);
    // The config takes the rotary dimension as int(head_dim * factor): half a dimension more makes that
    // truncate to the file's count exactly, where rotary / dim alone may fall just under it (60 of 104).
    if (*rotary != dim) config["partial_rotary_factor"] = (double(*rotary) + 0.5) / double(dim);
  }
  int64_t rotary = gguf.get_int(prefix + "rope.dimension_count").value_or(head_dim.value_or(
      config["hidden_size"].get<int64_t>() / heads));
  if (gguf.find_tensor("rope_freqs.weight")) rope = llama3_rope_from_factors(gguf, prefix, rope, rotary);
  if (gguf.find_tensor("rope_factors_long.weight") || gguf.find_tensor("rope_factors_short.weight")) {
    if (rope["rope_type"] != "default")
      fail("{}: LongRoPE factor tensors beside rope scaling {} (a file holds one scaling)", gguf.name(),
           rope["rope_type"].dump());
    rope = longrope_from_factors(gguf, prefix, rope, rotary);
  } else if (gguf.get_string(prefix + "rope.scaling.type") == "longrope") {
    fail("{}: {}rope.scaling.type is \"longrope\" but the file holds no rope_factors_long / rope_factors_short "
         "tensors to say how", gguf.name(), prefix);
  }
  if (auto window = gguf.get_int(prefix + "attention.sliding_window"); window && *window > 0)
    config["sliding_window"] = *window;
  if (family.gguf_name == "gemma3") {
    // llama.cpp's Gemma 3: every sixth layer global, local layers at base 10000, q scaled by key_length but
    // for the 27B model (62 layers), whose scale is hidden_size / heads (the files carry no scale of their own).
    int64_t layers = config["num_hidden_layers"].get<int64_t>();
    config["query_pre_attn_scalar"] =
        layers == 62 || !head_dim ? config["hidden_size"].get<int64_t>() / heads : *head_dim;
    config["sliding_window_pattern"] = gguf.get_int(prefix + "attention.sliding_window_pattern").value_or(6);
    json local = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
    config["rope_parameters"] = {{"full_attention", rope}, {"sliding_attention", local}};
    return config;
  }
  config["rope_parameters"] = rope;
  return config;
}

namespace {

// Keeps the file mapped (block and float views point into it) and owns the bytes of the tensors that had to
// be rewritten (norms and biases in f32, permuted Q/K rows).
struct ConvertedTensors {
  Gguf file;
  std::vector<std::vector<std::byte>> buffers;
};

// Undoes llama.cpp's permute(): within each head of ROWS_PER_HEAD rows, stored row 2j + i is Hugging Face
// row i * rows_per_head / 2 + j. Rows are moved whole (ROW_BYTES each), so ggml blocks, which never cross
// a row, move with them.
std::vector<std::byte> unpermute_rows(std::span<const std::byte> stored, int64_t rows, int64_t heads,
                                      const std::string& what) {
  if (heads <= 0 || rows <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
    fail("{}: {} rows do not split into {} heads of an even size", what, rows, heads);
  const std::size_t row_bytes = stored.size() / std::size_t(rows);
  const int64_t per_head = rows / heads;
  std::vector<std::byte> out(stored.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < per_head / 2; ++j)
      for (int64_t i = 0; i < 2; ++i)
        std::memcpy(&out[std::size_t(h * per_head + i * per_head / 2 + j) * row_bytes],
                    &stored[std::size_t(h * per_head + 2 * j + i) * row_bytes], row_bytes);
  return out;
}

// [rows, cols] elements of ELEMENT bytes each, transposed to [cols, rows].
std::vector<std::byte> transposed(std::span<const std::byte> m, int64_t rows, int64_t cols, std::size_t element) {
  std::vector<std::byte> out(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&out[std::size_t(c * rows + r) * element], &m[std::size_t(r * cols + c) * element], element);
  return out;
}

// The safetensors dtype of GGUF's float types, or nothing for block types.
std::optional<DType> float_dtype(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return DType::F32;
    case GgmlType::F16: return DType::F16;
    case GgmlType::BF16: return DType::BF16;
    default: return std::nullopt;
  }
}

// Norm weights, biases and learned positions are small and read as f32 on the host; matrices (embeddings and
// linear layers) keep their file's bytes.
bool host_f32(const Placement& p) { return p.part == "bias" || is_norm_role(p.role) || p.role == Role::PosEmbed; }

}  // namespace

Safetensors gguf_tensors(const Gguf& gguf, const json& config) {
  const GgufFamily& family = family_of(gguf);
  const ArchitectureSpec* arch = find_architecture(family.hf_architecture);
  if (!arch) fail("{}: architecture {} is not in gerbil's table", gguf.name(), family.hf_architecture);
  const int64_t layers = config["num_hidden_layers"].get<int64_t>();
  const int64_t heads = config["num_attention_heads"].get<int64_t>();
  const int64_t kv_heads = config["num_key_value_heads"].get<int64_t>();

  auto owner = std::make_shared<ConvertedTensors>(ConvertedTensors{gguf, {}});
  auto keep = [&](std::vector<std::byte> bytes) -> std::span<const std::byte> {
    return owner->buffers.emplace_back(std::move(bytes));
  };
  std::vector<TensorView> views;
  for (const GgufTensor& tensor : gguf.tensors()) {
    std::string what = fmt::format("{}: tensor \"{}\"", gguf.name(), tensor.name);
    if (tensor.name == "rope_freqs.weight" || tensor.name == "rope_factors_long.weight" ||
        tensor.name == "rope_factors_short.weight")
      continue;  // read into the config's rope_parameters
    std::optional<Placement> p = place(tensor.name, *arch, layers);
    if (!p) fail("{} is not a tensor gerbil knows for architecture {}", what, family.gguf_name);
    const GgmlTypeInfo& type = ggml_type_info(tensor.type);
    if (!type.dequantizable)
      fail("{}: ggml type {} is not supported (gerbil reads {})", what, type.name, dequantizable_types());
    TensorView view{arch->tensor_name(p->role, p->layer, p->part), DType::F32, tensor.shape(), tensor.bytes,
                    fs::path(gguf.name()), std::nullopt};
    const int64_t rows = view.shape.size() == 2 ? view.shape[0] : view.numel();
    if (host_f32(*p)) {
      std::vector<float> values(tensor.numel());
      dequantize(tensor.type, tensor.bytes, values, what);
      if (family.norms_plus_one && is_norm_role(p->role) && p->part == "weight")
        for (float& v : values) v -= 1.0f;
      view.bytes = keep(std::vector<std::byte>(std::as_bytes(std::span(values)).begin(),
                                               std::as_bytes(std::span(values)).end()));
    } else if (std::optional<DType> dtype = float_dtype(tensor.type)) {
      view.dtype = *dtype;
    } else {
      view.block_type = tensor.type;
    }
    if (family.permuted_qk && (p->role == Role::Q || p->role == Role::K))
      view.bytes = keep(unpermute_rows(view.bytes, rows, p->role == Role::Q ? heads : kv_heads, what));
    // GGUF stores GPT-2's Conv1D weights [out, in]; float ones go back to the checkpoint's [in, out], block
    // ones stay [out, in] (a block view is always [out, in]).
    if (stored_in_out(*arch, p->role) && p->part == "weight" && !view.block_type && view.shape.size() == 2) {
      view.bytes = keep(transposed(view.bytes, view.shape[0], view.shape[1], dtype_size(view.dtype)));
      std::swap(view.shape[0], view.shape[1]);
    }
    views.push_back(std::move(view));
  }
  return Safetensors::from_memory(std::move(views), std::move(owner), gguf.name());
}

}  // namespace gerbil
