#include "generate/sampler.h"

#include <algorithm>
#include <cmath>

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

Sampler::Sampler(const SamplingParams& params)
    : params_(params), seed_(params.seed ? params.seed : std::random_device{}() | uint64_t(std::random_device{}()) << 32),
      rng_(seed_) {
  params_.validate();
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) const {
  bool repetition = params_.repetition_penalty != 1.0f;
  bool additive = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (!repetition && !additive) return;
  std::unordered_map<int32_t, int32_t> counts;
  for (int32_t id : history)
    if (id >= 0 && size_t(id) < logits.size()) ++counts[id];
  for (auto [id, count] : counts) {
    float& logit = logits[size_t(id)];
    if (repetition) logit = logit > 0 ? logit / params_.repetition_penalty : logit * params_.repetition_penalty;
    logit -= params_.presence_penalty + params_.frequency_penalty * float(count);
  }
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  if (logits.empty()) fail("sampling: empty logits");
  apply_penalties(logits, history);
  if (params_.greedy())  // lowest index on ties, like torch.argmax
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());

  // Candidates sorted by logit, cut by top-k, turned into probabilities at the given temperature.
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) candidates_.emplace_back(logits[i], int32_t(i));
  if (candidates_.empty()) fail("sampling: every logit is NaN");
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && size_t(params_.top_k) < keep) {
    keep = size_t(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + std::ptrdiff_t(keep), candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);
  float best = candidates_.front().first;
  double total = 0;
  for (auto& [value, id] : candidates_) {
    value = std::exp((value - best) / params_.temperature);
    total += value;
  }
  // top-p: the smallest prefix whose probability reaches top_p; min-p: drop p < min_p * p(best).
  double cumulative = 0, kept_total = 0;
  size_t cut = 0;
  for (; cut < candidates_.size(); ++cut) {
    double p = candidates_[cut].first / total;
    if (cut > 0 && p < params_.min_p * (candidates_.front().first / total)) break;
    cumulative += p;
    kept_total += candidates_[cut].first;
    if (cumulative >= params_.top_p) {
      ++cut;
      break;
    }
  }
  std::uniform_real_distribution<double> uniform(0.0, kept_total);
  double r = uniform(rng_);
  for (size_t i = 0; i < cut; ++i) {
    r -= candidates_[i].first;
    if (r <= 0) return candidates_[i].second;
  }
  return candidates_[cut - 1].second;
}

}  // namespace gerbil
