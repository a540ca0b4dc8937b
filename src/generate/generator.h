// The single-sequence client of the scheduler: prefill the prompt, then sample and decode one token at a time
// until the model's end-of-sequence token, a stop string, the token budget or the context limit — each
// reported as a finish reason. Text is streamed as it becomes final. The KV cache is reused across calls for
// the longest common prefix of the previous conversation, so a chat's next turn only prefills what is new.
#pragma once

#include <atomic>
#include <span>

#include "generate/generation.h"
#include "generate/scheduler.h"

namespace gerbil {

class Generator {
 public:
  // `tokenizer` may be null: then no text is produced (ids only) and stop strings are not allowed.
  Generator(graph::Model& model, const Tokenizer* tokenizer) : scheduler_(model, tokenizer) {}

  Generation generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                      const TextCallback& on_text = {}, const std::atomic<bool>* cancel = nullptr) {
    SequenceRequest request;
    request.prompt.assign(prompt.begin(), prompt.end());
    request.options = options;
    return scheduler_.run(std::move(request), on_text, cancel);
  }

  // Forgets the cached conversation (the next call prefills everything).
  void reset() { scheduler_.forget_cache(); }

 private:
  Scheduler scheduler_;
};

}  // namespace gerbil
