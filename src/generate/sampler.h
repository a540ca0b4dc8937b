// Picks the next token from a row of logits: greedy, or temperature / top-k / top-p / min-p sampling,
// after repetition, presence and frequency penalties over the tokens seen so far. Seeded: the same
// seed, logits and history give the same token. NaN logits are never drawn; a row of nothing but NaN is an
// error. A padded vocabulary (Qwen2.5: 151,936 logits for 151,665 tokenizer ids) gives the sampler the
// tokenizer's id count, and the padded tail is never drawn, whatever its logits.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace gerbil {

struct SamplingParams {
  float temperature = 1.0f;  // <= 0: greedy (argmax)
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off; keeps tokens with p >= min_p * p(best)
  float repetition_penalty = 1.0f;  // Hugging Face style: divides positive logits of seen tokens, multiplies negative
  float presence_penalty = 0.0f;    // OpenAI style: subtracted once from the logit of every seen token
  float frequency_penalty = 0.0f;   // OpenAI style: subtracted per occurrence
  uint64_t seed = 0;                // 0: a fresh random seed

  bool greedy() const { return temperature <= 0.0f; }
  bool penalized() const { return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f; }
  void validate() const;  // throws gerbil::Error naming the bad parameter
};

class Sampler {
 public:
  // Ids at or above ID_COUNT (the tokenizer's vocabulary size) are never drawn, in every mode.
  explicit Sampler(const SamplingParams& params, size_t id_count = std::numeric_limits<size_t>::max());

  // `logits` is scratch: it is modified. `history` is every token so far (prompt and generated).
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);
  uint64_t seed() const { return seed_; }

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> history) const;
  // Puts candidates_[0, count) in sampling order (they and more may already be).
  void order_through(size_t count);

  SamplingParams params_;
  size_t id_count_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // (logit, id), reused between calls
  size_t ordered_ = 0;                                   // candidates_[0, ordered_) is in sampling order
};

}  // namespace gerbil
