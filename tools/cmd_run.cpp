// gerbil run: one prompt in, the model's answer streamed out. The prompt becomes one user message of the
// model's chat template when it has one (--raw sends it as it is).
#include <cstdio>

#include "command.h"
#include "generation_options.h"
#include "gerbil/error.h"
#include "model_options.h"

namespace gerbil::cli {
namespace {

struct RunCommand {
  ModelOptions model;
  GenerationFlags generation;
  ChatFlags chat;
  std::string prompt;
  bool raw = false;
};

// The prompt's ids: the rendered chat template (which carries its own special tokens), or the raw text
// with the tokenizer's special tokens (e.g. Llama's BOS) added, as transformers' pipelines do.
std::vector<int32_t> prompt_ids(const RunCommand& c, const Engine& engine) {
  if (c.raw || !engine.has_chat_template()) {
    if (!c.chat.system.empty() || !c.chat.thinking.empty())
      fail("--system and --thinking need a chat template, and this model has none");
    return engine.tokenize(c.prompt, /*add_special_tokens=*/true);
  }
  std::vector<ChatMessage> messages = c.chat.first_messages();
  messages.push_back({"user", c.prompt});
  return engine.tokenize(
      engine.apply_chat_template(messages, /*add_generation_prompt=*/true, c.chat.template_variables()));
}

int run(const RunCommand& c) {
  CompletionOptions options = c.generation.resolve();
  if (c.raw && (!c.chat.system.empty() || !c.chat.thinking.empty()))
    fail("--system and --thinking need the chat template, and --raw skips it");
  Engine engine = open_engine(c.model);
  options = c.generation.with_recommended(options, engine.info().sampling);
  Completion answer = stream_answer(engine, prompt_ids(c, engine), options);
  print_stats(answer);
  return 0;
}

GERBIL_COMMAND("run", "Answer one prompt, streaming the text", [](CLI::App& app) {
  auto c = std::make_shared<RunCommand>();
  c->model.add_to(app);
  c->generation.add_to(app, 256);
  c->chat.add_to(app);
  app.add_option("prompt", c->prompt, "The prompt (one user message of the chat template)")->required();
  app.add_flag("--raw", c->raw, "Send the prompt as it is, without the chat template");
  app.footer(
      "The tokenizer and chat template come from the model folder (tokenizer.json, tokenizer_config.json).\n"
      "The answer goes to stdout; loading progress and a statistics line go to stderr.\n"
      "Ctrl-C stops the answer.");
  return [c] { return run(*c); };
});

}  // namespace
}  // namespace gerbil::cli
