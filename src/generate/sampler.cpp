#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "gerbil/error.h"
#include "kernels/model.h"

namespace gerbil {

void SamplingParams::validate() const {
  // Outside these bounds 1 / temperature overflows (a tiny one) or the masked ids' -inf logits, clamped to the
  // lowest float, get weight (a huge one).
  if (temperature != 0 && !(temperature >= kMinTemperature && temperature <= kMaxTemperature))
    fail("sampling: temperature must be 0 (greedy) or in [{}, {}], got {}", kMinTemperature, kMaxTemperature,
         temperature);
  if (!std::isfinite(temperature)) fail("sampling: temperature must be a finite number");
  if (top_k < 0) fail("sampling: top_k must be >= 0 (0 turns it off), got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("sampling: top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("sampling: min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    fail("sampling: repetition_penalty must be a finite number > 0, got {}", repetition_penalty);
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

void Sampler::apply_penalties(std::span<float> logits, const SeenTokens& seen) const {
  if (!params_.penalized()) return;
  std::unordered_map<int32_t, int32_t> generated;  // 0 for a token only the prompt holds
  auto known = [&](int32_t id) { return id >= 0 && size_t(id) < logits.size(); };
  for (int32_t id : seen.prompt)
    if (known(id)) generated.try_emplace(id, 0);
  for (int32_t id : seen.generated)
    if (known(id)) ++generated[id];
  for (auto [id, count] : generated) {
    float& logit = logits[size_t(id)];
    logit = logit > 0 ? logit / params_.repetition_penalty : logit * params_.repetition_penalty;
    if (count > 0) logit -= params_.presence_penalty + params_.frequency_penalty * float(count);
  }
}

namespace {

constexpr float kLargest = std::numeric_limits<float>::max();
// sample.wgsl's BIN_SCALE, ZERO_BIN and ONE: d in bins of 1/96 nat, weight 0 from the last; the best's weight.
constexpr float kBinScale = 96.0f;
constexpr uint32_t kZeroBin = 2047;
constexpr float kOne = 2147483648.0f;

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

__extension__ typedef unsigned __int128 Uint128;  // a GCC / Clang extension (__extension__: no -Wpedantic note)

// floor(a m / 2^24), or (up) its ceiling: sample.wgsl's scale24.
uint64_t scale24(uint64_t a, uint32_t m, bool up) {
  Uint128 product = static_cast<Uint128>(a) * m;
  return uint64_t((product + (up ? (1u << 24) - 1 : 0)) >> 24);
}

}  // namespace

uint32_t Sampler::weight(float v, float best) const {
  float d = (best - v) * inv_temperature_;
  auto bin = uint32_t(std::min(d * kBinScale, float(kZeroBin)));
  return bin == kZeroBin ? 0 : uint32_t(std::exp(-d) * kOne);
}

void Sampler::order_through(size_t count) {
  // Without top-k a vocabulary of 150k would be sorted whole for every token (14 ms on a slow core) although
  // the top-p cut looks at a short prefix: sort chunks of the order, doubling, as they are reached.
  if (count <= ordered_) return;
  size_t end = std::min(candidates_.size(), std::max({count, 2 * ordered_, size_t(256)}));
  auto first = candidates_.begin() + std::ptrdiff_t(ordered_), last = candidates_.begin() + std::ptrdiff_t(end);
  if (end < candidates_.size()) std::nth_element(first, last, candidates_.end(), before);
  std::sort(first, last, before);
  ordered_ = end;
}

int32_t Sampler::sample(std::span<float> all_logits, const SeenTokens& seen, uint32_t position) {
  if (all_logits.empty()) fail("sampling: empty logits");
  std::span<float> logits = all_logits.first(std::min(all_logits.size(), id_count_));  // no padded tail
  apply_penalties(logits, seen);
  if (params_.greedy()) return argmax_skipping_nan(logits);

  // Infinities clamped to the largest finite floats keep every weight finite: +inf is certain, -inf drawn only
  // when every logit is -inf.
  for (float& v : logits)
    if (!std::isnan(v)) v = std::clamp(v, -kLargest, kLargest);
  std::optional<float> best;
  for (float v : logits)
    if (!std::isnan(v) && (!best || v > *best)) best = v;
  if (!best) fail_all_nan();
  // The candidates of weight > 0: those of weight 0 come after them in sampling order and are never drawn.
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i]) && weight(logits[i], *best) > 0) candidates_.emplace_back(logits[i], int32_t(i));
  ordered_ = 0;
  std::optional<std::pair<float, int32_t>> cut;  // the last token top-k and top-p keep, in sampling order
  if (params_.top_k > 0 && size_t(params_.top_k) < candidates_.size()) {
    size_t keep = size_t(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + std::ptrdiff_t(keep), candidates_.end(), before);
    candidates_.resize(keep);
    ordered_ = keep;
    cut = candidates_.back();
  }
  const auto top_p = std::min(uint32_t(params_.top_p * 16777216.0f), 1u << 24);
  if (top_p < 1u << 24) {
    uint64_t total = 0;
    for (const auto& candidate : candidates_) total += weight(candidate.first, *best);
    uint64_t target = scale24(total, top_p, true), cumulative = 0;
    for (size_t c = 0; c < candidates_.size(); ++c) {
      order_through(c + 1);
      if ((cumulative += weight(candidates_[c].first, *best)) >= target) {
        cut = candidates_[c];
        break;
      }
    }
  }
  // The kept tokens, in id order: at or before the cut, and of min-p's weight.
  const uint32_t least = std::max(uint32_t(params_.min_p * kOne), 1u);
  auto kept_weight = [&](size_t i) -> uint32_t {
    if (std::isnan(logits[i])) return 0;
    uint32_t w = weight(logits[i], *best);
    bool inside = !cut || !before(*cut, {logits[i], int32_t(i)});
    return w >= least && inside ? w : 0;
  };
  uint64_t kept = 0;
  for (size_t i = 0; i < logits.size(); ++i) kept += kept_weight(i);
  const auto random = uint32_t(kernels::sample_unit(seed_, position, 0) * 16777216.0);
  const uint64_t mark = scale24(kept, random, false);
  uint64_t through = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    uint32_t w = kept_weight(i);
    if (w > 0 && (through += w) > mark) return int32_t(i);
  }
  return argmax_skipping_nan(logits);  // not reached: mark < kept
}

}  // namespace gerbil
