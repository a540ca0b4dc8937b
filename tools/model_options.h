// Options every model-running command shares (--model, --ctx, --adapter, --weights, ...) and the loading
// they drive, so each command declares them once and loads a model the same way. `run` and `chat` load a
// gerbil::Engine, as a library user would; the checking commands (logits, graph, generate, bench model)
// drive the model on the GPU directly, from the same options translated in the same place.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gerbil/gerbil.h"
#include "gpu/device.h"
#include "graph/model.h"
#include "model/weights.h"

namespace gerbil::cli {

struct ModelOptions {
  std::string model_dir;
  uint32_t context = 0;  // 0: the library's default
  uint32_t slots = 1;    // KV-cache slots: sequences decoded at once (serve --parallel, bench batch)
  uint32_t kv_tokens = 0;  // tokens of the KV-cache pool the slots share (serve --kv-tokens; 0: slots x context)
  uint32_t token_count = 0;  // ids the model may pick: the tokenizer's where one is served (0: every logit)
  uint32_t max_prefill_chunk = EngineOptions{}.max_prefill_chunk;
  std::string adapter;
  std::string weights = "checkpoint";
  std::string prepared_norms = "auto";
  std::string arithmetic = "f32";
  std::string kv_cache = "auto";
  std::vector<std::string> enable_toggles, disable_toggles;  // Dawn device toggles
  uint64_t memory_limit = 0;                                 // --gpu-memory in bytes (0: the GPU's)
  bool precise_timestamps = false;                           // for per-dispatch profiles

  void add_to(CLI::App& app, bool model_required = true);
  // The library's options; REPORT adds a progress bar on stderr while the weights upload (when stderr is a
  // terminal).
  EngineOptions engine_options(bool report) const;
};

// A loaded model and the device it runs on, for the checking commands.
struct LoadedModel {
  std::unique_ptr<gpu::Device> device;
  std::unique_ptr<ModelFiles> files;
  std::unique_ptr<graph::Model> model;
};

// Both open and check the model folder (check_model_folder first) before any device is created. REPORT: a progress bar while the weights
// upload, then one line on stderr saying what was loaded where.
LoadedModel load_model(const ModelOptions& options, bool report = false);
Engine open_engine(const ModelOptions& options, bool report = true);

}  // namespace gerbil::cli
