#include "model_options.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

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

// Whether DIR has a chat template at all. A tokenizer_config.json that cannot be read counts as having
// one, so that loading it reports what is wrong instead of the template silently going missing.
bool has_chat_template(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "chat_template.jinja")) return true;
  std::ifstream in(dir / "tokenizer_config.json");
  if (!in) return false;
  auto config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return config.is_discarded() || !config.is_object() || config.contains("chat_template");
}

}  // namespace

void ModelOptions::add_to(CLI::App& app, bool model_required) {
  auto* model = app.add_option("--model", model_dir, "Hugging Face model folder (config.json + *.safetensors)");
  if (model_required) model->required();
  app.add_option("--ctx", context, "Context length: KV-cache capacity in tokens (default min(model max, 4096))");
  app.add_option("--adapter", adapter, "WebGPU adapter (substring of its name; default: $GERBIL_ADAPTER)");
  app.add_option("--weights", weights, "Weight storage: checkpoint (as stored, lossless) or f16")
      ->check(CLI::IsMember({"checkpoint", "f16"}));
  app.add_option("--prepared-norms", prepared_norms,
                 "Decoding: products writing the residual stream also write the next RMSNorm's x * weight for the "
                 "product after: auto (where measured to pay: hidden size >= 4096), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("--arithmetic", arithmetic,
                 "Prompt products: f32 (default, nothing rounded) or f16 (needs shader-f16: inputs rounded to f16, "
                 "faster where the GPU runs f16 faster)")
      ->check(CLI::IsMember({"f32", "f16"}));
  add_toggle_options(app, enable_toggles, disable_toggles);
}

LoadedModel load_model(const ModelOptions& options, bool report) {
  auto start = std::chrono::steady_clock::now();
  LoadedModel loaded;
  gpu::DeviceOptions device_options{.adapter = options.adapter,
                                    .enable_toggles = options.enable_toggles,
                                    .disable_toggles = options.disable_toggles};
  if (options.precise_timestamps) gpu::request_precise_timestamps(device_options);
  loaded.device = std::make_unique<gpu::Device>(device_options);
  loaded.files = std::make_unique<ModelFiles>(ModelFiles::open(options.model_dir));
  graph::ModelOptions model_options;
  model_options.context = options.context;
  model_options.slots = options.slots;
  model_options.weights = options.weights == "f16" ? graph::WeightPolicy::F16 : graph::WeightPolicy::Checkpoint;
  model_options.prepared_norms = options.prepared_norms == "always" ? graph::PreparedNorms::Always
                                 : options.prepared_norms == "never" ? graph::PreparedNorms::Never
                                                                     : graph::PreparedNorms::Auto;
  model_options.arithmetic = options.arithmetic == "f16" ? kernels::Arithmetic::F16 : kernels::Arithmetic::F32;
  if (report && isatty(STDERR_FILENO)) model_options.progress = progress_bar();
  loaded.model = std::make_unique<graph::Model>(*loaded.device, *loaded.files, model_options);
  if (report) {
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto& m = *loaded.model;
    std::fprintf(stderr, "loaded %s (%s) on %s in %.2f s: weights %.1f MiB, KV cache %.1f MiB for %u tokens\n",
                 options.model_dir.c_str(), std::string(m.config().arch->name).c_str(),
                 loaded.device->adapter().summary().c_str(), seconds, m.weight_bytes() / 1048576.0,
                 m.kv_cache_bytes() / 1048576.0, m.context());
  }
  return loaded;
}

ModelText load_text(const std::string& model_dir) {
  if (!std::filesystem::is_directory(model_dir)) fail("{}: no such model folder", model_dir);
  ModelText text{Tokenizer::load(model_dir), std::nullopt};
  if (has_chat_template(model_dir)) text.chat = ChatTemplate::from_tokenizer_config(model_dir);
  return text;
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value < 0 || value > INT32_MAX)
      fail("token list: entry {} ('{}') is not a token id", ids.size(), item);
    ids.push_back(int32_t(value));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

}  // namespace gerbil::cli
