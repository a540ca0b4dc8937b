#include "model/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <utility>
#include <vector>

#include "gerbil/error.h"
#include "json/json_file.h"

namespace gerbil {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Reads fields of one JSON object, naming the file and the field in every error. A field may have
// several spellings (hidden_size / n_embd); the first one present and not null wins. Nested objects
// get a prefix so errors name "rope_parameters.factor".
class Fields {
 public:
  Fields(const json& object, fs::path file, std::string prefix = "")
      : object_(object), file_(std::move(file)), prefix_(std::move(prefix)) {}

  [[noreturn]] void error(std::string_view field, std::string_view message) const {
    fail("{}: field \"{}{}\" {}", file_.string(), prefix_, field, message);
  }

  // The first of KEYS that is present and not null, with the key that matched.
  const json* find(std::initializer_list<std::string_view> keys, std::string_view* matched = nullptr) const {
    for (std::string_view key : keys) {
      auto it = object_.find(std::string(key));
      if (it != object_.end() && !it->is_null()) {
        if (matched) *matched = key;
        return &*it;
      }
    }
    return nullptr;
  }

  std::optional<int64_t> optional_int(std::initializer_list<std::string_view> keys) const {
    std::string_view key;
    const json* value = find(keys, &key);
    if (!value) return std::nullopt;
    if (!value->is_number_integer()) error(key, fmt::format("must be an integer, got {}", value->dump()));
    // Read as unsigned, 2^63 and above would wrap to negative numbers.
    if (value->is_number_unsigned() && value->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      error(key, fmt::format("is {}, too large", value->dump()));
    return value->get<int64_t>();
  }

  // A required integer in [1, MAX].
  int64_t positive_int(std::initializer_list<std::string_view> keys, int64_t max) const {
    std::optional<int64_t> value = optional_int(keys);
    if (!value) missing(keys);
    if (*value <= 0) error(matched_key(keys), fmt::format("must be positive, got {}", *value));
    if (*value > max) error(matched_key(keys), fmt::format("is {}, more than the {} gerbil accepts", *value, max));
    return *value;
  }

  std::optional<double> optional_number(std::initializer_list<std::string_view> keys) const {
    std::string_view key;
    const json* value = find(keys, &key);
    if (!value) return std::nullopt;
    if (!value->is_number()) error(key, fmt::format("must be a number, got {}", value->dump()));
    return value->get<double>();
  }

  double positive_number(std::initializer_list<std::string_view> keys, std::optional<double> fallback) const {
    std::optional<double> value = optional_number(keys);
    if (!value && !fallback) missing(keys);
    if (!value) return *fallback;
    if (!(*value > 0) || !std::isfinite(*value))
      error(matched_key(keys), fmt::format("must be a positive number, got {}", *value));
    return *value;
  }

  // A required non-empty list of positive finite numbers.
  std::vector<double> positive_numbers(std::string_view key) const {
    const json* value = find({key});
    if (!value) missing({key});
    if (!value->is_array() || value->empty()) error(key, fmt::format("must be a list of numbers, got {}", value->dump()));
    std::vector<double> numbers;
    for (const json& number : *value) {
      if (!number.is_number() || !(number.get<double>() > 0) || !std::isfinite(number.get<double>()))
        error(key, fmt::format("must hold positive numbers, got {} at index {}", number.dump(), numbers.size()));
      numbers.push_back(number.get<double>());
    }
    return numbers;
  }

  std::optional<bool> optional_bool(std::string_view key) const {
    const json* value = find({key});
    if (!value) return std::nullopt;
    if (!value->is_boolean()) error(key, fmt::format("must be true or false, got {}", value->dump()));
    return value->get<bool>();
  }

  std::optional<std::string> optional_string(std::initializer_list<std::string_view> keys) const {
    std::string_view key;
    const json* value = find(keys, &key);
    if (!value) return std::nullopt;
    if (!value->is_string()) error(key, fmt::format("must be a string, got {}", value->dump()));
    return value->get<std::string>();
  }

  // A nested object (or nullopt), whose errors will carry the nested field path.
  std::optional<Fields> optional_object(std::string_view key) const {
    const json* value = find({key});
    if (!value) return std::nullopt;
    if (!value->is_object()) error(key, fmt::format("must be an object, got {}", value->dump()));
    return Fields(*value, file_, fmt::format("{}{}.", prefix_, key));
  }

  // Token ids: an integer, a list of integers, or absent/null. Each is below kMaxVocab, so fits int32_t.
  std::vector<int64_t> token_ids(std::string_view key) const {
    const json* value = find({key});
    if (!value) return {};
    std::vector<int64_t> ids;
    for (const json& id : value->is_array() ? *value : json::array({*value})) {
      bool in_range = id.is_number_unsigned() ? id.get<uint64_t>() < uint64_t(kMaxVocab)
                                               : id.is_number_integer() && id.get<int64_t>() >= 0 &&
                                                     id.get<int64_t>() < kMaxVocab;
      if (!in_range)
        error(key, fmt::format("must be a token id (0 to {}) or a list of token ids, got {}", kMaxVocab - 1,
                               value->dump()));
      ids.push_back(id.get<int64_t>());
    }
    return ids;
  }

  // Refuses FIELD unless it is absent, null or NEUTRAL: it sets WHAT, which gerbil does not compute.
  void require_neutral(std::string_view field, const json& neutral, std::string_view what) const {
    const json* value = find({field});
    if (value && *value != neutral)
      error(field, fmt::format("is {}, which asks for {}; gerbil does not support that (only {} or null)",
                               value->dump(), what, neutral.dump()));
  }

  // The spelling of KEYS present in the object (the first one when none is), for errors.
  std::string_view matched_key(std::initializer_list<std::string_view> keys) const {
    std::string_view key = *keys.begin();
    find(keys, &key);
    return key;
  }

  const fs::path& file() const { return file_; }

 private:
  [[noreturn]] void missing(std::initializer_list<std::string_view> keys) const {
    std::vector<std::string_view> others(keys.begin() + 1, keys.end());
    error(*keys.begin(), others.empty()
                             ? "is missing"
                             : fmt::format("is missing (also looked for {})", fmt::join(others, ", ")));
  }

  const json& object_;
  fs::path file_;
  std::string prefix_;
};

const ArchitectureSpec& parse_architecture(const Fields& fields) {
  const json* list = fields.find({"architectures"});
  if (!list)
    fields.error("architectures", fmt::format("is missing; supported: {}", supported_architectures()));
  if (!list->is_array() || list->empty())
    fields.error("architectures", fmt::format("must be a non-empty list, got {}", list->dump()));
  for (const json& name : *list)
    if (name.is_string())
      if (const ArchitectureSpec* spec = find_architecture(name.get<std::string>())) return *spec;
  fields.error("architectures", fmt::format("names no supported architecture ({}); supported: {}",
                                            list->dump(), supported_architectures()));
}

bool resolve_bias(BiasRule rule, bool attention_bias, bool mlp_bias) {
  switch (rule) {
    case BiasRule::Never: return false;
    case BiasRule::Always: return true;
    case BiasRule::IfAttentionBias: return attention_bias;
    case BiasRule::IfMlpBias: return mlp_bias;
  }
  return false;
}

Activation parse_activation(const Fields& fields) {
  std::initializer_list<std::string_view> keys = {"hidden_activation", "hidden_act", "activation_function"};
  std::string_view key = "hidden_act";
  fields.find(keys, &key);  // the spelling this config uses, for the error message
  std::optional<std::string> name = fields.optional_string(keys);
  if (!name)
    fields.error("hidden_act", "is missing (also looked for hidden_activation, activation_function)");
  if (*name == "silu" || *name == "swish") return Activation::SiLU;
  // All three are the tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).
  if (*name == "gelu_pytorch_tanh" || *name == "gelu_new" || *name == "gelu_fast")
    return Activation::GeluTanh;
  fields.error(key, fmt::format("names unsupported activation \"{}\"; supported: silu, gelu_pytorch_tanh, "
                                "gelu_new, gelu_fast",
                                *name));
}

// What the rope scalings read beside their own fields: the config's context and its original context (Phi-3
// keeps original_max_position_embeddings at the top level), and how many frequencies the rotary dimension has.
struct RopeContext {
  int64_t max_positions = 0;
  std::optional<int64_t> original_max_positions;
  int64_t frequencies = 0;
};

// transformers' YaRN attention factor 0.1 * mscale * ln(factor) + 1 (1 for factors up to 1).
double yarn_mscale(double factor, double mscale) { return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

// The original context the scaling names, else the one the config names at its top level (Phi-3's place).
std::optional<int64_t> original_context(const Fields& s, const RopeContext& context) {
  if (s.find({"original_max_position_embeddings"}))
    return s.positive_int({"original_max_position_embeddings"}, kMaxPositions);
  return context.original_max_positions;
}

void parse_yarn(const Fields& s, const RopeContext& context, RopeParams& rope) {
  rope.type = RopeType::Yarn;
  // The factor as given, as vLLM and llama.cpp take it (some transformers versions take max_position_embeddings over
  // the original context instead, which is 1 for Qwen2.5's documented YaRN settings).
  rope.factor = s.positive_number({"factor"}, std::nullopt);
  rope.original_max_positions = original_context(s, context).value_or(context.max_positions);
  rope.beta_fast = s.positive_number({"beta_fast"}, 32.0);
  rope.beta_slow = s.positive_number({"beta_slow"}, 1.0);
  rope.truncate = s.optional_bool("truncate").value_or(true);
  std::optional<double> mscale = s.optional_number({"mscale"}), all_dims = s.optional_number({"mscale_all_dim"});
  if (s.find({"attention_factor"}))
    rope.attention_factor = s.positive_number({"attention_factor"}, std::nullopt);
  else if (mscale && all_dims && *mscale != 0 && *all_dims != 0)  // DeepSeek's pair, as transformers reads it
    rope.attention_factor = yarn_mscale(rope.factor, *mscale) / yarn_mscale(rope.factor, *all_dims);
  else
    rope.attention_factor = yarn_mscale(rope.factor, 1.0);
  if (!(rope.attention_factor > 0) || !std::isfinite(rope.attention_factor))  // mscale / mscale_all_dim at 1 / ln
    s.error(s.find({"attention_factor"}) ? "attention_factor" : "mscale_all_dim",
            fmt::format("gives an attention factor of {}; it must be a positive number", rope.attention_factor));
}

// LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini): a divisor per frequency, a short set and a long one, and an
// attention factor from how far the context grew (transformers' rule: the ratio of max_position_embeddings to
// the original context when the config states the original, else `factor`).
void parse_longrope(const Fields& s, const RopeContext& context, RopeParams& rope) {
  rope.type = RopeType::LongRope;
  for (auto [key, factors] : {std::pair{"short_factor", &rope.short_factors}, {"long_factor", &rope.long_factors}}) {
    *factors = s.positive_numbers(key);
    if (int64_t(factors->size()) != context.frequencies)
      s.error(key, fmt::format("holds {} factors; the rotary dimension has {} frequencies", factors->size(),
                               context.frequencies));
  }
  std::optional<int64_t> original = original_context(s, context);
  if (original) {
    rope.original_max_positions = *original;
    rope.factor = double(context.max_positions) / double(*original);
  } else {
    rope.original_max_positions = context.max_positions;
    rope.factor = s.positive_number({"factor"}, std::nullopt);
  }
  rope.attention_factor =
      s.find({"attention_factor"}) ? s.positive_number({"attention_factor"}, std::nullopt)
      : rope.factor <= 1 || rope.original_max_positions < 2
          ? 1.0
          : std::sqrt(1 + std::log(rope.factor) / std::log(double(rope.original_max_positions)));
}

// One rope parameter set: the base frequency from THETA_FIELD of FIELDS (transformers' default 10000
// when absent), and rope_type (or "type") with the factors it needs from SCALING (none: default rope).
RopeParams parse_rope(const Fields& fields, std::string_view theta_field, const Fields* scaling,
                      const RopeContext& context) {
  RopeParams rope;
  rope.theta = fields.positive_number({theta_field}, 10000.0);
  if (!scaling) return rope;
  const Fields& s = *scaling;
  std::string type = s.optional_string({"rope_type", "type"}).value_or("default");
  if (type == "default") return rope;
  if (type == "linear") {
    rope.type = RopeType::Linear;
    rope.factor = s.positive_number({"factor"}, std::nullopt);
    return rope;
  }
  if (type == "llama3") {
    rope.type = RopeType::Llama3;
    rope.factor = s.positive_number({"factor"}, std::nullopt);
    rope.low_freq_factor = s.positive_number({"low_freq_factor"}, std::nullopt);
    rope.high_freq_factor = s.positive_number({"high_freq_factor"}, std::nullopt);
    rope.original_max_positions = s.positive_int({"original_max_position_embeddings"}, kMaxPositions);
    if (rope.high_freq_factor <= rope.low_freq_factor)
      s.error("high_freq_factor", fmt::format("({}) must exceed low_freq_factor ({})", rope.high_freq_factor,
                                              rope.low_freq_factor));
    return rope;
  }
  if (type == "yarn") {
    parse_yarn(s, context, rope);
    return rope;
  }
  if (type == "longrope" || type == "su") {  // "su": Phi-3's first name for it
    parse_longrope(s, context, rope);
    return rope;
  }
  s.error(s.find({"rope_type"}) ? "rope_type" : "type",
          fmt::format("names unsupported rope type \"{}\"; supported: default, linear, llama3, yarn, longrope", type));
}

// Fills rope_full / rope_sliding / partial_rotary_factor / rotary_dim.
void parse_rotary(const Fields& fields, ModelConfig& config) {
  std::optional<Fields> params = fields.optional_object("rope_parameters");
  if (params && fields.find({"rope_scaling"}))
    fields.error("rope_scaling", "is set beside rope_parameters, which would override it; give one of them");
  std::optional<double> partial = params ? params->optional_number({"partial_rotary_factor"}) : std::nullopt;
  if (!partial) partial = fields.optional_number({"partial_rotary_factor"});
  config.partial_rotary_factor = partial.value_or(config.arch->default_partial_rotary);
  if (!(config.partial_rotary_factor > 0 && config.partial_rotary_factor <= 1))
    fields.error("partial_rotary_factor",
                 fmt::format("must be in (0, 1], got {}", config.partial_rotary_factor));
  config.rotary_dim = int64_t(double(config.head_dim) * config.partial_rotary_factor);
  if (config.rotary_dim < 2 || config.rotary_dim % 2 != 0)
    fields.error("partial_rotary_factor",
                 fmt::format("gives an odd or empty rotary dimension {} of head_dim {}", config.rotary_dim,
                             config.head_dim));

  RopeContext context{config.max_position_embeddings, std::nullopt, config.rotary_dim / 2};
  if (fields.find({"original_max_position_embeddings"}))
    context.original_max_positions = fields.positive_int({"original_max_position_embeddings"}, kMaxPositions);
  if (params) {  // transformers >= 5: rope_parameters, possibly one set per attention type
    std::optional<Fields> full = params->optional_object("full_attention");
    std::optional<Fields> sliding = params->optional_object("sliding_attention");
    if (full || sliding) {
      if (!full || !sliding)
        fields.error("rope_parameters", "must give both full_attention and sliding_attention, or neither");
      config.rope_full = parse_rope(*full, "rope_theta", &*full, context);
      config.rope_sliding = parse_rope(*sliding, "rope_theta", &*sliding, context);
    } else {
      config.rope_full = config.rope_sliding = parse_rope(*params, "rope_theta", &*params, context);
    }
    return;
  }
  // Older configs: rope_theta and rope_scaling at the top level. Gemma3 gives its sliding layers their own
  // base (rope_local_base_freq) and applies rope_scaling to the global layers only.
  std::optional<Fields> scaling = fields.optional_object("rope_scaling");
  config.rope_full = parse_rope(fields, "rope_theta", scaling ? &*scaling : nullptr, context);
  config.rope_sliding = config.arch->sliding == SlidingRule::Gemma3Pattern
                            ? parse_rope(fields, "rope_local_base_freq", nullptr, context)
                            : config.rope_full;
}

std::vector<AttentionKind> layer_types_from_rule(const Fields& fields, const ModelConfig& config) {
  std::vector<AttentionKind> types(std::size_t(config.num_layers), AttentionKind::Full);
  bool has_window = fields.find({"sliding_window"}) != nullptr;
  switch (config.arch->sliding) {
    case SlidingRule::None: break;
    case SlidingRule::AllLayersIfWindow:
      if (has_window) std::fill(types.begin(), types.end(), AttentionKind::Sliding);
      break;
    case SlidingRule::AfterMaxWindowLayers:
      if (has_window && fields.optional_bool("use_sliding_window").value_or(false)) {
        int64_t first = fields.optional_int({"max_window_layers"}).value_or(config.num_layers);
        for (int64_t i = std::max<int64_t>(first, 0); i < config.num_layers; ++i)
          types[std::size_t(i)] = AttentionKind::Sliding;
      }
      break;
    case SlidingRule::Gemma3Pattern: {
      int64_t pattern =
          fields.optional_int({"sliding_window_pattern", "_sliding_window_pattern"}).value_or(6);
      if (pattern <= 0)
        fields.error("sliding_window_pattern", fmt::format("must be positive, got {}", pattern));
      for (int64_t i = 0; i < config.num_layers; ++i)
        if ((i + 1) % pattern != 0) types[std::size_t(i)] = AttentionKind::Sliding;
      break;
    }
  }
  return types;
}

void parse_attention_layout(const Fields& fields, ModelConfig& config) {
  if (const json* list = fields.find({"layer_types"})) {
    if (!list->is_array() || int64_t(list->size()) != config.num_layers)
      fields.error("layer_types",
                   fmt::format("must list {} layer types, got {}", config.num_layers, list->dump()));
    for (const json& type : *list) {
      if (type == "full_attention")
        config.layer_types.push_back(AttentionKind::Full);
      else if (type == "sliding_attention")
        config.layer_types.push_back(AttentionKind::Sliding);
      else
        fields.error("layer_types", fmt::format("has unsupported entry {}; supported: full_attention, "
                                                "sliding_attention",
                                                type.dump()));
    }
  } else {
    config.layer_types = layer_types_from_rule(fields, config);
  }
  bool any_sliding = std::find(config.layer_types.begin(), config.layer_types.end(),
                               AttentionKind::Sliding) != config.layer_types.end();
  if (any_sliding) config.sliding_window = fields.positive_int({"sliding_window"}, kMaxPositions);
}

// bits and group_size, as GPTQ and AWQ spell them (AutoAWQ's quant_config.json: w_bit, q_group_size).
GptqConfig parse_int4_groups(const Fields& quant, Int4Format format, std::string_view method) {
  GptqConfig int4;
  int4.format = format;
  int4.bits = int(quant.positive_int({"bits", "w_bit"}, 64));
  if (int4.bits != 4)
    quant.error(quant.matched_key({"bits", "w_bit"}),
                fmt::format("is {}; only 4-bit {} is supported", int4.bits, method));
  int64_t group = quant.optional_int({"group_size", "q_group_size"}).value_or(128);
  std::string_view group_key = quant.matched_key({"group_size", "q_group_size"});
  if (group == 0 || group < -1) quant.error(group_key, fmt::format("must be positive or -1, got {}", group));
  if (group > kMaxIntermediate)  // a group lies within one layer's inputs
    quant.error(group_key, fmt::format("is {}, more than the {} gerbil accepts", group, kMaxIntermediate));
  int4.group_size = group == -1 ? 0 : group;
  return int4;
}

GptqConfig parse_gptq(const Fields& quant) {
  GptqConfig gptq = parse_int4_groups(quant, Int4Format::Gptq, "GPTQ");
  gptq.sym = quant.optional_bool("sym").value_or(true);
  std::string format = quant.optional_string({"checkpoint_format"}).value_or("gptq");
  if (format != "gptq")
    quant.error("checkpoint_format",
                fmt::format("is \"{}\"; only the \"gptq\" (v1) layout is supported", format));
  if (quant.optional_bool("lm_head").value_or(false))
    quant.error("lm_head", "is true; a quantised lm_head is not supported");
  return gptq;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return text;
}

// AutoAWQ's GEMM checkpoints, the layout published AWQ models use. "version" is read case-insensitively
// as transformers does (TheBloke's configs say "GEMM"), and "backend" alike.
GptqConfig parse_awq(const Fields& quant) {
  GptqConfig awq = parse_int4_groups(quant, Int4Format::Awq, "AWQ");
  if (!quant.optional_bool("zero_point").value_or(true))
    quant.error("zero_point", "is false; only AWQ with zero points (zero_point true) is supported");
  std::string version = quant.optional_string({"version"}).value_or("gemm");
  if (lowercase(version) != "gemm")
    quant.error("version", fmt::format("is \"{}\"; only AutoAWQ's \"gemm\" packing is supported", version));
  std::string backend = quant.optional_string({"backend"}).value_or("autoawq");
  if (lowercase(backend) != "autoawq")
    quant.error("backend", fmt::format("is \"{}\"; only \"autoawq\" checkpoints are supported", backend));
  if (const json* skipped = quant.find({"modules_to_not_convert"}); skipped && !skipped->empty())
    quant.error("modules_to_not_convert",
                fmt::format("is {}; every decoder linear layer must be quantised (none left unconverted)",
                            skipped->dump()));
  return awq;
}

GptqConfig parse_quantization(const Fields& quant) {
  std::string method = quant.optional_string({"quant_method"}).value_or("");
  if (method == "gptq") return parse_gptq(quant);
  if (method == "awq") return parse_awq(quant);
  quant.error("quant_method", fmt::format("names unsupported quantization \"{}\"; supported: gptq, awq", method));
}

GenerationDefaults parse_generation(const Fields& fields) {
  GenerationDefaults defaults;
  defaults.do_sample = fields.optional_bool("do_sample");
  defaults.temperature = fields.optional_number({"temperature"});
  defaults.top_p = fields.optional_number({"top_p"});
  defaults.repetition_penalty = fields.optional_number({"repetition_penalty"});
  defaults.top_k = fields.optional_int({"top_k"});
  defaults.max_new_tokens = fields.optional_int({"max_new_tokens"});
  defaults.max_length = fields.optional_int({"max_length"});
  return defaults;
}

void parse_special_tokens(const Fields& fields, const Fields* generation, ModelConfig& config) {
  auto single = [](const Fields& f, std::string_view key) -> std::optional<int64_t> {
    std::vector<int64_t> ids = f.token_ids(key);
    if (ids.size() > 1) f.error(key, "must be a single token id");
    return ids.empty() ? std::nullopt : std::optional<int64_t>(ids[0]);
  };
  config.bos_token_id = single(fields, "bos_token_id");
  config.pad_token_id = single(fields, "pad_token_id");
  std::vector<int64_t> eos;
  if (generation) {
    if (auto bos = single(*generation, "bos_token_id")) config.bos_token_id = bos;
    if (auto pad = single(*generation, "pad_token_id")) config.pad_token_id = pad;
    eos = generation->token_ids("eos_token_id");
  }
  for (int64_t id : fields.token_ids("eos_token_id")) eos.push_back(id);
  for (int64_t id : eos)
    if (std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), id) == config.eos_token_ids.end())
      config.eos_token_ids.push_back(id);
}

// attention_bias / mlp_bias asking for biases the family's layers never have (transformers' class for it
// ignores the flag too) would be silently dropped: such a config contradicts itself.
void check_bias_flags(const Fields& fields, const ArchitectureSpec& arch, bool attention_bias, bool mlp_bias) {
  if (attention_bias && arch.qkv_bias == BiasRule::Never && arch.o_bias == BiasRule::Never)
    fields.error("attention_bias", fmt::format("is true, but {} has no attention biases", arch.name));
  if (mlp_bias && arch.mlp_bias == BiasRule::Never)
    fields.error("mlp_bias", fmt::format("is true, but {} has no MLP biases", arch.name));
}

// Fields that change the forward pass in transformers but that gerbil does not implement: a config may leave
// them absent, null or at the value that changes nothing.
void refuse_unapplied_fields(const Fields& fields) {
  fields.require_neutral("attn_logit_softcapping", nullptr, "tanh soft-capping of the attention scores");
  fields.require_neutral("final_logit_softcapping", nullptr, "tanh soft-capping of the logits");
  fields.require_neutral("use_bidirectional_attention", false, "attention without the causal mask");
  fields.require_neutral("qk_layernorm", false, "Phi's LayerNorm of q and k");
  fields.require_neutral("scale_attn_by_inverse_layer_idx", false, "GPT-2's attention scores divided by layer + 1");
  fields.require_neutral("scale_attn_weights", true, "GPT-2's attention without the 1/sqrt(head_dim) scale");
}

// Gemma3 scales attention scores by query_pre_attn_scalar^-0.5 (required: its default differs from head_dim);
// every other family by head_dim^-0.5, and their transformers classes ignore query_pre_attn_scalar.
void parse_attention_scale(const Fields& fields, ModelConfig& config) {
  if (!config.arch->query_pre_attn_scalar) {
    if (fields.find({"query_pre_attn_scalar"}))
      fields.error("query_pre_attn_scalar", fmt::format("is set, but {} scales attention by head_dim^-0.5",
                                                        config.arch->name));
    config.attention_scale = 1.0 / std::sqrt(double(config.head_dim));
    return;
  }
  config.query_pre_attn_scalar = fields.positive_number({"query_pre_attn_scalar"}, std::nullopt);
  config.attention_scale = 1.0 / std::sqrt(*config.query_pre_attn_scalar);
}

}  // namespace

const RopeParams& ModelConfig::rope(int64_t layer) const { return sliding(layer) ? rope_sliding : rope_full; }

ModelConfig parse_config(const json& doc, const fs::path& file, const json* generation_doc) {
  if (!doc.is_object()) fail("{}: not a JSON object", file.string());
  Fields fields(doc, file);
  ModelConfig config;
  config.file = file;
  config.arch = &parse_architecture(fields);
  config.model_type = fields.optional_string({"model_type"}).value_or("");

  config.vocab_size = fields.positive_int({"vocab_size"}, kMaxVocab);
  config.hidden_size = fields.positive_int({"hidden_size", "n_embd"}, kMaxHidden);
  config.num_layers = fields.positive_int({"num_hidden_layers", "n_layer"}, kMaxLayers);
  config.num_heads = fields.positive_int({"num_attention_heads", "n_head"}, kMaxHeads);
  config.num_kv_heads = fields.find({"num_key_value_heads"})
                            ? fields.positive_int({"num_key_value_heads"}, kMaxHeads)
                            : config.num_heads;
  if (config.num_heads % config.num_kv_heads != 0)
    fields.error("num_key_value_heads", fmt::format("({}) does not divide num_attention_heads ({})",
                                                    config.num_kv_heads, config.num_heads));
  if (fields.find({"head_dim"})) {
    config.head_dim = fields.positive_int({"head_dim"}, kMaxHeadDim);
  } else {
    if (config.hidden_size % config.num_heads != 0)
      fields.error("num_attention_heads",
                   fmt::format("({}) does not divide hidden_size ({}) and head_dim is absent",
                               config.num_heads, config.hidden_size));
    config.head_dim = config.hidden_size / config.num_heads;
    if (config.head_dim > kMaxHeadDim)
      fields.error("num_attention_heads", fmt::format("({}) gives head_dim {}, more than the {} gerbil accepts",
                                                      config.num_heads, config.head_dim, kMaxHeadDim));
  }
  if (!fields.find({"intermediate_size", "n_inner"}) && config.arch->default_mlp_ratio > 0)
    config.intermediate_size = config.arch->default_mlp_ratio * config.hidden_size;
  else
    config.intermediate_size = fields.positive_int({"intermediate_size", "n_inner"}, kMaxIntermediate);
  config.max_position_embeddings = fields.positive_int({"max_position_embeddings", "n_positions"}, kMaxPositions);
  config.norm_eps =
      fields.positive_number({"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon"}, std::nullopt);
  config.activation = parse_activation(fields);
  config.tie_word_embeddings =
      fields.optional_bool("tie_word_embeddings").value_or(config.arch->default_tied);

  bool attention_bias = fields.optional_bool("attention_bias").value_or(false);
  bool mlp_bias = fields.optional_bool("mlp_bias").value_or(false);
  config.qkv_bias = resolve_bias(config.arch->qkv_bias, attention_bias, mlp_bias);
  config.o_bias = resolve_bias(config.arch->o_bias, attention_bias, mlp_bias);
  config.mlp_bias = resolve_bias(config.arch->mlp_bias, attention_bias, mlp_bias);
  config.lm_head_bias = resolve_bias(config.arch->lm_head_bias, attention_bias, mlp_bias);
  check_bias_flags(fields, *config.arch, attention_bias, mlp_bias);
  refuse_unapplied_fields(fields);

  if (config.arch->positions == PositionKind::Rotary) parse_rotary(fields, config);
  parse_attention_layout(fields, config);

  parse_attention_scale(fields, config);

  std::optional<Fields> generation;
  if (generation_doc) {
    if (!generation_doc->is_object())
      fail("generation_config.json beside {}: not a JSON object", file.string());
    generation.emplace(*generation_doc, file.parent_path() / "generation_config.json");
    config.generation = parse_generation(*generation);
  }
  parse_special_tokens(fields, generation ? &*generation : nullptr, config);

  if (std::optional<Fields> quant = fields.optional_object("quantization_config"))
    config.gptq = parse_quantization(*quant);
  return config;
}

ModelConfig load_config(const fs::path& dir) {
  fs::path file = dir / "config.json";
  if (!fs::exists(file)) fail("{}: no config.json in this folder", dir.string());
  json doc = read_json_file(file);
  fs::path generation_file = dir / "generation_config.json";
  std::optional<json> generation;
  if (fs::exists(generation_file)) generation = read_json_file(generation_file);
  ModelConfig config = parse_config(doc, file, generation ? &*generation : nullptr);
  // AutoGPTQ checkpoints may keep their settings only in quantize_config.json, older AutoAWQ ones in
  // quant_config.json.
  for (auto [name, method] : {std::pair{"quantize_config.json", "gptq"}, std::pair{"quant_config.json", "awq"}}) {
    fs::path quantize_file = dir / name;
    if (config.gptq || !fs::exists(quantize_file)) continue;
    json quant = read_json_file(quantize_file);
    if (!quant.is_object()) fail("{}: not a JSON object", quantize_file.string());
    if (!quant.contains("quant_method")) quant["quant_method"] = method;
    config.gptq = parse_quantization(Fields(quant, quantize_file));
  }
  return config;
}

namespace {

// Llama 3.1: long wavelengths are stretched by `factor`, short ones kept, the band between interpolated.
double llama3_inv_freq(const RopeParams& rope, double inv) {
  double wavelength = 2 * std::numbers::pi / inv;
  double context = double(rope.original_max_positions);
  if (wavelength > context / rope.low_freq_factor) return inv / rope.factor;
  if (wavelength < context / rope.high_freq_factor) return inv;
  double smooth = (context / wavelength - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
  return (1 - smooth) * inv / rope.factor + smooth * inv;
}

// YaRN: frequencies that turn more than beta_fast times over the original context are kept, those turning
// fewer than beta_slow times are divided by `factor`, and a linear ramp over the frequency index joins them
// (transformers' find_correction_range and linear_ramp_factor).
double yarn_inv_freq(const RopeParams& rope, int64_t i, int64_t rotary_dim, double inv) {
  auto index_of = [&](double rotations) {  // the frequency index that turns ROTATIONS times
    return double(rotary_dim) * std::log(double(rope.original_max_positions) / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(rope.theta));
  };
  double low = index_of(rope.beta_fast), high = index_of(rope.beta_slow);
  if (rope.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, double(rotary_dim - 1));
  if (low == high) high += 0.001;  // as transformers does, against a zero-width ramp
  double scaled_share = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
  return inv / rope.factor * scaled_share + inv * (1 - scaled_share);
}

}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig& config, int64_t layer, int64_t context_tokens) {
  if (config.arch->positions != PositionKind::Rotary)
    fail("{}: {} has no rotary embedding", config.file.string(), config.arch->name);
  if (layer < 0 || layer >= config.num_layers)
    fail("rope_inv_freq: layer {} outside 0..{}", layer, config.num_layers - 1);
  const RopeParams& rope = config.rope(layer);
  const std::vector<double>& longrope_factors =
      context_tokens > rope.original_max_positions ? rope.long_factors : rope.short_factors;
  std::vector<float> result;
  for (int64_t i = 0; i < config.rotary_dim / 2; ++i) {
    double inv = 1.0 / std::pow(rope.theta, double(2 * i) / double(config.rotary_dim));
    switch (rope.type) {
      case RopeType::Default: break;
      case RopeType::Linear: inv /= rope.factor; break;
      case RopeType::Llama3: inv = llama3_inv_freq(rope, inv); break;
      case RopeType::Yarn: inv = yarn_inv_freq(rope, i, config.rotary_dim, inv); break;
      case RopeType::LongRope: inv /= longrope_factors.at(std::size_t(i)); break;
    }
    result.push_back(float(inv));
  }
  return result;
}

int64_t context_length(const ModelConfig& config) {
  const RopeParams& rope = config.rope_full;
  if (config.arch->positions != PositionKind::Rotary || rope.type != RopeType::Yarn) return config.max_position_embeddings;
  double stretched = std::min(double(rope.original_max_positions) * rope.factor, double(kMaxPositions));
  return std::max(config.max_position_embeddings, int64_t(stretched));
}

std::string_view activation_name(Activation activation) {
  return activation == Activation::SiLU ? "silu" : "gelu_tanh";
}

}  // namespace gerbil
