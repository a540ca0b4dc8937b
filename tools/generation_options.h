// Sampling and stopping flags shared by generate, run and chat; the chat flags and answer streaming
// shared by run and chat.
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gerbil/gerbil.h"

namespace gerbil::cli {

struct GenerationFlags {
  CompletionOptions options;
  bool greedy = false;
  int64_t seed = 0;  // -1 and 0: a fresh seed (llama.cpp's -1 means that too)
  // The sampling flags the model's recommendation stands in for when they are not given.
  CLI::Option *temperature_flag = nullptr, *top_k_flag = nullptr, *top_p_flag = nullptr, *repeat_flag = nullptr;

  // TEXT: the command decodes text, so --stop is offered.
  void add_to(CLI::App& app, uint32_t default_max_tokens, bool text = true);
  // The options with --greedy and --seed applied and every value checked (before any model loads).
  CompletionOptions resolve() const;
  // RESOLVED with the model's RECOMMENDED sampling (ModelInfo::sampling) for the flags not given.
  CompletionOptions with_recommended(CompletionOptions resolved, const SamplingOptions& recommended) const;
};

// --system and --thinking: how a conversation starts and what the chat template is told.
struct ChatFlags {
  std::string system;
  std::string thinking;  // "on", "off", or empty: the template's default

  void add_to(CLI::App& app);
  std::vector<ChatMessage> first_messages() const;  // the system message, if any
  std::string template_variables() const;           // a JSON object: enable_thinking when --thinking is given
};

// Generates an answer after PROMPT and prints it to stdout as it comes, then a newline. Ctrl-C (SIGINT)
// from the call's start to its end, prefill included, stops the answer (stop reason cancelled) and the
// command carries on; a Ctrl-C at any other time, e.g. at the chat prompt, ends the process as usual.
Completion stream_answer(Engine& engine, std::span<const int32_t> prompt, const CompletionOptions& options);

// One line of per-run statistics (prompt, TTFT, prefill and decode speed, stop reason) to stderr.
void print_stats(const Completion& completion);

}  // namespace gerbil::cli
