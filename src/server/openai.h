// OpenAI response bodies: completions, streamed chunks, usage, logprobs and errors, as JSON. Pure
// functions of what the scheduler produced, so their shape is tested without a server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/scheduler.h"
#include "server/answer.h"
#include "server/request.h"
#include "tokenizer/tokenizer.h"

namespace gerbil::server {

using nlohmann::ordered_json;

// Who a response is: its id ("chatcmpl-..." or "cmpl-..."), creation time and model name.
struct ResponseHead {
  std::string id;
  int64_t created = 0;
  std::string model;
  Endpoint endpoint = Endpoint::Chat;
};

// "stop", "length" or "tool_calls" (null while a stream runs).
std::string finish_reason(FinishReason reason, bool tool_calls);

ordered_json usage_json(const GenerationStats& stats);
ordered_json error_json(const ApiError& error);

// Logprobs of ids in the endpoint's format: chat's {"content": [...]} entries, or completions'
// {tokens, token_logprobs, top_logprobs, text_offset} (TEXT_OFFSET: where the first token's text starts).
ordered_json chat_logprobs(const Tokenizer& tokenizer, const std::vector<StepLogprobs>& steps);
ordered_json completion_logprobs(const Tokenizer& tokenizer, const std::vector<StepLogprobs>& steps,
                                 size_t text_offset);

// A whole (not streamed) response.
ordered_json completion_response(const ResponseHead& head, const Answer& answer, const Generation& result,
                                 const ordered_json& logprobs);

// One streamed chunk with one choice: chat's DELTA, or completions' text (DELTA's "content").
ordered_json stream_chunk(const ResponseHead& head, ordered_json delta, const ordered_json& logprobs,
                          const ordered_json& finish_reason, bool include_usage);
// The usage chunk that ends a stream with stream_options.include_usage (no choices).
ordered_json usage_chunk(const ResponseHead& head, const GenerationStats& stats);

// "data: JSON\n\n" (invalid UTF-8 replaced, so a token cut in a character never breaks the stream).
std::string sse(const ordered_json& json);
std::string dump(const ordered_json& json);

}  // namespace gerbil::server
