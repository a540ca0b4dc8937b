// gerbil's library API: text in, text out. An Engine loads a Hugging Face model folder (config.json,
// safetensors, tokenizer.json, tokenizer_config.json) onto a WebGPU device, turns text into tokens and
// back, renders the model's chat template, and generates text with streaming and cancellation.
//
//   gerbil::Engine engine("models/Qwen3-0.6B");
//   std::string prompt = engine.apply_chat_template({{"user", "Why is the sky blue?"}});
//   gerbil::Completion answer = engine.complete(prompt, {}, [](std::string_view piece) {
//     std::fwrite(piece.data(), 1, piece.size(), stdout);
//     return true;  // false stops the generation
//   });
//
// Failures throw gerbil::Error with a message naming the culprit (file, field, token, byte offset).
// The const methods may be called from several threads at once; complete() and reset() run one at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gerbil/error.h"

namespace gerbil {

// How linear weights are stored on the GPU.
enum class WeightStorage {
  Checkpoint,  // as in the checkpoint (f32, f16, bf16 or GPTQ int4): nothing lost
  F16,         // f32 and bf16 weights converted to f16: half the memory and bandwidth of f32
};

// The arithmetic of prompt (prefill) products; decoding is f32 either way.
enum class Arithmetic {
  F32,  // f32 products and sums: nothing rounded against the checkpoint
  F16,  // needs an adapter with shader-f16: inputs rounded to f16, 8 products at a time summed in f16
};

// The KV cache's element type: Auto is f16 for f16, bf16, GPTQ, AWQ and GGUF checkpoints, f32 for float32 ones
// (exact) and odd head dims; F16 halves the cache's memory (keys and values rounded to f16), for long contexts and
// many sequences; Q8 stores about a quarter of f32's bytes (8-bit integers with one f32 scale per token and kv
// head, each value within half of its row's largest magnitude / 127), for the longest contexts; it needs head_dim
// a multiple of 4.
enum class KvCacheType { Auto, F32, F16, Q8 };

// Whether decode steps prepare each RMSNorm's input in the product before it (the product writing the
// residual stream also writes x * norm weight for the next product): one dispatch less per norm, a little
// more work in the product. The results are the same either way.
enum class PreparedNorms {
  Auto,    // from a hidden size the adapter's tuning sets (4096 on the H200; `gerbil tune` prints it)
  Always,  // e.g. to measure it on another GPU
  Never,
};

struct EngineOptions {
  std::string adapter;   // WebGPU adapter: a substring of its name; empty: $GERBIL_ADAPTER, else the first
  // KV-cache capacity in tokens; 0: the model's maximum (max_position_embeddings) as far as the GPU's memory
  // holds it with every sequence's cache, halved until it fits (ModelInfo::context says what it got).
  uint32_t context = 0;
  // Prompt tokens per prefill step; longer prompts run in chunks. 2,048 (llama.cpp's batch, vLLM's token
  // budget): each chunk re-reads the cache before it, and longer chunks take larger product tiles (on an H200,
  // Qwen2.5-0.5B's 8,192-token prompt with an f32 cache: 16,743 tok/s in chunks of 512, 21,944 in chunks of
  // 2,048; docs/PERFORMANCE.md).
  uint32_t max_prefill_chunk = 2048;
  WeightStorage weights = WeightStorage::Checkpoint;
  Arithmetic arithmetic = Arithmetic::F32;
  KvCacheType kv_cache = KvCacheType::Auto;
  PreparedNorms prepared_norms = PreparedNorms::Auto;
  // Dawn device toggles to turn on or off, e.g. "disable_robustness" (a few percent faster, but turns off
  // the bounds checks on buffer access: for trusted models only). Dawn ignores names it does not know.
  std::vector<std::string> enable_toggles, disable_toggles;
  // The most bytes of GPU memory the engine's buffers may take (weights, KV cache, a step's buffers), for a GPU
  // shared with other programs; 0: what the GPU gives. The default context is halved until it fits.
  uint64_t memory_limit = 0;
  // Called while the weights are uploaded, with the checkpoint bytes done and in all; the last call has
  // done == total.
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

// Sampling; the defaults draw from the model's full distribution at temperature 1.
struct SamplingOptions {
  float temperature = 1.0f;         // 0: greedy (always the most likely token)
  int32_t top_k = 0;                // sample among the k most likely tokens; 0: off
  float top_p = 1.0f;               // nucleus: the smallest set with this total probability; 1: off
  float min_p = 0.0f;               // drop tokens below min_p times the best token's probability; 0: off
  float repetition_penalty = 1.0f;  // Hugging Face style, over the prompt and the answer; 1: off
  float presence_penalty = 0.0f;    // OpenAI style: subtracted once from the logit of every token generated so far
  float frequency_penalty = 0.0f;   // OpenAI style: subtracted per time it was generated (the prompt's do not count)
  uint64_t seed = 0;                // the same seed, prompt and options give the same text; 0: random
};

// What the engine loaded, for display.
struct ModelInfo {
  std::string architecture;     // "Qwen3ForCausalLM"
  std::string adapter;          // the WebGPU adapter, in one line
  uint32_t context = 0;         // KV-cache capacity in tokens
  uint64_t weight_bytes = 0;    // on the GPU
  uint64_t kv_cache_bytes = 0;  // on the GPU
  double load_seconds = 0;
  SamplingOptions sampling;     // what the model recommends (generation_config.json), for settings not given
};

struct CompletionOptions {
  SamplingOptions sampling;
  uint32_t max_new_tokens = 256;
  std::vector<std::string> stop;  // the text ends before the first occurrence of any of these
  std::vector<int32_t> stop_ids;  // end-of-sequence ids; empty: the model's (generation_config.json)
  bool ignore_eos = false;        // run to max_new_tokens (or the context's end) regardless
};

enum class StopReason {
  EndOfSequence,  // the model produced an end-of-sequence id (not part of tokens or text)
  StopString,     // a stop string appeared (the text ends just before it)
  MaxTokens,      // max_new_tokens were generated
  ContextFull,    // the KV cache is full
  Cancelled,      // the callback returned false or the cancel flag was set
};
std::string_view stop_reason_name(StopReason reason);  // "eos", "stop_string", "max_tokens", ...

struct CompletionStats {
  size_t prompt_tokens = 0;
  size_t cached_tokens = 0;  // prompt tokens reused from the previous completion's KV cache
  size_t generated_tokens = 0;
  double time_to_first_token = 0;  // seconds from the call to the first sampled token
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tokens_per_second = 0, decode_tokens_per_second = 0;
};

struct Completion {
  std::string text;             // the answer, ending before a stop string
  std::vector<int32_t> tokens;  // the generated ids
  StopReason stop_reason = StopReason::MaxTokens;
  CompletionStats stats;
  uint64_t seed = 0;  // the seed used: the one asked for, or the random one drawn
};

// Receives the answer's text as it becomes final: each piece is whole UTF-8 characters, and the pieces
// concatenate to Completion::text. Returning false stops generation (StopReason::Cancelled).
using StreamCallback = std::function<bool(std::string_view piece)>;

class Engine {
 public:
  // Loads MODEL_DIR: the tokenizer and chat template first (so a folder without a tokenizer fails
  // before any GPU work), then the weights onto the device.
  explicit Engine(const std::filesystem::path& model_dir, const EngineOptions& options = {});
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  const ModelInfo& info() const;

  // Like transformers' tokenizer.encode / decode. Invalid UTF-8 is an error naming the byte offset.
  std::vector<int32_t> tokenize(std::string_view text, bool add_special_tokens = false) const;
  std::string detokenize(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The model's chat template (tokenizer_config.json's chat_template, or chat_template.jinja), rendered
  // as transformers' apply_chat_template(tokenize=False) does. EXTRA_VARS_JSON is empty or a JSON object
  // of more template variables, e.g. {"enable_thinking": false} or {"tools": [...]}.
  bool has_chat_template() const;
  std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                                  std::string_view extra_vars_json = {}) const;
  // MESSAGES_JSON: [{"role": "user", "content": "..."}, ...] with anything else the template reads
  // (content parts, tool_calls, ...).
  std::string apply_chat_template_json(std::string_view messages_json, bool add_generation_prompt = true,
                                       std::string_view extra_vars_json = {}) const;

  // Generates after PROMPT: text as the model sees it, e.g. a rendered chat template (which carries its
  // own BOS); no special tokens are added. ON_TEXT streams the answer; CANCEL, when set by any thread
  // (or a signal handler), stops generation after the current token. The KV cache keeps the previous
  // completion's tokens, so a prompt that extends the previous conversation only computes what is new.
  Completion complete(std::string_view prompt, const CompletionOptions& options = {},
                      const StreamCallback& on_text = {}, const std::atomic<bool>* cancel = nullptr);
  // The same for a prompt given as token ids (e.g. tokenize(text, true) for a raw prompt with BOS).
  Completion complete(std::span<const int32_t> prompt, const CompletionOptions& options = {},
                      const StreamCallback& on_text = {}, const std::atomic<bool>* cancel = nullptr);

  // Forgets the cached conversation: the next completion computes its whole prompt.
  void reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gerbil
