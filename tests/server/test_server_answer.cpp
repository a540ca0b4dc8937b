// A chat answer split into OpenAI's parts, streamed (AnswerStream's deltas) and whole (parse_answer): reasoning
// and content arrive as soon as they are known, a tool call from its name on, nothing while a marker may still be
// coming, and the deltas joined give the whole answer.
#include <gtest/gtest.h>

#include "generate/json_constraint.h"
#include "server/answer.h"
#include "server/openai.h"
#include "server/request.h"
#include "support/paths.h"
#include "template/chat_template.h"

namespace gerbil::server {
namespace {

using nlohmann::ordered_json;

// A chat request, with one tool when TOOLS, and MORE fields.
CompletionRequest chat(bool tools, std::string_view more = "") {
  std::string body = R"({"messages": [{"role": "user", "content": "hi"}])";
  if (tools) body += R"(, "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
  return parse_completion_request(body + std::string(more) + "}", Endpoint::Chat);
}

// Joins the deltas of PIECES fed one by one (plus finish()) into one message, as a client does (a tool call's
// pieces by their index: the first with its id, type and name, the others adding to its arguments), and returns
// each feed's delta.
struct Streamed {
  std::vector<ordered_json> deltas;
  std::string reasoning, content;
  ordered_json tool_calls = ordered_json::array();
};

Streamed stream(const CompletionRequest& request, const AnswerSplit& split, const std::vector<std::string>& pieces) {
  AnswerStream answer(request, split);
  Streamed out;
  auto take = [&](const ordered_json& delta) {
    out.deltas.push_back(delta);
    if (delta.contains("reasoning_content")) out.reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) out.content += delta["content"].get<std::string>();
    if (!delta.contains("tool_calls")) return;
    for (const auto& piece : delta["tool_calls"]) {
      size_t index = piece["index"];
      if (index == out.tool_calls.size()) {
        ASSERT_TRUE(piece.contains("id")) << "a call's first piece names it: " << piece.dump();
        out.tool_calls.push_back(piece);
      } else {
        ASSERT_LT(index, out.tool_calls.size()) << piece.dump();
        EXPECT_FALSE(piece.contains("id")) << "a call is opened once: " << piece.dump();
        std::string arguments = out.tool_calls[index]["function"]["arguments"];
        out.tool_calls[index]["function"]["arguments"] = arguments + piece["function"]["arguments"].get<std::string>();
      }
    }
  };
  for (const std::string& piece : pieces) take(answer.feed(piece));
  take(answer.finish());
  return out;
}

TEST(AnswerStream, ReasoningThenContentArriveAsTheyAreWritten) {
  AnswerSplit split{ToolCallFormat::Hermes, /*reasoning=*/true, /*thinking_opened=*/false};
  Streamed s = stream(chat(false), split, {"<thi", "nk>\nLet me", " see.", "\n</th", "ink>\n\nHello", " there"});
  EXPECT_EQ(s.deltas[0], ordered_json::object());  // "<thi" may begin <think>
  EXPECT_EQ(s.deltas[1], (ordered_json{{"reasoning_content", "Let me"}}));
  EXPECT_EQ(s.deltas[2], (ordered_json{{"reasoning_content", " see."}}));
  EXPECT_EQ(s.deltas[4], (ordered_json{{"content", "Hello"}}));
  EXPECT_EQ(s.reasoning, "Let me see.");
  EXPECT_EQ(s.content, "Hello there");
  Answer whole = parse_answer("<think>\nLet me see.\n</think>\n\nHello there", chat(false), split);
  EXPECT_EQ(whole.reasoning, s.reasoning);
  EXPECT_EQ(whole.content, s.content);
}

TEST(AnswerStream, APromptThatOpenedThinkingStartsInTheReasoning) {
  AnswerSplit split{ToolCallFormat::None, true, /*thinking_opened=*/true};
  Streamed s = stream(chat(false), split, {"hmm", "</think>", "ok"});
  EXPECT_EQ(s.deltas[0], (ordered_json{{"reasoning_content", "hmm"}}));
  EXPECT_EQ(s.content, "ok");
  // Without a thinking model the same text is all content.
  Streamed plain = stream(chat(false), {ToolCallFormat::None, false, true}, {"hmm", "</think>", "ok"});
  EXPECT_EQ(plain.content, "hmm</think>ok");
  EXPECT_EQ(plain.reasoning, "");
}

TEST(ParseAnswer, ParallelToolCallsFalseKeepsTheFirstCall) {
  std::string two = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
                    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
  AnswerSplit split{ToolCallFormat::Hermes, true, false};
  CompletionRequest request = chat(true);
  EXPECT_EQ(parse_answer(two, request, split).tool_calls.size(), 2u);
  request.parallel_tool_calls = false;
  Answer one = parse_answer(two, request, split);
  ASSERT_EQ(one.tool_calls.size(), 1u);
  EXPECT_EQ(one.tool_calls[0]["function"]["arguments"], R"({"city": "Oslo"})");
  Streamed streamed = stream(request, split, {two.substr(0, 40), two.substr(40, 60), two.substr(100)});
  ASSERT_EQ(streamed.tool_calls.size(), 1u);
  EXPECT_EQ(streamed.tool_calls[0]["function"]["arguments"], R"({"city": "Oslo"})");
  EXPECT_EQ(streamed.content, "");
}

TEST(AnswerStream, AToolCallStreamsFromItsNameOn) {
  AnswerSplit split{ToolCallFormat::Hermes, false, false};
  Streamed s = stream(chat(true), split,
                      {"Checking.", "\n<tool_", "call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Os",
                       "lo\"}}", "\n</tool_call>", "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"});
  EXPECT_EQ(s.deltas[0], (ordered_json{{"content", "Checking."}}));
  EXPECT_EQ(s.deltas[1], (ordered_json{{"content", "\n"}}));  // "<tool_" is held: it may begin <tool_call>
  EXPECT_EQ(s.deltas[2], ordered_json::object());              // the name may not be whole yet
  // The call opens as soon as its arguments start, and they follow piece by piece.
  ASSERT_TRUE(s.deltas[3].contains("tool_calls"));
  EXPECT_EQ(s.deltas[3]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Os");
  EXPECT_EQ(s.deltas[4], (ordered_json{{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "lo\"}"}}}}}}}));
  EXPECT_EQ(s.deltas[5], ordered_json::object());  // the frame after the arguments
  ASSERT_EQ(s.tool_calls.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ordered_json& call = s.tool_calls[i];
    EXPECT_EQ(call["index"], i);
    EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
  }
  EXPECT_EQ(ordered_json::parse(s.tool_calls[0]["function"]["arguments"].get<std::string>()),
            (ordered_json{{"city", "Oslo"}}));
  EXPECT_EQ(s.tool_calls[1]["function"]["arguments"], "{}");
  EXPECT_NE(s.tool_calls[0]["id"], s.tool_calls[1]["id"]);
  Answer whole = parse_answer("Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"
                              "\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
                              chat(true), split);
  EXPECT_EQ(whole.content, s.content);
  ASSERT_EQ(whole.tool_calls.size(), 2u);
  EXPECT_FALSE(whole.tool_calls[0].contains("index"));  // only stream deltas carry an index
  EXPECT_EQ(whole.tool_calls[0]["function"]["arguments"], s.tool_calls[0]["function"]["arguments"]);
}

// tool_choice required: the text is the call's JSON (whatever the model's own format), and streams the same way.
TEST(AnswerStream, ARequiredCallStreamsFromItsNameOn) {
  CompletionRequest request = chat(true, R"(, "tool_choice": "required")");
  AnswerSplit split{ToolCallFormat::Hermes, true, false};
  Streamed s = stream(request, split, {"{\"name\": \"get_weather\", \"argu", "ments\": {\"city\": \"Os", "lo\"}}"});
  EXPECT_EQ(s.deltas[0], ordered_json::object());
  ASSERT_TRUE(s.deltas[1].contains("tool_calls"));
  EXPECT_EQ(s.deltas[1]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(s.deltas[1]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Os");
  EXPECT_EQ(s.deltas[2], (ordered_json{{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "lo\"}"}}}}}}}));
  ASSERT_EQ(s.tool_calls.size(), 1u);
  EXPECT_EQ(s.content, "");
  Answer whole = parse_answer("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}", request, split);
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(whole.tool_calls[0]["function"]["arguments"], s.tool_calls[0]["function"]["arguments"]);
  EXPECT_EQ(whole.content, "");
}

// tool_choice required among several tools: the call's arguments follow the schema of the tool it names.
TEST(AnswerSchema, ARequiredCallTakesTheArgumentsOfTheToolItNames) {
  CompletionRequest request = parse_completion_request(R"({"messages": [{"role": "user", "content": "hi"}],
    "tool_choice": "required", "tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}]})",
                                                       Endpoint::Chat);
  auto grammar = JsonGrammar::from_schema(*answer_schema(request), answer_schema_field(request));
  auto matches = [&](std::string_view text) {
    JsonMatcher matcher(grammar);
    return matcher.feed(text) && matcher.complete();
  };
  EXPECT_TRUE(matches(R"({"name": "get_weather", "arguments": {"city": "Oslo"}})"));
  EXPECT_TRUE(matches(R"({"name": "add", "arguments": {"a": 1, "b": 2}})"));
  EXPECT_TRUE(matches(R"({"arguments": {"b": 2, "a": 1}, "name": "add"})"));
  EXPECT_FALSE(matches(R"({"name": "add", "arguments": {"city": "Oslo"}})"));
  EXPECT_FALSE(matches(R"({"name": "get_weather", "arguments": {"a": 1, "b": 2}})"));
  EXPECT_FALSE(matches(R"({"arguments": {"a": 1, "b": 2}, "name": "get_weather"})"));
  EXPECT_FALSE(matches(R"({"name": "subtract", "arguments": {}})"));
  // A tool whose parameters do not say what they are (empty, annotations only) takes an object, not any value.
  for (const char* parameters : {"{}", R"({"$schema": "https://json-schema.org/draft/2020-12/schema"})"}) {
    CompletionRequest empty = parse_completion_request(
        std::string(R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required", "tools": [)") +
            R"({"type": "function", "function": {"name": "now", "parameters": )" + parameters + "}}]}",
        Endpoint::Chat);
    JsonMatcher any_object(JsonGrammar::from_schema(*answer_schema(empty), answer_schema_field(empty)));
    EXPECT_TRUE(JsonMatcher(any_object).feed(R"({"name": "now", "arguments": {"x": 1}})")) << parameters;
    EXPECT_FALSE(any_object.feed(R"({"name": "now", "arguments": 3)")) << parameters;
  }
}

// Mistral's templates (this one holds Mistral-7B-Instruct-v0.3's id checks) refuse ids that are not 9 characters
// long; a conversation that sends back OpenAI-style ids renders with their last 9, the call and its result alike.
TEST(TemplateMessages, MistralTakesNineCharacterToolCallIds) {
  ChatTemplate mistral(
      "{%- for message in messages %}"
      "{%- if message.role == 'assistant' and message.tool_calls is defined %}[TOOL_CALLS]"
      "{%- for call in message.tool_calls %}"
      "{%- if call.id is not defined or call.id|length != 9 %}"
      "{{- raise_exception('Tool call IDs should be alphanumeric strings with length 9!') }}{%- endif %}"
      "{{- call.function.name }} {{ call.id }};{%- endfor %}"
      "{%- elif message.role == 'tool' %}"
      "{%- if message.tool_call_id is not defined or message.tool_call_id|length != 9 %}"
      "{{- raise_exception('Tool call IDs should be alphanumeric strings with length 9!') }}{%- endif %}"
      "[TOOL_RESULTS]{{ message.tool_call_id }}: {{ message.content }}"
      "{%- else %}{{ message.content }}{%- endif %}{%- endfor %}");
  ordered_json messages = ordered_json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0123456789abcdefABCDEFGH", "type": "function",
     "function": {"name": "get_weather", "arguments": "{}"}}, {"id": "a1B2c3D4e", "type": "function",
     "function": {"name": "now", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_0123456789abcdefABCDEFGH", "content": "sunny"}])");
  EXPECT_THROW(mistral.render(messages, true), Error);
  EXPECT_EQ(mistral.render(template_messages(messages, ToolCallFormat::Mistral), true),
            "Weather?[TOOL_CALLS]get_weather fABCDEFGH;now a1B2c3D4e;[TOOL_RESULTS]fABCDEFGH: sunny");
  // Other families keep their ids as sent.
  EXPECT_EQ(template_messages(messages, ToolCallFormat::Hermes), messages);
}

TEST(AnswerStream, WithoutToolsACallMarkerIsContent) {
  Streamed s = stream(chat(false), {ToolCallFormat::Hermes, false, false}, {"<tool_call>{\"name\": \"x\"}</tool_call>"});
  EXPECT_EQ(s.content, "<tool_call>{\"name\": \"x\"}</tool_call>");
  EXPECT_TRUE(s.tool_calls.empty());
}

TEST(AnswerStream, AnUnclosedThinkBlockIsReasoningStreamedButContentWhole) {
  // Streamed, the reasoning went out as it came; a whole answer cut inside <think> is returned as written.
  AnswerSplit split{ToolCallFormat::None, true, false};
  Streamed s = stream(chat(false), split, {"<think>\nstill", " going"});
  EXPECT_EQ(s.reasoning, "still going");
  Answer whole = parse_answer("<think>\nstill going", chat(false), split);
  EXPECT_EQ(whole.content, "<think>\nstill going");
  EXPECT_FALSE(whole.reasoning.has_value());
}

// Each log-probability entry carries its token's own bytes: a token keeps its leading space (SentencePiece's
// "▁", which decoding a token alone drops at the start of a text), and the byte tokens of a character split
// over several join into its UTF-8.
TEST(Logprobs, EntriesCarryTheTokensOwnBytes) {
  GERBIL_REQUIRE_PATH(test::tokenizer_dir("llama2"), "run scripts/setup.sh to fetch the tokenizer files");
  Tokenizer tokenizer = Tokenizer::load(test::tokenizer_dir("llama2"));
  const std::string text = "a \U0001F600 cat";
  std::vector<StepLogprobs> steps;
  for (int32_t id : tokenizer.encode(text, /*add_special_tokens=*/false)) steps.push_back({{id, -1.0f}, {}});
  std::string joined;
  ordered_json chat = chat_logprobs(tokenizer, steps);
  for (const auto& entry : chat["content"])
    for (int byte : entry["bytes"]) joined.push_back(char(byte));
  EXPECT_EQ(joined, " " + text);  // the text's own leading "▁" too
  ordered_json completion = completion_logprobs(tokenizer, steps, 0);
  EXPECT_EQ(completion["tokens"].back(), " cat");
}

}  // namespace
}  // namespace gerbil::server
