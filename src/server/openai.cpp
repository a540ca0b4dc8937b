#include "server/openai.h"

namespace gerbil::server {

std::string dump(const ordered_json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse(const ordered_json& json) { return "data: " + dump(json) + "\n\n"; }

// A call cut off by max_tokens or the context is "length", as OpenAI reports it: its arguments may not parse.
std::string finish_reason(FinishReason reason, bool tool_calls) {
  if (reason == FinishReason::MaxTokens || reason == FinishReason::ContextFull) return "length";
  return tool_calls ? "tool_calls" : "stop";
}

ordered_json usage_json(const GenerationStats& stats) {
  return {{"prompt_tokens", stats.prompt_tokens},
          {"completion_tokens", stats.generated_tokens},
          {"total_tokens", stats.prompt_tokens + stats.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", stats.prompt_tokens - stats.prefilled_tokens}}}};
}

ordered_json error_json(const ApiError& error) {
  return {{"error",
           {{"message", error.what()},
            {"type", error.type},
            {"param", error.param.empty() ? ordered_json() : ordered_json(error.param)},
            {"code", error.status}}}};
}

namespace {

// The bytes the token adds to a text (as a JSON string, any invalid UTF-8 is replaced): decoded alone, a token
// would lose its leading space to the text-start rules (SentencePiece's "▁"), and a piece of a character its bytes.
std::string token_text(const Tokenizer& tokenizer, int32_t id) { return tokenizer.token_bytes(id); }

ordered_json bytes_of(const std::string& text) {
  ordered_json bytes = ordered_json::array();
  for (unsigned char c : text) bytes.push_back(int(c));
  return bytes;
}

ordered_json chat_entry(const Tokenizer& tokenizer, const TokenLogprob& token) {
  std::string text = token_text(tokenizer, token.id);
  return {{"token", text}, {"logprob", token.logprob}, {"bytes", bytes_of(text)}};
}

}  // namespace

ordered_json chat_logprobs(const Tokenizer& tokenizer, const std::vector<StepLogprobs>& steps) {
  ordered_json content = ordered_json::array();
  for (const StepLogprobs& step : steps) {
    ordered_json entry = chat_entry(tokenizer, step.chosen);
    entry["top_logprobs"] = ordered_json::array();
    for (const TokenLogprob& top : step.top) entry["top_logprobs"].push_back(chat_entry(tokenizer, top));
    content.push_back(std::move(entry));
  }
  return {{"content", content}};
}

ordered_json completion_logprobs(const Tokenizer& tokenizer, const std::vector<StepLogprobs>& steps,
                                 size_t text_offset) {
  ordered_json tokens = ordered_json::array(), logprobs = ordered_json::array(), tops = ordered_json::array(),
               offsets = ordered_json::array();
  for (const StepLogprobs& step : steps) {
    std::string text = token_text(tokenizer, step.chosen.id);
    tokens.push_back(text);
    logprobs.push_back(step.chosen.logprob);
    ordered_json top = ordered_json::object();
    for (const TokenLogprob& candidate : step.top) top[token_text(tokenizer, candidate.id)] = candidate.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

ordered_json completion_response(const ResponseHead& head, const Answer& answer, const Generation& result,
                                 const ordered_json& logprobs) {
  bool calls = !answer.tool_calls.is_null();
  ordered_json choice = {{"index", 0}};
  if (head.endpoint == Endpoint::Chat) {
    ordered_json message = {{"role", "assistant"},
                            {"content", calls && answer.content.empty() ? ordered_json() : ordered_json(answer.content)}};
    if (answer.reasoning) message["reasoning_content"] = *answer.reasoning;
    if (calls) message["tool_calls"] = answer.tool_calls;
    choice["message"] = std::move(message);
  } else {
    choice["text"] = answer.content;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason(result.finish, calls);
  return {{"id", head.id},
          {"object", head.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion"},
          {"created", head.created},
          {"model", head.model},
          {"choices", ordered_json::array({std::move(choice)})},
          {"usage", usage_json(result.stats)}};
}

ordered_json stream_chunk(const ResponseHead& head, ordered_json delta, const ordered_json& logprobs,
                          const ordered_json& finish_reason, bool include_usage) {
  ordered_json choice = {{"index", 0}};
  if (head.endpoint == Endpoint::Chat) {
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = delta.value("content", "");
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason;
  ordered_json chunk = {{"id", head.id},
                        {"object", head.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", head.created},
                        {"model", head.model},
                        {"choices", ordered_json::array({std::move(choice)})}};
  if (include_usage) chunk["usage"] = nullptr;
  return chunk;
}

ordered_json usage_chunk(const ResponseHead& head, const GenerationStats& stats) {
  return {{"id", head.id},
          {"object", head.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
          {"created", head.created},
          {"model", head.model},
          {"choices", ordered_json::array()},
          {"usage", usage_json(stats)}};
}

}  // namespace gerbil::server
