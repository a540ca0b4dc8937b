#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "gerbil/error.h"
#include "kernels/model.h"

namespace gerbil {

static_assert(kWalkCandidates == kernels::kMaxSampleTopK, "the host walks the candidates the GPU sampler walks");

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
      seed_(params.seed ? params.seed : std::random_device{}() | uint64_t(std::random_device{}()) << 32),
      inv_temperature_(params.greedy() ? 0.0f : 1.0f / params.temperature) {
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

// sample.wgsl's MAX_ROUNDS: the rejection draw's bound, past which the best token is taken.
constexpr uint32_t kRejectionRounds = 256;
constexpr float kLargest = std::numeric_limits<float>::max();

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

int32_t Sampler::sample(std::span<float> all_logits, std::span<const int32_t> history, uint32_t position) {
  if (all_logits.empty()) fail("sampling: empty logits");
  std::span<float> logits = all_logits.first(std::min(all_logits.size(), id_count_));  // no padded tail
  apply_penalties(logits, history);
  if (params_.greedy()) return argmax_skipping_nan(logits);

  // Candidates cut by top-k; [0, ordered_) of them is in sampling order, the rest is ordered on demand.
  // Infinities clamped to the largest finite floats keep every weight finite: +inf is certain, -inf drawn only
  // when every logit is -inf (as the GPU sampler, sample.wgsl, does).
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
  // Probabilities at the given temperature: weights relative to the best logit, over their total (the GPU's
  // arithmetic: a float weight, scaled by the float inverse temperature).
  float best = at(0).first;
  auto weight = [&](size_t i) { return relative_weight(at(i).first, best); };
  double total = 0;
  for (const auto& candidate : candidates_) total += relative_weight(candidate.first, best);

  // top-p: the smallest prefix whose probability reaches top_p; min-p: drop p < min_p * p(best).
  size_t cut = candidates_.size();
  size_t stopped_at = std::numeric_limits<size_t>::max();  // the candidate at which a cut stopped the walk
  double kept_total = total;
  if (params_.top_p < 1.0f || params_.min_p > 0.0f) {
    double cumulative = 0;
    kept_total = 0;
    for (cut = 0; cut < candidates_.size(); ++cut) {
      float w = weight(cut);
      double p = w / total;
      if (cut > 0 && p < params_.min_p * (1.0 / total)) {  // p(best) = 1 / total
        stopped_at = cut;
        break;
      }
      cumulative += p;
      kept_total += w;
      if (cumulative >= params_.top_p) {
        stopped_at = cut++;
        break;
      }
    }
  }
  // As on the GPU: without top-k, a cut that is not among the best kWalkCandidates (or no cut) is drawn by
  // rejection over all tokens.
  if (params_.top_k == 0 && candidates_.size() >= kWalkCandidates && stopped_at >= kWalkCandidates)
    return draw_by_rejection(logits, total, position);
  double r = kernels::sample_unit(seed_, position, 0) * kept_total;  // in [0, kept_total)
  for (size_t i = 0; i < cut; ++i) {
    r -= weight(i);
    if (r <= 0) return at(i).second;
  }
  return at(cut - 1).second;
}

// Round by round: draw j among the tokens before a pivot (at first all), in index order, in proportion to
// their weights; j is kept when the probability of the tokens before it (in sampling order) is below top_p
// and its weight reaches min_p (or it is the best); else j becomes the pivot. See sample.wgsl's draw_all.
int32_t Sampler::draw_by_rejection(std::span<const float> logits, double total, uint32_t position) {
  const float best = candidates_.front().first;
  weights_.assign(logits.size(), 0.0f);  // NaN: never eligible
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) weights_[i] = relative_weight(std::clamp(logits[i], -kLargest, kLargest), best);
  auto value = [&](size_t i) { return std::clamp(logits[i], -kLargest, kLargest); };
  auto precedes = [&](size_t i, size_t j) { return before({value(i), int32_t(i)}, {value(j), int32_t(j)}); };
  std::optional<size_t> pivot;
  auto eligible = [&](size_t i) { return !std::isnan(logits[i]) && (!pivot || precedes(i, *pivot)); };
  for (uint32_t round = 1; round <= kRejectionRounds; ++round) {
    double mass = 0;
    for (size_t i = 0; i < logits.size(); ++i)
      if (eligible(i)) mass += weights_[i];
    double r = kernels::sample_unit(seed_, position, round) * mass;
    size_t j = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!eligible(i)) continue;
      j = i;  // the last eligible one if rounding runs past the end
      if ((r -= weights_[i]) < 0) break;
    }
    double above = 0;  // the weight of the tokens before j in sampling order
    for (size_t i = 0; i < logits.size(); ++i)
      if (!std::isnan(logits[i]) && precedes(i, j)) above += weights_[i];
    bool kept_by_p = params_.top_p >= 1.0f || above / total < params_.top_p;
    bool kept_by_min_p = above == 0 || weights_[j] >= params_.min_p;
    if (kept_by_p && kept_by_min_p) return int32_t(j);
    pivot = j;
  }
  return candidates_.front().second;
}

}  // namespace gerbil
