#include "model_options.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "generate/engine_options.h"
#include "generate/generation.h"
#include "gerbil/error.h"
#include "gpu/profiler.h"
#include "toggle_options.h"

namespace gerbil::cli {
namespace {

// "loading weights [#######             ]  35%  120/342 MiB" on one stderr line, redrawn only when the
// percentage changes, and erased when done so the summary line takes its place.
graph::LoadProgress progress_bar() {
  auto last_percent = std::make_shared<int>(-1);
  return [last_percent](uint64_t done, uint64_t total) {
    constexpr int kWidth = 30;
    int percent = total ? int(done * 100 / total) : 100;
    if (percent == *last_percent) return;
    *last_percent = percent;
    std::string bar(size_t(percent * kWidth / 100), '#');
    bar.resize(kWidth, ' ');
    std::fprintf(stderr, "\rloading weights [%s] %3d%%  %.0f/%.0f MiB", bar.c_str(), percent, done / 1048576.0,
                 total / 1048576.0);
    if (done == total) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  };
}

void print_loaded(const std::string& dir, const ModelInfo& info) {
  std::fprintf(stderr, "loaded %s (%s) on %s in %.2f s: weights %.1f MiB, KV cache %.1f MiB for %u tokens\n",
               dir.c_str(), info.architecture.c_str(), info.adapter.c_str(), info.load_seconds,
               info.weight_bytes / 1048576.0, info.kv_cache_bytes / 1048576.0, info.context);
}

}  // namespace

void ModelOptions::add_to(CLI::App& app, bool model_required) {
  auto* model = app.add_option("--model", model_dir, "Hugging Face model folder (config.json + *.safetensors) or a GGUF file");
  if (model_required) model->required();
  app.add_option("--ctx", context, "Context length: KV-cache capacity in tokens (default: the model's, halved until the cache fits the GPU's memory)")
      ->check(CLI::Range(1u, UINT32_MAX));
  app.add_option("--max-prefill-chunk", max_prefill_chunk,
                 "Prompt tokens per prefill step; longer prompts run in chunks")
      ->check(CLI::Range(1u, UINT32_MAX))
      ->capture_default_str();
  app.add_option("--adapter", adapter, "WebGPU adapter (substring of its name; default: $GERBIL_ADAPTER)");
  app.add_option("--weights", weights, "Weight storage: checkpoint (as stored, lossless) or f16")
      ->check(CLI::IsMember({"checkpoint", "f16"}));
  app.add_option("--prepared-norms", prepared_norms,
                 "Decoding: products writing the residual stream also write the next RMSNorm's x * weight for the "
                 "product after: auto (from a hidden size the adapter's tuning sets: 4096 on an H200; `gerbil tune` "
                 "prints it), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("--arithmetic", arithmetic,
                 "Prompt products: f32 (default, nothing rounded) or f16 (needs shader-f16: inputs rounded to f16, "
                 "faster where the GPU runs f16 faster)")
      ->check(CLI::IsMember({"f32", "f16"}));
  app.add_option("--kv-cache", kv_cache,
                 "KV-cache elements: auto (f16 for f16, bf16, GPTQ, AWQ and GGUF checkpoints; f32 for float32 ones "
                 "and odd head dims), f32 (exact), f16 (half the memory; keys and values rounded to f16) or q8 (about "
                 "a quarter: 8-bit integers with a scale per token and kv head; head_dim a multiple of 4)")
      ->check(CLI::IsMember({"auto", "f32", "f16", "q8"}));
  app.add_option("--gpu-memory", memory_limit,
                 "The most GPU memory gerbil may take, e.g. 6GiB or 900MiB (units of 1,024; default: what the GPU "
                 "gives); the default context is halved until the model fits")
      ->check(CLI::Validator([](std::string& text) { return text.starts_with('-') ? "must not be negative" : ""; },
                             "SIZE"))
      ->transform(CLI::AsSizeValue(false));
  add_toggle_options(app, enable_toggles, disable_toggles);
}

EngineOptions ModelOptions::engine_options(bool report) const {
  EngineOptions options{
      .adapter = adapter,
      .context = context,
      .max_prefill_chunk = max_prefill_chunk,
      .weights = weights == "f16" ? WeightStorage::F16 : WeightStorage::Checkpoint,
      .arithmetic = arithmetic == "f16" ? Arithmetic::F16 : Arithmetic::F32,
      .kv_cache = kv_cache == "q8"    ? KvCacheType::Q8
                  : kv_cache == "f16" ? KvCacheType::F16
                  : kv_cache == "f32" ? KvCacheType::F32
                                      : KvCacheType::Auto,
      .prepared_norms = prepared_norms == "always"  ? PreparedNorms::Always
                        : prepared_norms == "never" ? PreparedNorms::Never
                                                    : PreparedNorms::Auto,
      .enable_toggles = enable_toggles,
      .disable_toggles = disable_toggles,
      .memory_limit = memory_limit};
  if (report && isatty(STDERR_FILENO)) options.progress = progress_bar();
  return options;
}

LoadedModel load_model(const ModelOptions& options, bool report) {
  auto start = std::chrono::steady_clock::now();
  EngineOptions engine = options.engine_options(report);
  gpu::DeviceOptions device = device_options(engine);
  if (options.precise_timestamps) gpu::request_precise_timestamps(device);
  LoadedModel loaded;  // the folder is opened and checked before the device is created
  loaded.files = std::make_unique<ModelFiles>(ModelFiles::open(options.model_dir));
  loaded.device = std::make_unique<gpu::Device>(device);
  graph::ModelOptions model = model_options(engine);
  model.slots = options.slots;
  model.kv_tokens = options.kv_tokens;
  model.token_count = options.token_count;
  loaded.model = std::make_unique<graph::Model>(*loaded.device, *loaded.files, model);
  if (report) {
    const graph::Model& m = *loaded.model;
    print_loaded(options.model_dir, {.architecture = std::string(m.config().arch->name),
                                     .adapter = loaded.device->adapter().summary(),
                                     .context = m.context(),
                                     .weight_bytes = m.weight_bytes(),
                                     .kv_cache_bytes = m.kv_cache_bytes(),
                                     .load_seconds = seconds_since(start)});
  }
  return loaded;
}

Engine open_engine(const ModelOptions& options, bool report) {
  Engine engine(options.model_dir, options.engine_options(report));
  if (report) print_loaded(options.model_dir, engine.info());
  return engine;
}

}  // namespace gerbil::cli
