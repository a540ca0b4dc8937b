// gerbil generate: token ids in, token ids (or text) out — the checking interface of the generation loop.
#include <cstdio>

#include "command.h"
#include "generate/engine_options.h"
#include "generation_options.h"
#include "model_options.h"
#include "token_ids.h"

namespace gerbil::cli {
namespace {

struct GenerateCommand {
  ModelOptions model;
  GenerationFlags generation;
  std::string tokens;
  bool stats = false;
};

int generate(const GenerateCommand& c) {
  std::vector<int32_t> prompt = parse_token_ids(c.tokens, "--tokens");
  CompletionOptions resolved = c.generation.resolve();
  LoadedModel loaded = load_model(c.model, c.stats);
  GenerateOptions options = generate_options(
      c.generation.with_recommended(resolved, recommended_sampling(loaded.model->config().generation)));
  Generator generator(*loaded.model, nullptr);
  Completion result = to_completion(generator.generate(prompt, options));
  std::string line;
  for (size_t i = 0; i < result.tokens.size(); ++i) line += (i ? "," : "") + std::to_string(result.tokens[i]);
  std::printf("%s\n", line.c_str());
  if (c.stats) print_stats(result);
  return 0;
}

GERBIL_COMMAND("generate", "Generate token ids from prompt token ids (printed comma-separated)", [](CLI::App& app) {
  auto c = std::make_shared<GenerateCommand>();
  c->model.add_to(app);
  c->generation.add_to(app, 32, /*text=*/false);
  app.add_option("--tokens", c->tokens, "Prompt token ids, comma-separated")->required();
  app.add_flag("--stats", c->stats, "Print load and speed statistics to stderr");
  return [c] { return generate(*c); };
});

}  // namespace
}  // namespace gerbil::cli
