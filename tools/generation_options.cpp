#include "generation_options.h"

#include <cstdio>

namespace gerbil::cli {

void GenerationFlags::add_to(CLI::App& app, uint32_t default_max_tokens) {
  options.max_new_tokens = default_max_tokens;
  auto& s = options.sampling;
  app.add_option("-n,--max-new-tokens", options.max_new_tokens, "Most tokens to generate")->capture_default_str();
  app.add_flag("--greedy", greedy, "Always take the most likely token (same as --temperature 0)");
  app.add_option("--temperature", s.temperature, "Sampling temperature; 0 is greedy")->capture_default_str();
  app.add_option("--top-k", s.top_k, "Sample among the k most likely tokens (0: off)")->capture_default_str();
  app.add_option("--top-p", s.top_p, "Nucleus sampling: smallest set with this total probability")->capture_default_str();
  app.add_option("--min-p", s.min_p, "Drop tokens below min-p times the best token's probability")->capture_default_str();
  app.add_option("--repeat-penalty", s.repetition_penalty, "Penalise tokens already seen (1: off)")->capture_default_str();
  app.add_option("--presence-penalty", s.presence_penalty, "Subtract from seen tokens' logits")->capture_default_str();
  app.add_option("--frequency-penalty", s.frequency_penalty, "Subtract per occurrence")->capture_default_str();
  app.add_option("--seed", s.seed, "Random seed; the same seed gives the same text (0: random)");
  app.add_option("--stop", options.stop_strings, "Stop before this text (repeatable)");
  app.add_flag("--ignore-eos", options.ignore_eos, "Do not stop at the end-of-sequence token");
}

GenerateOptions GenerationFlags::resolve() const {
  GenerateOptions resolved = options;
  if (greedy) resolved.sampling.temperature = 0;
  resolved.sampling.validate();
  return resolved;
}

void print_stats(const Generation& g) {
  const auto& s = g.stats;
  std::fprintf(stderr,
               "[%zu prompt tokens (%zu computed), %zu generated | first token %.0f ms | prefill %.1f tok/s | "
               "decode %.1f tok/s | finish: %s | seed %llu]\n",
               s.prompt_tokens, s.prefilled_tokens, s.generated_tokens, s.time_to_first_token * 1000,
               s.prefill_tokens_per_second(), s.decode_tokens_per_second(),
               std::string(finish_reason_name(g.finish)).c_str(), (unsigned long long)g.seed);
}

}  // namespace gerbil::cli
