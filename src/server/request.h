// The OpenAI request bodies the server takes (POST /v1/chat/completions, /v1/completions, /tokenize,
// /detokenize), parsed strictly into plain structs: every wrong type, bad value or unsupported option is an
// ApiError naming the field. Parsing is a pure function of the body, so it is fuzzed (fuzz/fuzz_http_request).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gerbil/error.h"

namespace gerbil::server {

// An error answered as OpenAI's {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError : Error {
  ApiError(int status, std::string message, std::string param = {}, std::string type = {});
  int status;
  std::string param;  // the request field at fault, or empty
  std::string type;   // invalid_request_error, authentication_error, ...
};

enum class Endpoint { Chat, Completion };

// response_format: text (none), a JSON object, or JSON that validates against a schema.
struct ResponseFormat {
  enum class Kind { Text, JsonObject, JsonSchema } kind = Kind::Text;
  nlohmann::json schema;  // for JsonSchema
};

// tool_choice: whether and which tool the model must call.
struct ToolChoice {
  enum class Kind { Auto, None, Required, Named } kind = Kind::Auto;
  std::string name;  // for Named
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Chat;
  std::string model;
  nlohmann::ordered_json messages;   // chat: the messages, checked to render in a chat template
  std::string prompt;                // completion: text ...
  std::vector<int32_t> prompt_ids;   // ... or token ids
  std::optional<uint32_t> max_tokens;
  std::optional<float> temperature, top_p, min_p, presence_penalty, frequency_penalty, repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool logprobs = false;
  uint32_t top_logprobs = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id, bias in [-100, 100]
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  ResponseFormat response_format;
  nlohmann::ordered_json tools;       // chat: the tools, as given (null when none)
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;    // false: at most one tool call
};

// Parses the body of a completion request for ENDPOINT. Throws ApiError (400) naming the field.
CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint);

struct TokenizeRequest {
  std::string content;
  bool add_special = false;
};
struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};
TokenizeRequest parse_tokenize_request(std::string_view body);
DetokenizeRequest parse_detokenize_request(std::string_view body);

}  // namespace gerbil::server
