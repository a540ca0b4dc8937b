#include "model/synth.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <thread>

#include "gerbil/error.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace gerbil {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Preset {
  std::string name;
  json config;
  json generation;  // generation_config.json
};

struct Dims {
  int64_t hidden = 64, intermediate = 128, layers = 2, heads = 4, kv_heads = 2, head_dim = 16, vocab = 512;
  int64_t max_positions = 256;
};

json rope_default(double theta) { return {{"rope_theta", theta}, {"rope_type", "default"}}; }

json llama3_rope(double theta, int64_t original_max_positions) {
  return {{"rope_theta", theta},     {"rope_type", "llama3"},
          {"factor", 8.0},           {"low_freq_factor", 1.0},
          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", original_max_positions}};
}

// A config.json in the transformers 5 style most families share; presets adjust it.
json decoder_config(std::string_view arch, std::string_view model_type, const Dims& d) {
  return {{"architectures", {arch}},
          {"model_type", model_type},
          {"vocab_size", d.vocab},
          {"hidden_size", d.hidden},
          {"intermediate_size", d.intermediate},
          {"num_hidden_layers", d.layers},
          {"num_attention_heads", d.heads},
          {"num_key_value_heads", d.kv_heads},
          {"head_dim", d.head_dim},
          {"hidden_act", "silu"},
          {"rms_norm_eps", 1e-5},
          {"max_position_embeddings", d.max_positions},
          {"rope_parameters", rope_default(10000.0)},
          {"tie_word_embeddings", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"pad_token_id", 0}};
}

json tiny(std::string_view arch, std::string_view model_type, json changes) {
  json config = decoder_config(arch, model_type, Dims{});
  config.merge_patch(changes);
  return config;
}

std::vector<Preset> make_presets() {
  json tiny_generation = {{"bos_token_id", 1}, {"eos_token_id", 2}, {"pad_token_id", 0}};
  std::vector<Preset> presets;
  auto add_tiny = [&](std::string family, json config) {
    presets.push_back({"tiny-" + family, std::move(config), tiny_generation});
  };
  add_tiny(
      "llama",
      tiny("LlamaForCausalLM", "llama",
           {{"attention_bias", false}, {"mlp_bias", false}, {"rope_parameters", llama3_rope(500000.0, 64)}}));
  add_tiny("mistral", tiny("MistralForCausalLM", "mistral", {{"sliding_window", 8}}));
  add_tiny("qwen2", tiny("Qwen2ForCausalLM", "qwen2",
                         {{"attention_bias", true},
                          {"tie_word_embeddings", true},
                          {"rms_norm_eps", 1e-6},
                          {"rope_parameters", rope_default(1e6)},
                          {"use_sliding_window", false}}));
  add_tiny("qwen3", tiny("Qwen3ForCausalLM", "qwen3",
                         {{"head_dim", 32},
                          {"attention_bias", false},
                          {"tie_word_embeddings", true},
                          {"rms_norm_eps", 1e-6},
                          {"rope_parameters", rope_default(1e6)}}));
  add_tiny("phi3", tiny("Phi3ForCausalLM", "phi3", json::object()));
  add_tiny("phi",
           tiny("PhiForCausalLM", "phi",
                {{"hidden_act", "gelu_new"},
                 {"rms_norm_eps", nullptr},
                 {"layer_norm_eps", 1e-5},
                 {"rope_parameters",
                  {{"rope_theta", 10000.0}, {"rope_type", "default"}, {"partial_rotary_factor", 0.5}}}}));
  add_tiny("gemma", tiny("GemmaForCausalLM", "gemma",
                         {{"hidden_act", "gelu_pytorch_tanh"},
                          {"num_key_value_heads", 1},
                          {"rms_norm_eps", 1e-6},
                          {"tie_word_embeddings", true}}));
  add_tiny("gemma3",
           tiny("Gemma3ForCausalLM", "gemma3_text",
                {{"hidden_act", nullptr},
                 {"hidden_activation", "gelu_pytorch_tanh"},
                 {"rms_norm_eps", 1e-6},
                 {"tie_word_embeddings", true},
                 {"query_pre_attn_scalar", 24},
                 {"sliding_window", 8},
                 {"layer_types", {"sliding_attention", "full_attention"}},
                 {"rope_parameters",
                  {{"full_attention", rope_default(1e6)}, {"sliding_attention", rope_default(10000.0)}}}}));
  Dims gpt2;
  add_tiny("gpt2", {{"architectures", {"GPT2LMHeadModel"}},
                    {"model_type", "gpt2"},
                    {"vocab_size", gpt2.vocab},
                    {"n_embd", gpt2.hidden},
                    {"n_layer", gpt2.layers},
                    {"n_head", gpt2.heads},
                    {"n_inner", nullptr},
                    {"n_positions", gpt2.max_positions},
                    {"layer_norm_epsilon", 1e-5},
                    {"activation_function", "gelu_new"},
                    {"tie_word_embeddings", true},
                    {"bos_token_id", 1},
                    {"eos_token_id", 2},
                    {"pad_token_id", 0}});

  // Qwen2.5-0.5B-Instruct's shapes and special tokens.
  json qwen = decoder_config("Qwen2ForCausalLM", "qwen2",
                             {.hidden = 896,
                              .intermediate = 4864,
                              .layers = 24,
                              .heads = 14,
                              .kv_heads = 2,
                              .head_dim = 64,
                              .vocab = 151936,
                              .max_positions = 32768});
  qwen.merge_patch({{"head_dim", nullptr},
                    {"rms_norm_eps", 1e-6},
                    {"rope_parameters", rope_default(1e6)},
                    {"tie_word_embeddings", true},
                    {"use_sliding_window", false},
                    {"max_window_layers", 21},
                    {"bos_token_id", 151643},
                    {"eos_token_id", 151645},
                    {"pad_token_id", nullptr}});
  presets.push_back(
      {"qwen2.5-0.5b",
       qwen,
       {{"bos_token_id", 151643}, {"eos_token_id", {151645, 151643}}, {"pad_token_id", 151643}}});

  // Llama-3.1-8B's shapes, rope scaling and special tokens.
  json llama = decoder_config("LlamaForCausalLM", "llama",
                              {.hidden = 4096,
                               .intermediate = 14336,
                               .layers = 32,
                               .heads = 32,
                               .kv_heads = 8,
                               .head_dim = 128,
                               .vocab = 128256,
                               .max_positions = 131072});
  llama.merge_patch({{"rope_parameters", llama3_rope(500000.0, 8192)},
                     {"attention_bias", false},
                     {"mlp_bias", false},
                     {"bos_token_id", 128000},
                     {"eos_token_id", 128001},
                     {"pad_token_id", nullptr}});
  presets.push_back(
      {"llama3-8b", llama, {{"bos_token_id", 128000}, {"eos_token_id", {128001, 128008, 128009}}}});
  return presets;
}

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = make_presets();
  return table;
}

const Preset& find_preset(const std::string& name) {
  for (const Preset& preset : presets())
    if (preset.name == name) return preset;
  fail("unknown synth preset \"{}\"; presets: {}", name, fmt::join(synth_presets(), ", "));
}

std::string_view torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    default: fail("synth writes F32, F16 or BF16 weights, not {}", dtype_name(dtype));
  }
}

// Every token id a config or generation config names must exist in the (possibly overridden) vocabulary.
void check_special_tokens(const json& doc, int64_t vocab, const std::string& preset) {
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    if (!doc.contains(key) || doc[key].is_null()) continue;
    for (const json& id : doc[key].is_array() ? doc[key] : json::array({doc[key]}))
      if (id.get<int64_t>() >= vocab)
        fail("--vocab {} is too small for preset {}: its {} is {}", vocab, preset, key, id.get<int64_t>());
  }
}

// DOC (a config or generation config) with the special-token ids OPTIONS asks for.
json with_special_tokens(json doc, const SynthOptions& options) {
  if (!options.special_tokens) return doc;
  doc.erase("pad_token_id");
  for (auto [key, id] : {std::pair{"bos_token_id", options.special_tokens->bos},
                         std::pair{"eos_token_id", options.special_tokens->eos}}) {
    if (id)
      doc[key] = *id;
    else
      doc.erase(key);
  }
  return doc;
}

// The generation_config.json a preset writes.
json synth_generation_config(const SynthOptions& options) {
  return with_special_tokens(find_preset(options.preset).generation, options);
}

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Each tensor's stream depends on the seed and its name only, so adding a tensor changes no other.
uint64_t stream_key(uint64_t seed, const std::string& name) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : name) hash = (hash ^ uint8_t(c)) * 0x100000001b3ull;
  return mix64(hash ^ mix64(seed));
}

struct Init {
  float mean = 0, std = 1;
};

// The fixtures' scales; a tied model's final norm gets a zero-mean weight so the logits are not dominated
// by the current token's own embedding.
Init init_for(const ExpectedTensor& t, const ModelConfig& config) {
  bool plus_one = config.arch->norm == NormKind::RmsNormPlusOne;  // stored w is used as 1 + w
  float norm_mean = plus_one ? 0.0f : 1.0f;
  if (t.part == Part::Bias) return {0, 0.05f};
  if (t.role == Role::Embed) return {0, 0.4f};
  if (t.role == Role::PosEmbed) return {0, 0.2f};
  if (t.role == Role::FinalNorm && config.tie_word_embeddings) return {norm_mean - 1.0f, 1.0f};
  if (is_norm_role(t.role)) return {norm_mean, 0.1f};
  int64_t in = config.arch->conv1d_weights ? t.shape[0] : t.shape[1];
  return {0, float(1.0 / std::sqrt(double(in)))};
}

// Fills OUT with elements FIRST.. of the stream, on all cores for large chunks.
void fill_normal(uint64_t key, Init init, DType dtype, uint64_t first, std::span<std::byte> out) {
  std::size_t element = dtype_size(dtype);
  std::size_t count = out.size() / element;
  auto work = [&](std::size_t begin, std::size_t end) {
    std::vector<float> values(end - begin);
    for (std::size_t i = begin; i < end; ++i)
      values[i - begin] = init.mean + init.std * synth_normal(key, first + i);
    convert_from_f32(dtype, values, out.subspan(begin * element, (end - begin) * element));
  };
  std::size_t threads = count >= (1u << 20) ? std::max(1u, std::thread::hardware_concurrency()) : 1;
  std::vector<std::jthread> pool;
  for (std::size_t t = 1; t < threads; ++t)
    pool.emplace_back(work, count * t / threads, count * (t + 1) / threads);
  work(0, count / threads);
}

// Groups tensors into files of at most MAX_BYTES (a larger tensor gets a file of its own).
std::vector<std::vector<TensorSource>> plan_shards(std::vector<TensorSource> tensors, uint64_t max_bytes) {
  std::vector<std::vector<TensorSource>> shards(1);
  uint64_t filled = 0;
  for (TensorSource& tensor : tensors) {
    uint64_t size = tensor.byte_size();
    if (!shards.back().empty() && filled + size > max_bytes) {
      shards.emplace_back();
      filled = 0;
    }
    filled += size;
    shards.back().push_back(std::move(tensor));
  }
  return shards;
}

void write_json(const fs::path& path, const json& doc) {
  std::ofstream out(path);
  out << doc.dump(2) << '\n';
  if (!out) fail("cannot write {}", path.string());
}

// Earlier weights in OUT would be mixed up with the new ones (an index.json wins over model.safetensors).
void remove_old_weights(const fs::path& out) {
  for (const auto& entry : fs::directory_iterator(out)) {
    std::string name = entry.path().filename().string();
    bool shard = name.starts_with("model-") && name.ends_with(".safetensors");
    if (shard || name == "model.safetensors" || name == "model.safetensors.index.json")
      fs::remove(entry.path());
  }
}

}  // namespace

float synth_normal(uint64_t key, uint64_t index) {
  uint64_t bits = mix64(key + (index + 1) * 0x9e3779b97f4a7c15ull);
  // Four 16-bit lanes, each uniform on (0, 1) after the half-step offset; their sum has variance 1/3.
  float sum =
      float(bits & 0xffff) + float((bits >> 16) & 0xffff) + float((bits >> 32) & 0xffff) + float(bits >> 48);
  float uniforms = (sum + 2.0f) / 65536.0f;
  return (uniforms - 2.0f) * 1.7320508f;
}

std::vector<std::string> synth_presets() {
  std::vector<std::string> names;
  for (const Preset& preset : presets()) names.push_back(preset.name);
  return names;
}

json synth_config(const SynthOptions& options) {
  const Preset& preset = find_preset(options.preset);
  json config = with_special_tokens(preset.config, options);
  if (options.vocab) {
    if (*options.vocab <= 0) fail("--vocab must be positive, got {}", *options.vocab);
    config["vocab_size"] = *options.vocab;
  }
  if (options.intermediate) {
    if (*options.intermediate <= 0) fail("--intermediate must be positive, got {}", *options.intermediate);
    if (!config.contains("intermediate_size"))
      fail("--intermediate: preset {} sets no intermediate_size", preset.name);
    config["intermediate_size"] = *options.intermediate;
  }
  config["dtype"] = torch_dtype_name(options.dtype);
  check_special_tokens(config, config["vocab_size"].get<int64_t>(), preset.name);
  check_special_tokens(synth_generation_config(options), config["vocab_size"].get<int64_t>(), preset.name);
  return config;
}

SynthResult synth_model(const fs::path& out, const SynthOptions& options) {
  json config_doc = synth_config(options);
  fs::create_directories(out);
  ModelConfig config = parse_config(config_doc, out / "config.json");

  SynthResult result;
  std::vector<TensorSource> sources;
  for (const ExpectedTensor& tensor : expected_tensors(config)) {
    uint64_t key = stream_key(options.seed, tensor.name);
    Init init = init_for(tensor, config);
    DType dtype = options.dtype;
    sources.push_back(
        {tensor.name, dtype, tensor.shape, [key, init, dtype](uint64_t first, std::span<std::byte> bytes) {
           fill_normal(key, init, dtype, first, bytes);
         }});
    result.parameters += uint64_t(sources.back().byte_size() / dtype_size(dtype));
    result.bytes += sources.back().byte_size();
  }

  remove_old_weights(out);
  write_json(out / "config.json", config_doc);
  write_json(out / "generation_config.json", synth_generation_config(options));
  auto shards = plan_shards(std::move(sources), options.max_shard_bytes);
  if (shards.size() == 1) {
    result.files.push_back(out / "model.safetensors");
    write_safetensors(result.files.back(), shards[0]);
    return result;
  }
  json weight_map = json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    std::string name = fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, shards.size());
    for (const TensorSource& tensor : shards[i]) weight_map[tensor.name] = name;
    result.files.push_back(out / name);
    write_safetensors(result.files.back(), shards[i]);
  }
  write_json(out / "model.safetensors.index.json",
             {{"metadata", {{"total_size", result.bytes}}}, {"weight_map", weight_map}});
  return result;
}

}  // namespace gerbil
