// Sampling and stopping flags shared by generate, run and chat; the chat flags and answer streaming
// shared by run and chat.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "generate/generator.h"

namespace gerbil::cli {

struct GenerationFlags {
  GenerateOptions options;
  bool greedy = false;

  void add_to(CLI::App& app, uint32_t default_max_tokens);
  // The options with --greedy applied and the sampling values checked.
  GenerateOptions resolve() const;
};

// --system and --thinking: how a conversation starts and what the chat template is told.
struct ChatFlags {
  std::string system;
  std::string thinking;  // "on", "off", or empty: the template's default

  void add_to(CLI::App& app);
  nlohmann::ordered_json first_messages() const;      // the system message, if any
  nlohmann::ordered_json template_variables() const;  // enable_thinking when --thinking is given
};

// Generates an answer and prints it to stdout as it comes, then a newline. Ctrl-C (SIGINT) while it runs
// stops the answer (finish reason cancelled) and the command carries on; a Ctrl-C at any other time, e.g.
// at the chat prompt, ends the process as usual.
Generation stream_answer(Generator& generator, std::span<const int32_t> prompt,
                         const GenerateOptions& options);

// One line of per-run statistics (prompt, TTFT, prefill and decode speed, finish reason) to stderr.
void print_stats(const Generation& generation);

}  // namespace gerbil::cli
