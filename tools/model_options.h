// Options every model-running command shares (--model, --ctx, --adapter, --weights) and the loading
// they drive, so each command declares them once and loads a model the same way.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "graph/model.h"
#include "gpu/device.h"
#include "model/weights.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace gerbil::cli {

struct ModelOptions {
  std::string model_dir;
  uint32_t context = 0;
  uint32_t slots = 1;  // KV-cache slots: sequences decoded at once (serve --parallel)
  std::string adapter;
  std::string weights = "checkpoint";
  std::string prepared_norms = "auto";
  std::string arithmetic = "f32";
  std::vector<std::string> enable_toggles, disable_toggles;  // Dawn device toggles
  bool precise_timestamps = false;                           // for per-dispatch profiles

  void add_to(CLI::App& app, bool model_required = true);
};

// A loaded model and the device it runs on.
struct LoadedModel {
  std::unique_ptr<gpu::Device> device;
  std::unique_ptr<ModelFiles> files;
  std::unique_ptr<graph::Model> model;
};

// REPORT: a progress bar on stderr while the weights upload (when stderr is a terminal), then one line
// saying what was loaded where.
LoadedModel load_model(const ModelOptions& options, bool report = false);

// The tokenizer and, when the folder has one, the chat template of a model folder: what commands that
// take text need. Throws naming the folder when there is no tokenizer.
struct ModelText {
  Tokenizer tokenizer;
  std::optional<ChatTemplate> chat;
};

ModelText load_text(const std::string& model_dir);

// "1,2,3" -> {1, 2, 3}; throws naming the bad entry.
std::vector<int32_t> parse_ids(const std::string& text);

}  // namespace gerbil::cli
