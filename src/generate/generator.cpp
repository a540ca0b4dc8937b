#include "generate/generator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "gerbil/error.h"
#include "tokenizer/utf8.h"

namespace gerbil {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Streams text while watching for stop strings: text is released only once no stop string can still
// begin inside it.
class StopStringFilter {
 public:
  explicit StopStringFilter(const std::vector<std::string>& stops) : stops_(stops) {
    for (auto& stop : stops_) {
      if (stop.empty()) fail("generate: stop strings must not be empty");
      // A stop string that is not whole characters could cut a character in two.
      tok::check_utf8(stop, "stop string");
    }
  }

  // Adds text; returns the part now safe to release. Sets `stopped` when a stop string appeared.
  std::string add(std::string_view piece, bool& stopped) {
    text_ += piece;
    size_t cut = std::string::npos;
    for (auto& stop : stops_) cut = std::min(cut, text_.find(stop, released_ >= stop.size() ? released_ - stop.size() + 1 : 0));
    if (cut != std::string::npos) {
      stopped = true;
      text_.resize(cut);
      return release(cut);
    }
    return release(text_.size() - held_back());
  }
  std::string flush() { return release(text_.size()); }
  const std::string& text() const { return text_; }

 private:
  // Length of the longest tail of the text that is a proper prefix of a stop string.
  size_t held_back() const {
    size_t hold = 0;
    for (auto& stop : stops_)
      for (size_t n = std::min(stop.size() - 1, text_.size() - released_); n > hold; --n)
        if (text_.compare(text_.size() - n, n, stop, 0, n) == 0) {
          hold = n;
          break;
        }
    return hold;
  }
  std::string release(size_t upto) {
    if (upto <= released_) return {};
    std::string out = text_.substr(released_, upto - released_);
    released_ = upto;
    return out;
  }

  const std::vector<std::string>& stops_;
  std::string text_;
  size_t released_ = 0;
};

}  // namespace

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::EndOfSequence: return "eos";
    case FinishReason::StopString: return "stop_string";
    case FinishReason::MaxTokens: return "max_tokens";
    case FinishReason::ContextFull: return "context_full";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "unknown";
}

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? double(prefilled_tokens) / prefill_seconds : 0;
}

double GenerationStats::decode_tokens_per_second() const {
  // The first token comes out of the prefill; each later one costs a decode step.
  return decode_seconds > 0 && generated_tokens > 1 ? double(generated_tokens - 1) / decode_seconds : 0;
}

Generator::Generator(graph::Model& model, const Tokenizer* tokenizer) : model_(model), tokenizer_(tokenizer) {}

void Generator::reset() {
  cached_.clear();
  model_.reset();
}

// Runs the part of the prompt the cache does not already hold; returns the last position's logits.
std::vector<float> Generator::prefill(std::span<const int32_t> prompt, GenerationStats& stats) {
  size_t common = 0;
  while (common < cached_.size() && common < prompt.size() && cached_[common] == prompt[common]) ++common;
  if (common == prompt.size()) --common;  // at least one token must run to produce logits
  model_.rewind(uint32_t(std::min<size_t>(common, model_.position())));
  cached_.assign(prompt.begin(), prompt.begin() + std::ptrdiff_t(common));
  auto start = Clock::now();
  auto logits = model_.forward(prompt.subspan(common));
  stats.prefill_seconds = seconds_since(start);
  stats.prefilled_tokens = prompt.size() - common;
  cached_.assign(prompt.begin(), prompt.end());
  return logits;
}

Generation Generator::generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                               const TextCallback& on_text, const std::atomic<bool>* cancel) {
  if (prompt.empty()) fail("generate: the prompt is empty");
  if (!tokenizer_ && !options.stop_strings.empty()) fail("generate: stop strings need a tokenizer");
  if (prompt.size() >= model_.context())
    fail("generate: the prompt has {} tokens but the context holds {} (--ctx)", prompt.size(), model_.context());
  std::vector<int32_t> stop_ids = options.stop_ids;
  if (stop_ids.empty())
    for (int64_t id : model_.config().eos_token_ids) stop_ids.push_back(int32_t(id));

  auto start = Clock::now();
  Generation result;
  result.finish = FinishReason::MaxTokens;
  result.stats.prompt_tokens = prompt.size();
  Sampler sampler(options.sampling);
  result.seed = sampler.seed();
  std::optional<StreamDecoder> decoder;
  if (tokenizer_) decoder.emplace(*tokenizer_, /*skip_special_tokens=*/true);
  StopStringFilter filter(options.stop_strings);
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());  // prompt and every sampled id

  // Takes one sampled id; returns whether generation goes on.
  auto accept = [&](int32_t id) {
    if (result.tokens.empty()) result.stats.time_to_first_token = seconds_since(start);
    sequence.push_back(id);
    if (!options.ignore_eos && std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) {
      result.finish = FinishReason::EndOfSequence;
      return false;
    }
    result.tokens.push_back(id);
    if (decoder) {
      bool hit = false;
      std::string piece = filter.add(decoder->step(id), hit);
      result.text += piece;
      if (on_text && !piece.empty() && !on_text(piece, id)) {
        result.finish = FinishReason::Cancelled;
        return false;
      }
      if (hit) {
        result.finish = FinishReason::StopString;
        return false;
      }
    }
    if (cancel && cancel->load()) {
      result.finish = FinishReason::Cancelled;
      return false;
    }
    if (result.tokens.size() >= options.max_new_tokens) {
      result.finish = FinishReason::MaxTokens;
      return false;
    }
    // The newest token is fed at position prompt + tokens - 1: it needs a free cache slot.
    if (prompt.size() + result.tokens.size() > model_.context()) {
      result.finish = FinishReason::ContextFull;
      return false;
    }
    return true;
  };

  std::vector<float> logits = prefill(prompt, result.stats);
  auto decode_start = Clock::now();
  int32_t id = sampler.sample(logits, sequence);
  if (accept(id)) {
    const auto& s = options.sampling;
    // Greedy decoding with penalties is sampling from the best one (top-k 1) after them.
    graph::Model::GpuSampling on_gpu{s.greedy() ? 1.0f : s.temperature,
                                     s.greedy() ? 1u : uint32_t(std::max(s.top_k, 0)),
                                     s.top_p,
                                     s.min_p,
                                     sampler.seed(),
                                     s.repetition_penalty,
                                     s.presence_penalty,
                                     s.frequency_penalty};
    uint32_t steps = options.max_new_tokens - uint32_t(result.tokens.size());
    // The token picked on the GPU, steps queued back to back; `accept` sees each id a few steps later.
    if (s.greedy() && !s.penalized()) {
      model_.decode_greedy(id, steps, accept);
    } else if (model_.sampling_on_gpu(on_gpu)) {
      // The counts of `sequence` (prompt and `id`) are taken before any step runs: `accept` grows it.
      model_.decode_sampled(id, steps, on_gpu, sequence, accept);
    } else {
      bool going = true;
      while (going) {
        logits = model_.forward(std::span(&id, 1));
        id = sampler.sample(logits, sequence);
        going = accept(id);
      }
    }
  }
  cached_.assign(sequence.begin(), sequence.begin() + std::ptrdiff_t(model_.position()));
  if (decoder && result.finish != FinishReason::StopString && result.finish != FinishReason::Cancelled) {
    bool hit = false;
    std::string tail = filter.add(decoder->finish(), hit);
    if (!hit) tail += filter.flush();
    if (hit) result.finish = FinishReason::StopString;
    if (on_text && !tail.empty()) on_text(tail, -1);
    result.text += tail;
  }
  result.stats.generated_tokens = result.tokens.size();
  result.stats.decode_seconds = seconds_since(decode_start);
  return result;
}

}  // namespace gerbil
