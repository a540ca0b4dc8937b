// The server's request parser: every field it takes lands in the request, and every bad input is a 400
// naming the field (the fuzz target fuzz/fuzz_http_request.cpp feeds it arbitrary bytes).
#include <gtest/gtest.h>

#include "server/answer.h"
#include "server/openai.h"
#include "server/request.h"

namespace gerbil::server {
namespace {

ApiError refusal(std::string_view body, Endpoint endpoint = Endpoint::Chat) {
  try {
    parse_completion_request(body, endpoint);
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

TEST(ServerRequest, ChatFieldsLandInTheRequest) {
  CompletionRequest r = parse_completion_request(R"({
    "model": "m", "messages": [{"role": "system", "content": "s"},
                               {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
    "max_completion_tokens": 7, "max_tokens": 99, "temperature": 0.5, "top_p": 0.9, "top_k": -1, "min_p": 0.1,
    "presence_penalty": 1, "frequency_penalty": -1, "repetition_penalty": 1.2, "seed": -3, "stop": "END",
    "stream": true, "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 4, "n": 1,
    "chat_template_kwargs": {"enable_thinking": false},
    "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer"}}}})",
                                                 Endpoint::Chat);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_EQ(r.max_tokens, 7u);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(*r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*r.top_p, 0.9f);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_FLOAT_EQ(*r.min_p, 0.1f);
  EXPECT_FLOAT_EQ(*r.repetition_penalty, 1.2f);
  EXPECT_EQ(r.seed, uint64_t(int64_t(-3)));
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.stream && r.include_usage && r.logprobs);
  EXPECT_EQ(r.top_logprobs, 4u);
  EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r.response_format.kind, ResponseFormat::Kind::JsonSchema);
  EXPECT_EQ(r.response_format.schema, nlohmann::json({{"type", "integer"}}));
}

TEST(ServerRequest, ToolCallArgumentsBecomeJsonForTheTemplate) {
  CompletionRequest r = parse_completion_request(R"({"messages": [
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "f", "arguments": "{\"x\": [1, 2]}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "done"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "f"}}})",
                                                 Endpoint::Chat);
  EXPECT_EQ(r.messages[0]["tool_calls"][0]["function"]["arguments"], nlohmann::ordered_json::parse(R"({"x": [1, 2]})"));
  EXPECT_EQ(r.tool_choice.kind, ToolChoice::Kind::Named);
  EXPECT_EQ(r.tool_choice.name, "f");
  EXPECT_EQ(answer_schema(r), nlohmann::json({{"type", "object"}}));
}

TEST(ServerRequest, CompletionPrompts) {
  EXPECT_EQ(parse_completion_request(R"({"prompt": "hi"})", Endpoint::Completion).prompt, "hi");
  EXPECT_EQ(parse_completion_request(R"({"prompt": ["hi"]})", Endpoint::Completion).prompt, "hi");
  EXPECT_EQ(parse_completion_request(R"({"prompt": [5, 6]})", Endpoint::Completion).prompt_ids,
            (std::vector<int32_t>{5, 6}));
  CompletionRequest r = parse_completion_request(R"({"prompt": "x", "logprobs": 2})", Endpoint::Completion);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2u);
}

TEST(ServerRequest, LogitBiasAndTheDefaultsOfUnsupportedFields) {
  CompletionRequest r = parse_completion_request(
      R"({"prompt": "x", "logit_bias": {"7": -100, "12": 2.5}, "echo": false, "best_of": 1})", Endpoint::Completion);
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, float>>{{7, -100.0f}, {12, 2.5f}}));
}

TEST(ServerRequest, BadInputNamesTheField) {
  struct Case {
    const char* body;
    Endpoint endpoint;
    const char* param;
    const char* words;
  };
  const Case cases[] = {
      {R"([1])", Endpoint::Chat, "", "JSON object"},
      {R"({"messages": [)", Endpoint::Chat, "", "not valid JSON"},
      {R"({})", Endpoint::Chat, "messages", "missing"},
      {R"({"messages": []})", Endpoint::Chat, "messages", "empty"},
      {R"({"messages": [{"role": "bot", "content": "x"}]})", Endpoint::Chat, "messages[0].role", "bot"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", Endpoint::Chat,
       "messages[0].content[0].type", "image_url"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", Endpoint::Chat, "temperature",
       "number"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})", Endpoint::Chat, "temperature",
       "between 0 and 2"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 3})", Endpoint::Chat, "n", "must be 1"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5})", Endpoint::Chat, "max_tokens",
       "integer"},
      {R"({"messages": [{"role": "user", "content": "x"}], "seed": "1"})", Endpoint::Chat, "seed", "integer"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})", Endpoint::Chat, "stop[0]", "string"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", Endpoint::Chat, "top_logprobs",
       "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", Endpoint::Chat,
       "tool_choice", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}})", Endpoint::Chat,
       "response_format.type", "yaml"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]})",
       Endpoint::Chat, "messages[0].tool_calls[0].function.arguments", "JSON"},
      {R"({"prompt": ["a", "b"]})", Endpoint::Completion, "prompt", "one prompt"},
      {R"({"prompt": [1, -2]})", Endpoint::Completion, "prompt", "token id"},
      {R"({"prompt": "x", "logprobs": true})", Endpoint::Completion, "logprobs", "integer"},
      {R"({"prompt": "x", "messages": []})", Endpoint::Completion, "messages", "chat"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", Endpoint::Completion, "logit_bias", "not a token id"},
      {R"({"prompt": "x", "logit_bias": {"-5": 1}})", Endpoint::Completion, "logit_bias", "not a token id"},
      {R"({"prompt": "x", "logit_bias": {"7": 101}})", Endpoint::Completion, "logit_bias", "between -100 and 100"},
      {R"({"prompt": "x", "logit_bias": [1]})", Endpoint::Completion, "logit_bias", "object"},
      {R"({"prompt": "x", "echo": true})", Endpoint::Completion, "echo", "not supported"},
      {R"({"prompt": "x", "suffix": "y"})", Endpoint::Completion, "suffix", "not supported"},
      {R"({"prompt": "x", "best_of": 3})", Endpoint::Completion, "best_of", "must be 1"},
      {R"({"messages": [{"role": "user", "content": "x"}], "functions": []})", Endpoint::Chat, "functions", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}},
          {"type": "function", "function": {"name": "g"}}, {"type": "function", "function": {"name": "f"}}]})",
       Endpoint::Chat, "tools[2].function.name", "\"f\" is also tools[0]'s: tool names must differ"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}})",
       Endpoint::Chat, "stream_options", "`stream` is true"},
  };
  for (const Case& c : cases) {
    ApiError error = refusal(c.body, c.endpoint);
    EXPECT_EQ(error.status, 400) << c.body;
    EXPECT_EQ(error.param, c.param) << c.body;
    EXPECT_NE(std::string(error.what()).find(c.words), std::string::npos) << c.body << " -> " << error.what();
  }
}

TEST(ServerResponse, ErrorBodyAndUsage) {
  ordered_json error = error_json(ApiError(429, "busy"));
  EXPECT_EQ(error, ordered_json::parse(
                       R"({"error": {"message": "busy", "type": "rate_limit_error", "param": null, "code": 429}})"));
  GenerationStats stats;
  stats.prompt_tokens = 10;
  stats.prefilled_tokens = 4;
  stats.generated_tokens = 3;
  EXPECT_EQ(usage_json(stats), ordered_json::parse(R"({"prompt_tokens": 10, "completion_tokens": 3,
      "total_tokens": 13, "prompt_tokens_details": {"cached_tokens": 6}})"));
  EXPECT_EQ(finish_reason(FinishReason::ContextFull, false), "length");
  EXPECT_EQ(finish_reason(FinishReason::StopString, false), "stop");
  EXPECT_EQ(finish_reason(FinishReason::EndOfSequence, true), "tool_calls");
}

TEST(ServerResponse, InvalidUtf8IsReplacedNotThrown) {
  // A token can end inside a character; its text must still go out as valid JSON.
  EXPECT_EQ(sse(ordered_json{{"t", std::string("a\xE2\x82")}}), "data: {\"t\":\"a\xEF\xBF\xBD\"}\n\n");
}

}  // namespace
}  // namespace gerbil::server
