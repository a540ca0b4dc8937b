// Synthetic models: Hugging Face folders (config.json, generation_config.json, safetensors) with seeded
// random weights, for tests and benchmarks that need a model of a given shape but not a trained one.
// Weights follow the fixtures' scaling (norms ~ 1 + 0.1 randn, linear ~ randn / sqrt(in), biases
// ~ 0.05 randn) and are streamed to disk, so an 8B model never sits in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/dtype.h"

namespace gerbil {

struct SynthOptions {
  std::string preset;        // see synth_presets()
  DType dtype = DType::F32;  // F32, F16 or BF16
  uint64_t seed = 0;
  std::optional<int64_t> vocab;              // overrides the preset's vocab_size
  std::optional<int64_t> intermediate;       // overrides the preset's intermediate_size (MLP width)
  uint64_t max_shard_bytes = 4'000'000'000;  // larger models are split into model-0000i-of-0000n files
  // Special token ids that replace the preset's in config.json and generation_config.json, e.g. those of
  // a real tokenizer written beside the weights; a token left empty is left out (pad_token_id too).
  struct Tokens {
    std::optional<int64_t> bos, eos;
  };
  std::optional<Tokens> special_tokens;
};

// qwen2.5-0.5b, llama3-8b, and tiny-<family> for every supported family (tiny-qwen2, tiny-gpt2, ...).
std::vector<std::string> synth_presets();

// The config.json a preset writes (after the --vocab and special-token overrides). Throws for unknown
// presets.
nlohmann::json synth_config(const SynthOptions& options);

struct SynthResult {
  std::vector<std::filesystem::path> files;  // safetensors files written
  uint64_t parameters = 0;
  uint64_t bytes = 0;  // tensor bytes
};

// Writes the folder OUT (created if needed; earlier model*.safetensors files there are replaced).
SynthResult synth_model(const std::filesystem::path& out, const SynthOptions& options);

// The deterministic "normal-ish" value (Irwin-Hall sum of four uniforms, unit variance) number INDEX of
// the stream KEY. Exposed for tests.
float synth_normal(uint64_t key, uint64_t index);

}  // namespace gerbil
