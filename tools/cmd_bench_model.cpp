// gerbil bench model: prefill and decode throughput of a model folder or of a random-weight preset.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "command.h"
#include "gerbil/error.h"
#include "checks/batch_bench.h"
#include "checks/model_bench.h"
#include "generate/generation.h"
#include "model/synth.h"
#include "model_options.h"

namespace gerbil::cli {
namespace {

struct BenchModelCommand {
  ModelOptions model;
  std::string preset, dtype = "f16", scratch = "/tmp";
  ModelBenchOptions bench;
  std::vector<uint32_t> batch;  // --batch: sequence counts of the batched benchmark instead
  bool json = false, profile = false;
};

nlohmann::json profile_json(const StepProfile& p) {
  nlohmann::json rows = nlohmann::json::array();
  for (auto& r : p.rows)
    rows.push_back({{"role", r.role}, {"kernel", r.kernel}, {"dispatches", r.dispatches}, {"microseconds", r.microseconds}});
  return {{"step", p.step}, {"dispatches", p.dispatches}, {"total_microseconds", p.total_microseconds}, {"rows", rows}};
}

void print_profile(const StepProfile& p) {
  std::printf("\nprofile: %s, %u dispatches each timed alone, %.1f us in all\n", p.step.c_str(), p.dispatches,
              p.total_microseconds);
  std::printf("  %-22s %-24s %6s %11s %9s %6s\n", "role", "kernel", "count", "total us", "us each", "share");
  for (auto& r : p.rows)
    std::printf("  %-22s %-24s %6u %11.1f %9.2f %5.1f%%\n", r.role.c_str(), r.kernel.c_str(), r.dispatches,
                r.microseconds, r.microseconds / r.dispatches, 100 * r.microseconds / p.total_microseconds);
}

// The folder of a preset's random-weight model, written on first use.
std::string preset_folder(const BenchModelCommand& c) {
  std::filesystem::path dir = std::filesystem::path(c.scratch) / fmt::format("gerbil-{}-{}", c.preset, c.dtype);
  if (!std::filesystem::exists(dir / "config.json")) {
    SynthOptions options;
    options.preset = c.preset;
    options.seed = 1;
    if (!parse_dtype(c.dtype == "f32" ? "F32" : c.dtype == "f16" ? "F16" : "BF16", options.dtype))
      fail("bench model: unknown --dtype {}", c.dtype);
    std::fprintf(stderr, "writing random-weight %s (%s) to %s\n", c.preset.c_str(), c.dtype.c_str(), dir.c_str());
    synth_model(dir, options);
  }
  return dir.string();
}

// --batch: each count's prompts prefilled, then decode steps over all sequences together (llama-batched-bench).
int bench_batch_command(BenchModelCommand c) {
  BatchBenchOptions options{.prompt_tokens = c.bench.prompt_tokens,
                            .generated_tokens = c.bench.generated_tokens,
                            .sequences = c.batch,
                            .seed = c.bench.seed,
                            .profile = c.profile};
  c.model.precise_timestamps = c.profile;
  c.model.slots = *std::max_element(c.batch.begin(), c.batch.end());
  if (c.model.context == 0) c.model.context = options.prompt_tokens + options.generated_tokens;
  auto loaded = load_model(c.model, !c.json);
  if (!c.bench.sampling.empty())
    options.sampling = parse_bench_sampling(c.bench.sampling, loaded.model->config().generation);
  auto results = bench_batch(*loaded.model, options);
  nlohmann::json report = {{"model", c.model.model_dir},
                           {"adapter", loaded.device->adapter().summary()},
                           {"prompt_tokens", options.prompt_tokens},
                           {"generated_tokens", options.generated_tokens},
                           {"results", nlohmann::json::array()}};
  for (auto& r : results)
    report["results"].push_back({{"sequences", r.sequences},
                                 {"prefill_seconds", r.prefill_seconds},
                                 {"prefill_tokens_per_second", r.prefill_tokens_per_second},
                                 {"decode_seconds", r.decode_seconds},
                                 {"decode_tokens_per_second", r.decode_tokens_per_second}});
  for (auto& r : results)
    if (r.profile) report["profiles"].push_back(profile_json(*r.profile));
  if (options.sampling) report["sampling"] = c.bench.sampling;
  if (c.json) {
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }
  if (options.sampling) std::printf("every sequence sampled on the GPU: %s\n", c.bench.sampling.c_str());
  std::printf("%-10s %12s %14s %12s %14s\n", "sequences", "prefill ms", "prefill tok/s", "decode ms", "decode tok/s");
  for (auto& r : results)
    std::printf("%-10u %12.2f %14.1f %12.2f %14.1f\n", r.sequences, r.prefill_seconds * 1000,
                r.prefill_tokens_per_second, r.decode_seconds * 1000, r.decode_tokens_per_second);
  for (auto& r : results)
    if (r.profile) print_profile(*r.profile);
  return 0;
}

int bench_model_command(BenchModelCommand c) {
  if (c.model.model_dir.empty() == c.preset.empty()) fail("bench model: give exactly one of --model and --preset");
  c.bench.validate();  // before a preset is written or a device created
  if (!c.preset.empty()) c.model.model_dir = preset_folder(c);
  if (!c.batch.empty()) return bench_batch_command(c);
  c.model.precise_timestamps = c.profile;
  auto load_start = std::chrono::steady_clock::now();
  auto loaded = load_model(c.model, !c.json);
  double load_seconds = seconds_since(load_start);
  auto& model = *loaded.model;
  // The time to a prompt's logits from an empty cache (a prompt of `tokens` ids 1, within the context).
  struct PromptTime {
    size_t tokens;
    double seconds;
  };
  auto time_prompt = [&model](uint32_t tokens) {
    std::vector<int32_t> prompt(std::min(tokens, model.context()), 1);
    model.reset();
    auto start = std::chrono::steady_clock::now();
    model.forward(prompt);
    PromptTime time{prompt.size(), seconds_since(start)};
    model.reset();
    return time;
  };
  // The first request of a fresh process, as `gerbil run` makes it: a short prompt's logits, cold.
  constexpr uint32_t kColdPromptTokens = 14;
  PromptTime cold = time_prompt(kColdPromptTokens);
  auto results = bench_model(model, c.bench);
  // A warm process's first token of a prompt length it has not run (a step recorded anew, as for most requests):
  // what the cold prompt is compared with, so that the difference is what load leaves to the first request.
  PromptTime fresh =
      time_prompt(kColdPromptTokens + (kColdPromptTokens + 1 == c.bench.prompt_tokens ? 2 : 1));
  std::vector<StepProfile> profiles;
  if (c.profile) profiles = profile_model(model, c.bench);
  nlohmann::json report = {{"model", c.model.model_dir},
                           {"architecture", std::string(model.config().arch->name)},
                           {"adapter", loaded.device->adapter().summary()},
                           {"weights", c.model.weights},
                           {"arithmetic", c.model.arithmetic},
                           {"weight_bytes", model.weight_bytes()},
                           {"kv_cache_bytes", model.kv_cache_bytes()},
                           {"kv_cache", kernels::kv_type_name(model.kv_type())},
                           {"context", model.context()},
                           {"load_seconds", load_seconds},
                           {"load_weights_seconds", model.load_stats().weights_seconds},
                           {"load_pipelines_seconds", model.load_stats().pipelines_seconds},
                           {"load_warm_up_seconds", model.load_stats().warm_up_seconds},
                           {"load_pipelines", model.load_stats().pipelines},
                           {"load_traced_steps", model.load_stats().traced_steps},
                           {"cold_prompt_tokens", cold.tokens},
                           {"cold_first_token_seconds", cold.seconds},
                           {"warm_new_prompt_tokens", fresh.tokens},
                           {"warm_new_prompt_seconds", fresh.seconds},
                           {"results", nlohmann::json::array()}};
  for (auto& r : results)
    report["results"].push_back({{"test", r.test}, {"name", llama_bench_name(r)}, {"depth", r.depth},
                                 {"median_seconds", r.median_seconds},
                                 {"tokens_per_second", r.tokens_per_second}, {"seconds", r.seconds}});
  for (auto& p : profiles) report["profiles"].push_back(profile_json(p));
  if (c.json) {
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }
  std::printf("model: %s (%s), weights %s: %.1f MiB, KV cache %.1f MiB (%u tokens, %s), prompt arithmetic %s\n",
              c.model.model_dir.c_str(), std::string(model.config().arch->name).c_str(), c.model.weights.c_str(),
              model.weight_bytes() / 1048576.0, model.kv_cache_bytes() / 1048576.0, model.context(),
              kernels::kv_type_name(model.kv_type()), c.model.arithmetic.c_str());
  std::printf("%-40s %14s %12s\n", "test (llama-bench's names)", "median ms", "tok/s");
  for (auto& r : results)
    std::printf("%-40s %14.2f %12.1f\n", llama_bench_name(r).c_str(), r.median_seconds * 1000, r.tokens_per_second);
  std::printf("time to first token (pp%u): %.1f ms\n", c.bench.prompt_tokens, results.front().median_seconds * 1000);
  const graph::LoadStats& load = model.load_stats();
  std::printf("load: %.0f ms (weights %.0f ms; pipelines %.0f ms: %zu created for %zu traced steps; warm-up %.0f ms); "
              "cold first token (the first %zu-token prompt after load): %.1f ms\n",
              load_seconds * 1000, load.weights_seconds * 1000, load.pipelines_seconds * 1000, load.pipelines,
              load.traced_steps, load.warm_up_seconds * 1000, cold.tokens, cold.seconds * 1000);
  std::printf("warm first token of a new prompt length (%zu tokens, its step recorded anew): %.1f ms\n",
              fresh.tokens, fresh.seconds * 1000);
  for (auto& p : profiles) print_profile(p);
  return 0;
}

GERBIL_COMMAND("bench model", "Prefill (pp512) and decode (tg128) throughput, like llama-bench", [](CLI::App& app) {
  auto c = std::make_shared<BenchModelCommand>();
  c->model.add_to(app, false);
  app.add_option("--preset", c->preset, "Benchmark a random-weight model of this preset (see gerbil synth)");
  app.add_option("--dtype", c->dtype, "Checkpoint dtype of a --preset model")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_option("--scratch", c->scratch, "Where --preset models are written (reused when present)");
  app.add_option("-p,--prompt-tokens", c->bench.prompt_tokens, "Prompt length of the prefill test")->capture_default_str();
  app.add_option("-g,--generated-tokens", c->bench.generated_tokens, "Tokens of the decode test")->capture_default_str();
  app.add_option("-d,--depths", c->bench.depths, "Context depths of the decode test");
  app.add_option("-r,--repeats", c->bench.repeats, "Timed repeats (median reported)")->capture_default_str();
  app.add_option("--sampling", c->bench.sampling,
                 "One more decode row sampled on the GPU: \"defaults\" (the model's generation_config.json) "
                 "and/or KEY=NUMBER,... (temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, "
                 "frequency_penalty), e.g. \"defaults,top_k=40\"; with --batch, every sequence draws with them");
  app.add_option("--batch", c->batch,
                 "Instead: B sequences of -p prompt and -g generated tokens decoded together, for each B given "
                 "(e.g. --batch 1,4,16,64; like llama-batched-bench)")
      ->delimiter(',');
  app.add_flag("--profile", c->profile,
               "Also time every dispatch of a prefill and of a decode step on its own (GPU timestamps); with "
               "--batch, of a decode step of each count");
  app.add_flag("--json", c->json, "Print JSON");
  return [c] { return bench_model_command(*c); };
});

}  // namespace
}  // namespace gerbil::cli
