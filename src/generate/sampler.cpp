#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "gerbil/error.h"

namespace gerbil {

void SamplingParams::validate() const {
  if (!std::isfinite(temperature)) fail("sampling: temperature must be a finite number");
  if (top_k < 0) fail("sampling: top_k must be >= 0 (0 turns it off), got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("sampling: top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("sampling: min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.0f)) fail("sampling: repetition_penalty must be > 0, got {}", repetition_penalty);
  if (!std::isfinite(presence_penalty) || !std::isfinite(frequency_penalty))
    fail("sampling: presence and frequency penalties must be finite");
}

Sampler::Sampler(const SamplingParams& params, size_t id_count)
    : params_(params), id_count_(id_count),
      seed_(params.seed ? params.seed : std::random_device{}() | uint64_t(std::random_device{}()) << 32), rng_(seed_) {
  params_.validate();
  if (id_count_ == 0) fail("sampling: the vocabulary to draw from is empty (id count 0)");
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) const {
  if (!params_.penalized()) return;
  bool repetition = params_.repetition_penalty != 1.0f;
  std::unordered_map<int32_t, int32_t> counts;
  for (int32_t id : history)
    if (id >= 0 && size_t(id) < logits.size()) ++counts[id];
  for (auto [id, count] : counts) {
    float& logit = logits[size_t(id)];
    if (repetition) logit = logit > 0 ? logit / params_.repetition_penalty : logit * params_.repetition_penalty;
    logit -= params_.presence_penalty + params_.frequency_penalty * float(count);
  }
}

namespace {

// The wording of the GPU path's error (graph/model.cpp), so that both paths fail alike.
[[noreturn]] void fail_all_nan() {
  fail("sampling: every logit is NaN (NaN in the model's weights or activations)");
}

// The first maximum of the non-NaN logits (lowest index on ties, like torch.argmax over a NaN-free row).
int32_t argmax_skipping_nan(std::span<const float> logits) {
  std::optional<size_t> best;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i]) && (!best || logits[i] > logits[*best])) best = i;
  if (!best) fail_all_nan();
  return int32_t(*best);
}

// Candidates in sampling order: higher logit first, lower id first among equal logits. A lambda, not a
// function, so that the sorts inline it (through a function pointer they ran 1.5x slower).
constexpr auto before = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
};

}  // namespace

void Sampler::order_through(size_t count) {
  // Without top-k a vocabulary of 150k would be sorted whole for every token (14 ms on a slow core) although
  // the top-p cut and the draw look at a short prefix: sort chunks of the order, doubling, as they are reached.
  if (count <= ordered_) return;
  size_t end = std::min(candidates_.size(), std::max({count, 2 * ordered_, size_t(256)}));
  auto first = candidates_.begin() + std::ptrdiff_t(ordered_), last = candidates_.begin() + std::ptrdiff_t(end);
  if (end < candidates_.size()) std::nth_element(first, last, candidates_.end(), before);
  std::sort(first, last, before);
  ordered_ = end;
}

int32_t Sampler::sample(std::span<float> all_logits, std::span<const int32_t> history) {
  if (all_logits.empty()) fail("sampling: empty logits");
  std::span<float> logits = all_logits.first(std::min(all_logits.size(), id_count_));  // no padded tail
  apply_penalties(logits, history);
  if (params_.greedy()) return argmax_skipping_nan(logits);

  // Candidates cut by top-k; [0, ordered_) of them is in sampling order, the rest is ordered on demand.
  // Infinities clamped to the largest finite floats keep every weight finite: +inf is certain, -inf drawn only
  // when every logit is -inf (as the GPU sampler, sample.wgsl, does).
  constexpr float kLargest = std::numeric_limits<float>::max();
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) candidates_.emplace_back(std::clamp(logits[i], -kLargest, kLargest), int32_t(i));
  if (candidates_.empty()) fail_all_nan();
  ordered_ = 0;
  if (params_.top_k > 0 && size_t(params_.top_k) < candidates_.size()) {
    size_t keep = size_t(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + std::ptrdiff_t(keep), candidates_.end(), before);
    candidates_.resize(keep);
    ordered_ = keep;
  }
  auto at = [&](size_t i) -> const std::pair<float, int32_t>& {
    order_through(i + 1);
    return candidates_[i];
  };
  // Probabilities at the given temperature: weights relative to the best logit, over their total.
  float best = at(0).first;
  auto weight = [&](size_t i) { return std::exp((at(i).first - best) / params_.temperature); };
  double total = 0;
  for (const auto& candidate : candidates_) total += std::exp((candidate.first - best) / params_.temperature);

  // top-p: the smallest prefix whose probability reaches top_p; min-p: drop p < min_p * p(best).
  size_t cut = candidates_.size();
  double kept_total = total;
  if (params_.top_p < 1.0f || params_.min_p > 0.0f) {
    double cumulative = 0;
    kept_total = 0;
    for (cut = 0; cut < candidates_.size(); ++cut) {
      float w = weight(cut);
      double p = w / total;
      if (cut > 0 && p < params_.min_p * (1.0 / total)) break;  // p(best) = 1 / total
      cumulative += p;
      kept_total += w;
      if (cumulative >= params_.top_p) {
        ++cut;
        break;
      }
    }
  }
  std::uniform_real_distribution<double> uniform(0.0, kept_total);
  double r = uniform(rng_);
  for (size_t i = 0; i < cut; ++i) {
    r -= weight(i);
    if (r <= 0) return at(i).second;
  }
  return at(cut - 1).second;
}

}  // namespace gerbil
