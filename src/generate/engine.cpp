// The library API (include/gerbil/gerbil.h): a thin layer over the tokenizer, the chat template, the
// model on the GPU and the generation loop, translating between the public types and the internal ones.
#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>

#include "generate/engine_options.h"
#include "generate/generator.h"
#include "generate/model_text.h"
#include "gerbil/gerbil.h"
#include "gpu/device.h"
#include "json/json_file.h"
#include "graph/model.h"
#include "model/weights.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace gerbil {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// The public sampling defaults must stay those of the sampler.
constexpr bool same_defaults(const SamplingOptions& a, const SamplingParams& b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p &&
         a.repetition_penalty == b.repetition_penalty && a.presence_penalty == b.presence_penalty &&
         a.frequency_penalty == b.frequency_penalty && a.seed == b.seed;
}
static_assert(same_defaults(SamplingOptions{}, SamplingParams{}));

ordered_json extra_variables(std::string_view json) {
  return json.empty() ? ordered_json(nullptr) : parse_json_strict<ordered_json>(json, "chat template variables");
}

// The public stop reasons and the generator's finish reasons, one for one.
constexpr std::pair<FinishReason, StopReason> kReasons[] = {
    {FinishReason::EndOfSequence, StopReason::EndOfSequence},
    {FinishReason::StopString, StopReason::StopString},
    {FinishReason::MaxTokens, StopReason::MaxTokens},
    {FinishReason::ContextFull, StopReason::ContextFull},
    {FinishReason::Cancelled, StopReason::Cancelled}};

StopReason to_stop_reason(FinishReason reason) {
  for (auto [finish, stop] : kReasons)
    if (finish == reason) return stop;
  fail("generate: unknown finish reason {}", int(reason));
}

// The model's options with the ids it may pick cut to the tokenizer's (padded checkpoints have more logits).
graph::ModelOptions sampled_within(graph::ModelOptions options, const Tokenizer& tokenizer) {
  options.token_count = uint32_t(tokenizer.vocab_size());
  return options;
}

}  // namespace

Completion to_completion(Generation g) {
  const GenerationStats& s = g.stats;
  CompletionStats stats{.prompt_tokens = s.prompt_tokens,
                        .cached_tokens = s.prompt_tokens - s.prefilled_tokens,
                        .generated_tokens = s.generated_tokens,
                        .time_to_first_token = s.time_to_first_token,
                        .prefill_seconds = s.prefill_seconds,
                        .decode_seconds = s.decode_seconds,
                        .prefill_tokens_per_second = s.prefill_tokens_per_second(),
                        .decode_tokens_per_second = s.decode_tokens_per_second()};
  return {std::move(g.text), std::move(g.tokens), to_stop_reason(g.finish), stats, g.seed};
}

gpu::DeviceOptions device_options(const EngineOptions& options) {
  return {.adapter = options.adapter,
          .enable_toggles = options.enable_toggles,
          .disable_toggles = options.disable_toggles,
          .memory_limit = options.memory_limit};
}

graph::ModelOptions model_options(const EngineOptions& options) {
  if (options.max_prefill_chunk == 0) fail("max_prefill_chunk must be at least 1 token");
  constexpr std::pair<PreparedNorms, graph::PreparedNorms> kNorms[] = {
      {PreparedNorms::Auto, graph::PreparedNorms::Auto},
      {PreparedNorms::Always, graph::PreparedNorms::Always},
      {PreparedNorms::Never, graph::PreparedNorms::Never}};
  graph::PreparedNorms prepared_norms = graph::PreparedNorms::Auto;
  for (auto [given, internal] : kNorms)
    if (given == options.prepared_norms) prepared_norms = internal;
  return {.context = options.context,
          .max_chunk = options.max_prefill_chunk,
          .weights = options.weights == WeightStorage::F16 ? graph::WeightPolicy::F16
                                                           : graph::WeightPolicy::Checkpoint,
          .prepared_norms = prepared_norms,
          .arithmetic = options.arithmetic == Arithmetic::F16 ? kernels::Arithmetic::F16 : kernels::Arithmetic::F32,
          .kv_cache = options.kv_cache == KvCacheType::Q8    ? graph::KvCache::Q8
                      : options.kv_cache == KvCacheType::F16 ? graph::KvCache::F16
                      : options.kv_cache == KvCacheType::F32 ? graph::KvCache::F32
                                                             : graph::KvCache::Auto,
          .progress = options.progress,
          .pipelines_at_load = true};
}

GenerateOptions generate_options(const CompletionOptions& o) {
  const SamplingOptions& s = o.sampling;
  return {.sampling = {.temperature = s.temperature,
                       .top_k = s.top_k,
                       .top_p = s.top_p,
                       .min_p = s.min_p,
                       .repetition_penalty = s.repetition_penalty,
                       .presence_penalty = s.presence_penalty,
                       .frequency_penalty = s.frequency_penalty,
                       .seed = s.seed},
          .max_new_tokens = o.max_new_tokens,
          .stop_strings = o.stop,
          .stop_ids = o.stop_ids,
          .ignore_eos = o.ignore_eos};
}

SamplingOptions recommended_sampling(const GenerationDefaults& defaults) {
  SamplingOptions recommended;
  if (defaults.temperature) recommended.temperature = float(*defaults.temperature);
  if (defaults.top_p) recommended.top_p = float(*defaults.top_p);
  if (defaults.repetition_penalty) recommended.repetition_penalty = float(*defaults.repetition_penalty);
  if (defaults.top_k && *defaults.top_k >= 0 && *defaults.top_k <= INT32_MAX) recommended.top_k = int32_t(*defaults.top_k);
  try {
    generate_options({.sampling = recommended}).sampling.validate();
    return recommended;
  } catch (const Error&) {
    return {};  // a file's odd value (a top_p of 0, say) does not make every request fail
  }
}

std::string_view stop_reason_name(StopReason reason) {
  for (auto [finish, stop] : kReasons)
    if (stop == reason) return finish_reason_name(finish);
  return "unknown";
}

// Members are built in declaration order: the text side first (cheap, and the usual cause of a bad
// folder), then the checked model files, the device and the weights.
struct Engine::Impl {
  Impl(const fs::path& model_dir, const EngineOptions& options)
      : dir(model_dir),
        text(load_model_text(dir)),
        tokenizer(text.tokenizer),
        files(ModelFiles::open(dir)),
        device(device_options(options)),
        model(device, files, sampled_within(model_options(options), tokenizer)),
        generator(model, &tokenizer) {}

  fs::path dir;  // a model folder or a GGUF file
  ModelText text;
  const Tokenizer& tokenizer;
  ModelFiles files;
  gpu::Device device;
  graph::Model model;
  Generator generator;
  ModelInfo info;

  const ChatTemplate& chat_template() const { return chat_template_of(text, dir); }
};

Engine::Engine(const fs::path& model_dir, const EngineOptions& options) {
  auto start = std::chrono::steady_clock::now();
  impl_ = std::make_unique<Impl>(model_dir, options);
  const graph::Model& m = impl_->model;
  impl_->info = {
      .architecture = std::string(m.config().arch->name),
      .adapter = impl_->device.adapter().summary(),
      .context = m.context(),
      .weight_bytes = m.weight_bytes(),
      .kv_cache_bytes = m.kv_cache_bytes(),
      .load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      .sampling = recommended_sampling(m.config().generation)};
}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

const ModelInfo& Engine::info() const { return impl_->info; }

std::vector<int32_t> Engine::tokenize(std::string_view text, bool add_special_tokens) const {
  return impl_->tokenizer.encode(text, add_special_tokens);
}

std::string Engine::detokenize(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->tokenizer.decode(ids, skip_special_tokens);
}

bool Engine::has_chat_template() const { return impl_->text.chat.has_value(); }

std::string Engine::apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                        std::string_view extra_vars_json) const {
  ordered_json list = ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return impl_->chat_template().render(list, add_generation_prompt, extra_variables(extra_vars_json));
}

std::string Engine::apply_chat_template_json(std::string_view messages_json, bool add_generation_prompt,
                                             std::string_view extra_vars_json) const {
  return impl_->chat_template().render(parse_json_strict<ordered_json>(messages_json, "chat messages"), add_generation_prompt,
                                       extra_variables(extra_vars_json));
}

Completion Engine::complete(std::string_view prompt, const CompletionOptions& options,
                            const StreamCallback& on_text, const std::atomic<bool>* cancel) {
  return complete(tokenize(prompt), options, on_text, cancel);
}

Completion Engine::complete(std::span<const int32_t> prompt, const CompletionOptions& options,
                            const StreamCallback& on_text, const std::atomic<bool>* cancel) {
  TextCallback stream;
  if (on_text) stream = [&on_text](std::string_view text, int32_t) { return on_text(text); };
  return to_completion(impl_->generator.generate(prompt, generate_options(options), stream, cancel));
}

void Engine::reset() { impl_->generator.reset(); }

}  // namespace gerbil
