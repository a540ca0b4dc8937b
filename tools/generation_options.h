// Sampling and stopping flags shared by generate, run and chat.
#pragma once

#include <CLI/CLI.hpp>

#include "generate/generator.h"

namespace gerbil::cli {

struct GenerationFlags {
  GenerateOptions options;
  bool greedy = false;

  void add_to(CLI::App& app, uint32_t default_max_tokens);
  // The options with --greedy applied and the sampling values checked.
  GenerateOptions resolve() const;
};

// One line of per-run statistics (prompt, TTFT, prefill and decode speed, finish reason) to stderr.
void print_stats(const Generation& generation);

}  // namespace gerbil::cli
