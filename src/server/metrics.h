// The server's Prometheus metrics (GET /metrics, text format 0.0.4): requests by status, prompt and
// generated tokens, time to first token and per-token latency histograms; the queue length and active
// sequences come from the scheduler when scraped. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "generate/scheduler.h"

namespace gerbil::server {

class Histogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                     0.1,   0.25,   0.5,   1.0,  2.5,   10.0};
  void observe(double seconds);
  // NAME's _bucket, _sum and _count lines.
  std::string text(const std::string& name) const;

 private:
  std::array<uint64_t, kBounds.size()> buckets_{};  // counts per bound (not cumulative)
  uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics {
 public:
  void request_done(int status);
  // A finished generation: its token counts, time to first token and mean time per later token.
  void generation_done(size_t prompt_tokens, size_t generated_tokens, double time_to_first_token,
                       double seconds_per_token);
  std::string text(const SchedulerStats& scheduler, bool ready) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> requests_by_status_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  Histogram time_to_first_token_, time_per_token_;
};

}  // namespace gerbil::server
