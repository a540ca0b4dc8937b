// gerbil generate: token ids in, token ids (or text) out — the checking interface of the generation loop.
#include <cstdio>

#include "command.h"
#include "generation_options.h"
#include "model_options.h"

namespace gerbil::cli {
namespace {

struct GenerateCommand {
  ModelOptions model;
  GenerationFlags generation;
  std::string tokens;
  bool print_ids = false, stats = false;
};

int generate(const GenerateCommand& c) {
  auto prompt = parse_ids(c.tokens);
  GenerateOptions options = c.generation.resolve();
  auto loaded = load_model(c.model, c.stats);
  Generator generator(*loaded.model, nullptr);
  Generation result = generator.generate(prompt, options);
  std::string line;
  for (size_t i = 0; i < result.tokens.size(); ++i) line += (i ? "," : "") + std::to_string(result.tokens[i]);
  std::printf("%s\n", line.c_str());
  if (c.stats) print_stats(result);
  return 0;
}

GERBIL_COMMAND("generate", "Generate token ids from prompt token ids", [](CLI::App& app) {
  auto c = std::make_shared<GenerateCommand>();
  c->model.add_to(app);
  c->generation.add_to(app, 32);
  app.add_option("--tokens", c->tokens, "Prompt token ids, comma-separated")->required();
  app.add_flag("--print-ids", c->print_ids, "Print the new token ids, comma-separated (the default output)");
  app.add_flag("--stats", c->stats, "Print load and speed statistics to stderr");
  return [c] { return generate(*c); };
});

}  // namespace
}  // namespace gerbil::cli
