// Commands that check the forward pass: gerbil logits, gerbil generate (token ids in and out), gerbil graph.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "command.h"
#include "gerbil/error.h"
#include "model_options.h"
#include "token_ids.h"

namespace gerbil::cli {
namespace {

struct LogitsOptions {
  ModelOptions model;
  std::string tokens, out;
  int decode_from = -1;
};

int write_logits(const LogitsOptions& options) {
  std::vector<int32_t> ids = parse_token_ids(options.tokens, "--tokens");
  auto loaded = load_model(options.model);
  auto& model = *loaded.model;
  std::vector<float> logits;
  if (options.decode_from < 0) {
    logits = model.forward(ids, true);
  } else {
    size_t split = std::min<size_t>(size_t(options.decode_from), ids.size());
    if (split > 0) logits = model.forward(std::span(ids).first(split), true);
    for (size_t t = split; t < ids.size(); ++t) {
      auto row = model.forward(std::span(ids).subspan(t, 1), true);
      logits.insert(logits.end(), row.begin(), row.end());
    }
  }
  std::ofstream out(options.out, std::ios::binary);
  if (!out) fail("cannot write {}", options.out);
  out.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
  if (!out) fail("writing {} failed", options.out);
  std::fprintf(stderr, "wrote %zu x %lld logits to %s\n", ids.size(), (long long)model.config().vocab_size,
               options.out.c_str());
  return 0;
}

GERBIL_COMMAND("logits", "Write the logits of every position as raw float32 [T, vocab]", [](CLI::App& app) {
  auto o = std::make_shared<LogitsOptions>();
  o->model.add_to(app);
  app.add_option("--tokens", o->tokens, "Token ids, comma-separated")->required();
  app.add_option("--out", o->out, "Output file (little-endian float32, row-major [T, vocab])")->required();
  app.add_option("--decode-from", o->decode_from,
                 "Prefill positions 0..K-1 together, then feed every later position through single-token decode steps");
  return [o] { return write_logits(*o); };
});

struct GraphOptions {
  ModelOptions model;
  bool decode = false;
  uint32_t tokens = 16;
};

int print_graph(const GraphOptions& options) {
  auto loaded = load_model(options.model, true);
  uint32_t T = options.decode ? 1 : options.tokens;
  auto entries = loaded.model->describe(T);
  std::printf("%s step, T=%u: %zu dispatches\n", options.decode ? "decode" : "prefill", T, entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::printf("%4zu  %-28s %-16s %-44s (%u, %u, %u)\n", i, e.label.c_str(), e.kernel.c_str(), e.shapes.c_str(),
                e.grid.x, e.grid.y, e.grid.z);
  }
  return 0;
}

GERBIL_COMMAND("graph", "List the dispatches of a prefill or decode step", [](CLI::App& app) {
  auto o = std::make_shared<GraphOptions>();
  o->model.add_to(app);
  app.add_flag("--decode", o->decode, "Show a decode step (T = 1)");
  app.add_option("--tokens", o->tokens, "Prompt length of the prefill step shown")
      ->check(CLI::Range(1u, UINT32_MAX))
      ->capture_default_str();
  return [o] { return print_graph(*o); };
});

}  // namespace
}  // namespace gerbil::cli
