#include "generate/generation.h"

namespace gerbil {

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

}  // namespace gerbil
