#include "generation_options.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <limits>

#include "generate/engine_options.h"
#include "gerbil/error.h"

namespace gerbil::cli {
namespace {

std::atomic<bool> answering{false}, cancel_answer{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGINT handler needs lock-free flags");

void on_interrupt(int) {
  if (answering.load()) {
    cancel_answer.store(true);
    return;
  }
  // Not answering: end the process, as SIGINT's default action would, on a fresh line.
  (void)!write(STDOUT_FILENO, "\n", 1);
  _exit(128 + SIGINT);
}

void install_interrupt_handler() {
  static bool installed = false;
  if (installed) return;
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // the GPU driver's waits resume instead of failing with EINTR
  sigaction(SIGINT, &action, nullptr);
  installed = true;
}

// Marks an answer in progress for the SIGINT handler, also when generation throws.
struct Answering {
  Answering() {
    cancel_answer.store(false);
    answering.store(true);
  }
  ~Answering() { answering.store(false); }
};

}  // namespace

void GenerationFlags::add_to(CLI::App& app, uint32_t default_max_tokens, bool text) {
  options.max_new_tokens = default_max_tokens;
  auto& s = options.sampling;
  app.add_option("-n,--max-new-tokens", options.max_new_tokens, "Most tokens to generate")->capture_default_str();
  app.add_flag("--greedy", greedy, "Always take the most likely token (same as --temperature 0)");
  // Unless given, these four are the model's (generation_config.json, as vLLM takes them), else the defaults.
  temperature_flag = app.add_option("--temperature", s.temperature, "Sampling temperature; 0 is greedy (default: "
                                    "the model's generation_config.json, else 1)");
  top_k_flag = app.add_option("--top-k", s.top_k, "Sample among the k most likely tokens (0: off; default: the "
                              "model's, else 0)");
  top_p_flag = app.add_option("--top-p", s.top_p, "Nucleus sampling: smallest set with this total probability "
                              "(default: the model's, else 1)");
  app.add_option("--min-p", s.min_p, "Drop tokens below min-p times the best token's probability")->capture_default_str();
  repeat_flag = app.add_option("--repeat-penalty", s.repetition_penalty, "Penalise tokens already seen (1: off; "
                               "default: the model's, else 1)");
  app.add_option("--presence-penalty", s.presence_penalty, "Subtract from the logits of tokens generated so far")->capture_default_str();
  app.add_option("--frequency-penalty", s.frequency_penalty, "Subtract per time a token was generated")->capture_default_str();
  app.add_option("--seed", seed, "Random seed; the same seed gives the same text (0 or -1: a fresh one)")
      ->check(CLI::Range(int64_t(-1), std::numeric_limits<int64_t>::max()));
  if (text) app.add_option("--stop", options.stop, "Stop before this text (repeatable)");
  app.add_flag("--ignore-eos", options.ignore_eos, "Do not stop at the end-of-sequence token");
}

CompletionOptions GenerationFlags::resolve() const {
  CompletionOptions resolved = options;
  if (greedy) resolved.sampling.temperature = 0;
  resolved.sampling.seed = seed > 0 ? uint64_t(seed) : 0;
  if (resolved.max_new_tokens == 0) fail("--max-new-tokens must be at least 1");
  for (const std::string& stop : resolved.stop)
    if (stop.empty()) fail("--stop: a stop string must not be empty");
  generate_options(resolved).sampling.validate();
  return resolved;
}

CompletionOptions GenerationFlags::with_recommended(CompletionOptions resolved,
                                                   const SamplingOptions& recommended) const {
  SamplingOptions& s = resolved.sampling;
  if (!greedy && !temperature_flag->count()) s.temperature = recommended.temperature;
  if (!top_k_flag->count()) s.top_k = recommended.top_k;
  if (!top_p_flag->count()) s.top_p = recommended.top_p;
  if (!repeat_flag->count()) s.repetition_penalty = recommended.repetition_penalty;
  return resolved;
}

void ChatFlags::add_to(CLI::App& app) {
  app.add_option("--system", system, "System message that starts the conversation");
  app.add_option("--thinking", thinking, "Tell the chat template enable_thinking (e.g. Qwen3): on or off")
      ->check(CLI::IsMember({"on", "off"}));
}

std::vector<ChatMessage> ChatFlags::first_messages() const {
  if (system.empty()) return {};
  return {{"system", system}};
}

std::string ChatFlags::template_variables() const {
  nlohmann::json vars = nlohmann::json::object();
  if (!thinking.empty()) vars["enable_thinking"] = thinking == "on";
  return vars.dump();
}

Completion stream_answer(Engine& engine, std::span<const int32_t> prompt, const CompletionOptions& options) {
  install_interrupt_handler();
  Answering answering_now;
  auto print = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  Completion answer = engine.complete(prompt, options, print, &cancel_answer);
  std::printf("\n");
  std::fflush(stdout);  // before the statistics line on stderr
  return answer;
}

void print_stats(const Completion& c) {
  const CompletionStats& s = c.stats;
  std::fprintf(stderr,
               "[%zu prompt tokens (%zu computed), %zu generated | first token %.0f ms | prefill %.1f tok/s | "
               "decode %.1f tok/s | finish: %s | seed %llu]\n",
               s.prompt_tokens, s.prompt_tokens - s.cached_tokens, s.generated_tokens, s.time_to_first_token * 1000,
               s.prefill_tokens_per_second, s.decode_tokens_per_second,
               std::string(stop_reason_name(c.stop_reason)).c_str(), (unsigned long long)c.seed);
}

}  // namespace gerbil::cli
