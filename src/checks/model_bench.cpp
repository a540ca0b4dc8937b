#include "checks/model_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "gerbil/error.h"
#include "kernels/model.h"

namespace gerbil {
namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
double time_seconds(Fn&& fn) {
  auto start = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs `fn` once to warm up (pipelines compiled, caches filled), then `repeats` timed times.
template <typename Fn>
ModelBenchResult measure(std::string test, uint32_t depth, uint32_t tokens, uint32_t repeats, Fn&& fn) {
  fn();
  ModelBenchResult result{std::move(test), depth, 0, 0, {}};
  for (uint32_t r = 0; r < repeats; ++r) result.seconds.push_back(time_seconds(fn));
  auto sorted = result.seconds;
  std::sort(sorted.begin(), sorted.end());
  result.median_seconds = sorted[sorted.size() / 2];
  result.tokens_per_second = tokens / result.median_seconds;
  return result;
}

// Valid options whose prompt, and deepest decode test with its generated tokens, fit in the model's context
// (counted in 64 bits: a depth near 2^32 must not wrap round to a small number).
void check_fits(const graph::Model& model, const ModelBenchOptions& options) {
  options.validate();
  uint64_t deepest = *std::max_element(options.depths.begin(), options.depths.end());
  uint64_t needed = std::max<uint64_t>(options.prompt_tokens, deepest + options.generated_tokens + 1);
  if (needed > model.context())
    fail("bench model: needs a context of {} tokens (depth {} + {} generated), the model has {} (--ctx)", needed,
         deepest, options.generated_tokens, model.context());
}

}  // namespace

void ModelBenchOptions::validate() const {
  if (prompt_tokens == 0) fail("bench model: -p/--prompt-tokens must be at least 1, got 0");
  if (generated_tokens == 0) fail("bench model: -g/--generated-tokens must be at least 1, got 0");
  if (depths.empty()) fail("bench model: -d/--depths must list at least one context depth");
  if (repeats == 0) fail("bench model: -r/--repeats must be at least 1, got 0");
}

graph::Model::GpuSampling parse_bench_sampling(const std::string& spec, const GenerationDefaults& defaults) {
  graph::Model::GpuSampling s{.seed = 1};
  std::stringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    if (item == "defaults") {
      if (defaults.temperature) s.temperature = float(*defaults.temperature);
      if (defaults.top_k) s.top_k = uint32_t(std::max<int64_t>(*defaults.top_k, 0));
      if (defaults.top_p) s.top_p = float(*defaults.top_p);
      if (defaults.repetition_penalty) s.repetition_penalty = float(*defaults.repetition_penalty);
      continue;
    }
    auto equals = item.find('=');
    std::string key = item.substr(0, equals), text = equals == std::string::npos ? "" : item.substr(equals + 1);
    char* end = nullptr;
    double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(value))
      fail("bench model: --sampling \"{}\": \"{}\" is not defaults or KEY=NUMBER", spec, item);
    std::map<std::string, float*> fields = {{"temperature", &s.temperature},
                                            {"top_p", &s.top_p},
                                            {"min_p", &s.min_p},
                                            {"repetition_penalty", &s.repetition_penalty},
                                            {"presence_penalty", &s.presence_penalty},
                                            {"frequency_penalty", &s.frequency_penalty}};
    if (key == "top_k" && value >= 0 && value == std::floor(value))
      s.top_k = uint32_t(value);
    else if (auto field = fields.find(key); field != fields.end())
      *field->second = float(value);
    else
      fail("bench model: --sampling \"{}\": unknown key or bad value in \"{}\" (keys: temperature, top_k (a whole "
           "number >= 0), top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty)",
           spec, item);
  }
  return s;
}

namespace {

// "temperature=0.7 top_k=20 top_p=0.8 repetition_penalty=1.05": the settings that are not off.
std::string describe(const graph::Model::GpuSampling& s) {
  std::string text = fmt::format("temperature={}", s.temperature);
  if (s.top_k) text += fmt::format(" top_k={}", s.top_k);
  if (s.top_p < 1) text += fmt::format(" top_p={}", s.top_p);
  if (s.min_p > 0) text += fmt::format(" min_p={}", s.min_p);
  if (s.repetition_penalty != 1) text += fmt::format(" repetition_penalty={}", s.repetition_penalty);
  if (s.presence_penalty != 0) text += fmt::format(" presence_penalty={}", s.presence_penalty);
  if (s.frequency_penalty != 0) text += fmt::format(" frequency_penalty={}", s.frequency_penalty);
  return text;
}

// The settings of --sampling's named row, checked against what the GPU sampler takes; nullopt without it.
std::optional<graph::Model::GpuSampling> named_sampling(const graph::Model& model, const ModelBenchOptions& options) {
  if (options.sampling.empty()) return std::nullopt;
  graph::Model::GpuSampling sampled = parse_bench_sampling(options.sampling, model.config().generation);
  if (!model.sampling_on_gpu(sampled))
    fail("bench model: --sampling \"{}\" ({}): the GPU sampler cannot draw with it (it needs a positive "
         "temperature)",
         options.sampling, describe(sampled));
  return sampled;
}

}  // namespace

std::string llama_bench_name(const ModelBenchResult& result) {
  if (result.depth == 0) return result.test;
  size_t variant = std::min(result.test.find(" ("), result.test.size());
  return fmt::format("{} @ d{}{}", result.test.substr(0, variant), result.depth, result.test.substr(variant));
}

std::vector<ModelBenchResult> bench_model(graph::Model& model, const ModelBenchOptions& options) {
  check_fits(model, options);
  std::optional<graph::Model::GpuSampling> sampled = named_sampling(model, options);
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int32_t> token(0, int32_t(model.config().vocab_size) - 1);
  auto random_tokens = [&](uint32_t n) {
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = token(rng);
    return ids;
  };
  std::vector<ModelBenchResult> results;

  auto prompt = random_tokens(options.prompt_tokens);
  results.push_back(measure(fmt::format("pp{}", options.prompt_tokens), 0, options.prompt_tokens, options.repeats,
                            [&] {
                              model.reset();
                              model.forward(prompt);
                            }));

  for (uint32_t depth : options.depths) {
    model.reset();
    if (depth > 0) model.forward(random_tokens(depth));
    int32_t first = token(rng);
    auto all = [](int32_t) { return true; };
    // Argmax on the GPU, steps queued back to back (the fast path of greedy generation).
    results.push_back(measure(fmt::format("tg{}", options.generated_tokens), depth, options.generated_tokens,
                              options.repeats, [&] {
                                model.rewind(depth);
                                model.decode_greedy(first, options.generated_tokens, all);
                              }));
    // Drawn on the GPU, steps back to back, with the temperature, top-k and top-p of Qwen2.5's and Llama 3's
    // generation_config.json (no penalties; top-p alone: on random weights the cut usually lies past the 64
    // best, so the kernel draws by rejection over the whole vocabulary, its slow path).
    const std::pair<const char*, graph::Model::GpuSampling> settings[] = {
        {"top-k 20 sampling", {.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .seed = 1}},
        {"top-p 0.9 sampling", {.temperature = 0.6f, .top_k = 0, .top_p = 0.9f, .seed = 1}}};
    std::vector<std::pair<std::string, graph::Model::GpuSampling>> rows(std::begin(settings), std::end(settings));
    if (sampled) rows.emplace_back("sampled: " + describe(*sampled), *sampled);
    for (const auto& [name, sampling] : rows)
      if (model.sampling_on_gpu(sampling))
        results.push_back(measure(fmt::format("tg{} ({})", options.generated_tokens, name), depth,
                                  options.generated_tokens, options.repeats, [&] {
                                    model.rewind(depth);
                                    model.decode_sampled(first, options.generated_tokens, sampling, {.generated = std::span(&first, 1)}, all);
                                  }));
    // The same tokens with the logits read back and sampled on the host at every step.
    results.push_back(measure(fmt::format("tg{} (host sampling)", options.generated_tokens), depth,
                              options.generated_tokens, options.repeats, [&] {
                                model.rewind(depth);
                                int32_t id = first;
                                for (uint32_t i = 0; i < options.generated_tokens; ++i) {
                                  auto logits = model.forward(std::span(&id, 1));
                                  id = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
                                }
                              }));
  }
  model.reset();
  return results;
}

namespace {

// "layer 12 qkv|linear" -> {"qkv", "linear"}.
std::pair<std::string, std::string> role_and_kernel(const std::string& label) {
  auto bar = label.rfind('|');
  std::string role = label.substr(0, bar), kernel = bar == std::string::npos ? "" : label.substr(bar + 1);
  if (role.rfind("layer ", 0) == 0) {
    auto space = role.find(' ', 6);
    role = space == std::string::npos ? role : role.substr(space + 1);
  }
  return {role, kernel};
}

}  // namespace

StepProfile summarise_profile(std::string step, const std::vector<gpu::Timing>& timings) {
  StepProfile profile{std::move(step), 0, uint32_t(timings.size()), {}};
  for (const auto& timing : timings) {
    auto [role, kernel] = role_and_kernel(timing.label);
    auto row = std::find_if(profile.rows.begin(), profile.rows.end(),
                            [&](const ProfileRow& r) { return r.role == role && r.kernel == kernel; });
    if (row == profile.rows.end()) row = profile.rows.insert(profile.rows.end(), {role, kernel});
    row->dispatches++;
    row->microseconds += timing.ns / 1000;
    profile.total_microseconds += timing.ns / 1000;
  }
  std::sort(profile.rows.begin(), profile.rows.end(),
            [](const ProfileRow& a, const ProfileRow& b) { return a.microseconds > b.microseconds; });
  return profile;
}

std::vector<StepProfile> profile_model(graph::Model& model, const ModelBenchOptions& options) {
  check_fits(model, options);
  std::optional<graph::Model::GpuSampling> sampled = named_sampling(model, options);
  std::vector<StepProfile> profiles;
  std::vector<int32_t> filler(options.prompt_tokens, 0);
  // A prompt longer than one step runs in chunks: the last, which attends to the whole prompt, is profiled.
  uint32_t chunk = model.max_chunk();
  uint32_t earlier = (options.prompt_tokens - 1) / chunk * chunk;
  uint32_t last = options.prompt_tokens - earlier;
  auto profile_last_chunk = [&] {
    model.reset();
    if (earlier > 0) model.forward(std::span(filler.data(), earlier));
    return model.profile(last);
  };
  profile_last_chunk();  // warm-up: pipelines compiled
  profiles.push_back(summarise_profile(
      earlier == 0 ? fmt::format("prefill of {} tokens", last)
                   : fmt::format("prefill of the last {} tokens of {} (chunks of {})", last, options.prompt_tokens, chunk),
      profile_last_chunk()));
  for (uint32_t depth : options.depths) {
    model.reset();
    for (uint32_t done = 0; done < depth;) {
      uint32_t n = std::min<uint32_t>(depth - done, uint32_t(filler.size()));
      model.forward(std::span(filler.data(), n));
      done += n;
    }
    model.profile(1);
    profiles.push_back(summarise_profile(fmt::format("decode at depth {}", depth), model.profile(1)));
    if (sampled) {
      model.profile_sampled(*sampled);  // warm-up: the sampled step's pipelines compiled
      profiles.push_back(summarise_profile(fmt::format("decode at depth {}, sampled: {}", depth, describe(*sampled)),
                                           model.profile_sampled(*sampled)));
    }
  }
  model.reset();
  return profiles;
}

}  // namespace gerbil
