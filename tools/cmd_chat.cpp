// gerbil chat: an interactive conversation through the model's chat template. Each turn re-renders the
// whole conversation; the generator's KV cache keeps the common prefix, so only the new text is computed.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "command.h"
#include "generate/model_text.h"
#include "generation_options.h"
#include "gerbil/error.h"
#include "model_options.h"

namespace gerbil::cli {
namespace {

struct ChatCommand {
  ModelOptions model;
  GenerationFlags generation;
  ChatFlags chat;
};

// Prints the prompt marker and reads one line; a piped line is echoed so the output reads as a transcript.
bool read_line(std::string& line, bool interactive) {
  std::printf("> ");
  std::fflush(stdout);
  if (!std::getline(std::cin, line)) {
    std::printf("\n");
    return false;
  }
  if (!interactive) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  return true;
}

// One turn: the user's line is added, the answer streamed and added. A failed turn (e.g. a conversation
// longer than the context) leaves the conversation as it was.
void answer(const ChatCommand& c, Engine& engine, std::vector<ChatMessage>& messages, const std::string& line,
            const CompletionOptions& options) {
  messages.push_back({"user", line});
  try {
    std::string prompt =
        engine.apply_chat_template(messages, /*add_generation_prompt=*/true, c.chat.template_variables());
    Completion reply = stream_answer(engine, engine.tokenize(prompt), options);
    print_stats(reply);
    messages.push_back({"assistant", reply.text});
  } catch (const Error& e) {
    messages.pop_back();
    std::fprintf(stderr, "gerbil: error: %s\n(the conversation is unchanged; /reset starts a new one)\n",
                 e.what());
  }
}

int chat(const ChatCommand& c) {
  CompletionOptions options = c.generation.resolve();
  require_chat_template(c.model.model_dir, "chat needs one (`gerbil run --raw` sends text as it is)");
  Engine engine = open_engine(c.model);
  options = c.generation.with_recommended(options, engine.info().sampling);
  bool interactive = isatty(STDIN_FILENO);
  if (interactive)
    std::fprintf(stderr,
                 "/reset starts a new conversation, /exit or Ctrl-D quits, Ctrl-C stops an answer.\n");

  std::vector<ChatMessage> messages = c.chat.first_messages();
  std::string line;
  while (read_line(line, interactive)) {
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      messages = c.chat.first_messages();
      engine.reset();
      std::printf("(new conversation)\n");
    } else if (line.starts_with('/')) {
      std::printf("unknown command %s: /reset starts a new conversation, /exit quits\n", line.c_str());
    } else if (!line.empty()) {
      answer(c, engine, messages, line, options);
    }
  }
  return 0;
}

GERBIL_COMMAND("chat", "Chat with a model interactively (stdin may be a pipe)", [](CLI::App& app) {
  auto c = std::make_shared<ChatCommand>();
  c->model.add_to(app);
  c->generation.add_to(app, 1024);
  c->chat.add_to(app);
  app.footer(
      "Commands: /reset starts a new conversation, /exit (or end of input) quits. Ctrl-C stops the answer\n"
      "being written; at the prompt it quits. The tokenizer and chat template come from the model folder.");
  return [c] { return chat(*c); };
});

}  // namespace
}  // namespace gerbil::cli
