#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace gerbil::server {

void Histogram::observe(double seconds) {
  auto bound = std::lower_bound(kBounds.begin(), kBounds.end(), seconds);
  if (bound != kBounds.end()) ++buckets_[size_t(bound - kBounds.begin())];
  ++count_;
  sum_ += seconds;
}

std::string Histogram::text(const std::string& name) const {
  std::string out;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return out;
}

void Metrics::request_done(int status) {
  std::lock_guard lock(mutex_);
  ++requests_by_status_[status];
}

void Metrics::generation_done(size_t prompt_tokens, size_t generated_tokens, double time_to_first_token,
                              double seconds_per_token) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt_tokens;
  generated_tokens_ += generated_tokens;
  if (generated_tokens > 0) time_to_first_token_.observe(time_to_first_token);
  if (generated_tokens > 1) time_per_token_.observe(seconds_per_token);
}

std::string Metrics::text(const SchedulerStats& scheduler, bool ready) const {
  std::lock_guard lock(mutex_);
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  metric("gerbil_requests_total", "counter", "HTTP requests answered, by status (not /health, /metrics)");
  for (const auto& [status, count] : requests_by_status_)
    out += fmt::format("gerbil_requests_total{{status=\"{}\"}} {}\n", status, count);
  metric("gerbil_prompt_tokens_total", "counter", "Prompt tokens of finished generations");
  out += fmt::format("gerbil_prompt_tokens_total {}\n", prompt_tokens_);
  metric("gerbil_generation_tokens_total", "counter", "Tokens generated");
  out += fmt::format("gerbil_generation_tokens_total {}\n", generated_tokens_);
  metric("gerbil_queue_length", "gauge", "Requests waiting for a sequence slot");
  out += fmt::format("gerbil_queue_length {}\n", scheduler.queued);
  metric("gerbil_active_sequences", "gauge", "Sequences running in the batch");
  out += fmt::format("gerbil_active_sequences {}\n", scheduler.active);
  metric("gerbil_sequences_cancelled_total", "counter", "Sequences cancelled (client gone, timeout, shutdown)");
  out += fmt::format("gerbil_sequences_cancelled_total {}\n", scheduler.cancelled);
  metric("gerbil_kv_cache_blocks_used", "gauge", "KV-cache blocks held by sequences (running, or kept for reuse)");
  out += fmt::format("gerbil_kv_cache_blocks_used {}\n", scheduler.kv_blocks_used);
  metric("gerbil_kv_cache_blocks_total", "gauge", "KV-cache blocks in the pool");
  out += fmt::format("gerbil_kv_cache_blocks_total {}\n", scheduler.kv_blocks_total);
  metric("gerbil_cached_prompt_tokens_total", "counter", "Prompt tokens taken from the KV cache");
  out += fmt::format("gerbil_cached_prompt_tokens_total {}\n", scheduler.cached_tokens);
  metric("gerbil_host_draws_total", "counter",
         "Tokens drawn on the host from read-back logits (where log-probabilities or logit_bias ask for it); the "
         "others are picked on the GPU");
  out += fmt::format("gerbil_host_draws_total {}\n", scheduler.host_draws);
  metric("gerbil_step_graphs_recorded_total", "counter",
         "Step graphs recorded (one for each new batch shape: a prompt's new length, a new batch composition)");
  out += fmt::format("gerbil_step_graphs_recorded_total {}\n", scheduler.graphs_recorded);
  metric("gerbil_step_graph_seconds_total", "counter", "Seconds the scheduler spent recording step graphs");
  out += fmt::format("gerbil_step_graph_seconds_total {:.6f}\n", scheduler.graph_seconds);
  metric("gerbil_steps_ahead_queued_total", "counter",
         "Batched decode steps queued before the host had read the ids of the step before");
  out += fmt::format("gerbil_steps_ahead_queued_total {}\n", scheduler.steps_ahead_queued);
  metric("gerbil_steps_ahead_taken_total", "counter",
         "Steps queued ahead that the next step took (the others were discarded: the batch changed)");
  out += fmt::format("gerbil_steps_ahead_taken_total {}\n", scheduler.steps_ahead_taken);
  metric("gerbil_ready", "gauge", "1 once the model is loaded");
  out += fmt::format("gerbil_ready {}\n", ready ? 1 : 0);
  metric("gerbil_time_to_first_token_seconds", "histogram", "Seconds from submission to the first token");
  out += time_to_first_token_.text("gerbil_time_to_first_token_seconds");
  metric("gerbil_time_per_output_token_seconds", "histogram", "Mean seconds per generated token after the first");
  out += time_per_token_.text("gerbil_time_per_output_token_seconds");
  return out;
}

}  // namespace gerbil::server
