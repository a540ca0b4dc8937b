// The output parser: reasoning, content and each family's tool calls, from whole texts and from streams
// split at every byte position (which must give the same message), malformed calls kept as content.
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "generate/output_parser.h"
#include "gerbil/error.h"
#include "tokenizer/tokenizer.h"
#include "support/paths.h"

namespace gerbil {
namespace {

using nlohmann::json;

OutputParserOptions options(ToolCallFormat format, bool reasoning = false, bool opened = false) {
  OutputParserOptions result;
  result.tool_format = format;
  result.reasoning = reasoning;
  result.thinking_opened = opened;
  result.call_id_seed = 42;
  return result;
}

// The message streamed in two pieces split at every position, and in single bytes, must be the whole
// text's message; returns the latter.
MessageParts parse_everywhere(std::string_view text, const OutputParserOptions& opts) {
  MessageParts whole = parse_output(text, opts);
  auto check = [&](const MessageParts& streamed, const std::string& how) {
    EXPECT_EQ(streamed.reasoning_content, whole.reasoning_content) << how;
    EXPECT_EQ(streamed.content, whole.content) << how;
    EXPECT_EQ(streamed.tool_calls.size(), whole.tool_calls.size()) << how;
    for (size_t i = 0; i < std::min(streamed.tool_calls.size(), whole.tool_calls.size()); ++i) {
      EXPECT_EQ(streamed.tool_calls[i].name, whole.tool_calls[i].name) << how;
      EXPECT_EQ(streamed.tool_calls[i].arguments, whole.tool_calls[i].arguments) << how;
      EXPECT_EQ(streamed.tool_calls[i].id, whole.tool_calls[i].id) << how;
      EXPECT_EQ(streamed.tool_calls[i].index, i) << how;
    }
    // The streamed pieces: each call opens once, first, with its id and name, and its arguments add up.
    std::vector<ToolCall> pieced;
    for (const ToolCallDelta& piece : streamed.call_deltas) {
      if (piece.opens) {
        EXPECT_EQ(piece.index, pieced.size()) << how;
        pieced.push_back({piece.index, piece.id, piece.name, ""});
      }
      ASSERT_LT(piece.index, pieced.size()) << how << ": arguments before the call's opening";
      pieced[piece.index].arguments += piece.arguments;
    }
    ASSERT_EQ(pieced.size(), whole.tool_calls.size()) << how;
    for (size_t i = 0; i < pieced.size(); ++i) {
      EXPECT_EQ(pieced[i].id, whole.tool_calls[i].id) << how;
      EXPECT_EQ(pieced[i].name, whole.tool_calls[i].name) << how;
      EXPECT_EQ(pieced[i].arguments, whole.tool_calls[i].arguments) << how;
    }
  };
  for (size_t split = 0; split <= text.size(); ++split) {
    OutputParser parser(opts);
    MessageParts joined;
    for (const MessageParts& part : {parser.feed(text.substr(0, split)), parser.feed(text.substr(split)),
                                     parser.finish()}) {
      joined.reasoning_content += part.reasoning_content;
      joined.content += part.content;
      joined.tool_calls.insert(joined.tool_calls.end(), part.tool_calls.begin(), part.tool_calls.end());
      joined.call_deltas.insert(joined.call_deltas.end(), part.call_deltas.begin(), part.call_deltas.end());
    }
    check(joined, "split at " + std::to_string(split));
  }
  OutputParser bytewise(opts);
  MessageParts bytes;
  for (size_t i = 0; i <= text.size(); ++i) {
    MessageParts part = i < text.size() ? bytewise.feed(text.substr(i, 1)) : bytewise.finish();
    bytes.call_deltas.insert(bytes.call_deltas.end(), part.call_deltas.begin(), part.call_deltas.end());
  }
  bytes.reasoning_content = bytewise.message().reasoning_content;
  bytes.content = bytewise.message().content;
  bytes.tool_calls = bytewise.message().tool_calls;
  check(bytes, "byte by byte");
  return whole;
}

TEST(OutputParser, APlainMessageKeepsItsLeadingWhitespaceAndAMarkerDropsIt) {
  // A token-level answer starts with a space as often as not: it is content, as the tokens' text is.
  EXPECT_EQ(parse_everywhere(" merit\n", options(ToolCallFormat::Hermes, true)).content, " merit\n");
  MessageParts marked = parse_everywhere("\n <think>a</think> b", options(ToolCallFormat::Hermes, true));
  EXPECT_EQ(marked.reasoning_content, "a");
  EXPECT_EQ(marked.content, "b");
  EXPECT_EQ(parse_everywhere("  \n", options(ToolCallFormat::Hermes, true)).content, "  \n");
  MessageParts llama = parse_everywhere("\n{\"name\": \"f\", \"parameters\": {}}", options(ToolCallFormat::Llama3Json));
  ASSERT_EQ(llama.tool_calls.size(), 1u);
  EXPECT_EQ(llama.content, "");
}

TEST(OutputParser, QwenReasoningContentAndSeveralToolCalls) {
  std::string text =
      "<think>\nThe user wants the weather in two cities.\n</think>\n\nLet me check.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}\n</tool_call>";
  MessageParts message = parse_everywhere(text, options(ToolCallFormat::Hermes, true));
  EXPECT_EQ(message.reasoning_content, "The user wants the weather in two cities.");
  EXPECT_EQ(message.content, "Let me check.\n");
  ASSERT_EQ(message.tool_calls.size(), 2u);
  EXPECT_EQ(message.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(message.tool_calls[0].arguments), json::parse(R"({"city": "Paris", "unit": "c"})"));
  EXPECT_EQ(json::parse(message.tool_calls[1].arguments), json::parse(R"({"city": "Tokyo"})"));
  EXPECT_TRUE(message.tool_calls[0].id.starts_with("call_"));
  EXPECT_EQ(message.tool_calls[0].id.size(), 29u);
  EXPECT_NE(message.tool_calls[0].id, message.tool_calls[1].id);
}

TEST(OutputParser, ThinkingOpenedByThePromptAndEmptyThinking) {
  MessageParts opened = parse_everywhere("Hmm, 2+2.\n</think>\n\n4", options(ToolCallFormat::None, true, true));
  EXPECT_EQ(opened.reasoning_content, "Hmm, 2+2.");
  EXPECT_EQ(opened.content, "4");
  MessageParts empty = parse_everywhere("<think>\n\n</think>\n\nThe answer is 4.", options(ToolCallFormat::Hermes, true));
  EXPECT_EQ(empty.reasoning_content, "");
  EXPECT_EQ(empty.content, "The answer is 4.");
  MessageParts unfinished = parse_everywhere("<think>\nstill thinking  ", options(ToolCallFormat::None, true));
  EXPECT_EQ(unfinished.reasoning_content, "still thinking");
  EXPECT_EQ(unfinished.content, "");
  // Without the reasoning option, <think> is content like any text.
  EXPECT_EQ(parse_output("<think>x</think>y", options(ToolCallFormat::None)).content, "<think>x</think>y");
  EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
}

TEST(OutputParser, HoldsBackOnlyWhatMayBeginAMarker) {
  OutputParser parser(options(ToolCallFormat::Hermes, true));
  EXPECT_EQ(parser.feed("Hello <to").content, "Hello ");
  EXPECT_EQ(parser.feed("y> and <").content, "<toy> and ");
  EXPECT_EQ(parser.feed("b>").content, "<b>");
  EXPECT_EQ(parser.finish().content, "");
}

TEST(OutputParser, MalformedToolCallsStayContent) {
  std::string broken = "<tool_call>\n{\"name\" \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  MessageParts message = parse_everywhere("Try: " + broken, options(ToolCallFormat::Hermes));
  EXPECT_EQ(message.content, "Try: " + broken);
  EXPECT_TRUE(message.tool_calls.empty());
  // A call whose name is written out streams from there on: what the model then writes as its arguments is
  // what the client was sent, broken or not (as OpenAI's and vLLM's streams do).
  MessageParts sent = parse_everywhere("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>",
                                       options(ToolCallFormat::Hermes));
  ASSERT_EQ(sent.tool_calls.size(), 1u);
  EXPECT_EQ(sent.tool_calls[0].arguments, "{\"a\": }");
  EXPECT_EQ(sent.content, "");
  MessageParts nameless = parse_everywhere("<tool_call>{\"arguments\": {}}</tool_call>", options(ToolCallFormat::Hermes));
  EXPECT_EQ(nameless.content, "<tool_call>{\"arguments\": {}}</tool_call>");
  MessageParts unterminated = parse_everywhere("<tool_call>\n{\"name\": \"f\", \"argu", options(ToolCallFormat::Hermes));
  EXPECT_EQ(unterminated.content, "<tool_call>\n{\"name\": \"f\", \"argu");
  // Stopped right before </tool_call> with the JSON whole: still a call.
  MessageParts stopped = parse_everywhere("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n",
                                          options(ToolCallFormat::Hermes));
  ASSERT_EQ(stopped.tool_calls.size(), 1u);
  EXPECT_EQ(stopped.tool_calls[0].arguments, R"({"x": 1})");  // as written
  MessageParts mistral = parse_everywhere("[TOOL_CALLS][{\"name\" \"f\", \"arguments\": {\"a\": 1}}]", options(ToolCallFormat::Mistral));
  EXPECT_EQ(mistral.content, "[TOOL_CALLS][{\"name\" \"f\", \"arguments\": {\"a\": 1}}]");
  EXPECT_TRUE(mistral.tool_calls.empty());
  // Stopped inside the list, after a call's arguments: that call was sent.
  MessageParts stopped_list = parse_everywhere("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}", options(ToolCallFormat::Mistral));
  ASSERT_EQ(stopped_list.tool_calls.size(), 1u);
  EXPECT_EQ(stopped_list.tool_calls[0].arguments, R"({"a": 1})");
  EXPECT_EQ(stopped_list.content, "");
  MessageParts llama = parse_everywhere("{\"name\": \"f\", \"parameters\": [1, ", options(ToolCallFormat::Llama3Json));
  EXPECT_EQ(llama.content, "{\"name\": \"f\", \"parameters\": [1, ");
}

// parallel_tool_calls false: the message ends with its first call, in every format.
TEST(OutputParser, OneCallAllowedEndsTheMessageThere) {
  OutputParserOptions one = options(ToolCallFormat::Hermes, true);
  one.max_tool_calls = 1;
  MessageParts hermes = parse_everywhere(
      "<think>two</think>Checking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>\nDone.", one);
  EXPECT_EQ(hermes.reasoning_content, "two");
  EXPECT_EQ(hermes.content, "Checking.\n");
  ASSERT_EQ(hermes.tool_calls.size(), 1u);
  EXPECT_EQ(hermes.tool_calls[0].name, "f");
  OutputParserOptions mistral = options(ToolCallFormat::Mistral);
  mistral.max_tool_calls = 1;
  MessageParts array = parse_everywhere(
      "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {}}]", mistral);
  ASSERT_EQ(array.tool_calls.size(), 1u);
  EXPECT_EQ(array.tool_calls[0].name, "f");
  EXPECT_EQ(array.content, "");
  // Allowed any number, both calls come.
  EXPECT_EQ(parse_everywhere("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {}}]",
                             options(ToolCallFormat::Mistral)).tool_calls.size(), 2u);
}

TEST(OutputParser, AQwenCallStreamsItsArgumentsAsTheyAreWritten) {
  OutputParser parser(options(ToolCallFormat::Hermes, true));
  EXPECT_EQ(parser.feed("Sure.\n<tool_call>\n{\"name\": \"get_wea").content, "Sure.\n");
  MessageParts opened = parser.feed("ther\", \"arguments\": {\"ci");
  ASSERT_EQ(opened.call_deltas.size(), 1u);  // the opening and the first piece, as one
  EXPECT_TRUE(opened.call_deltas[0].opens);
  EXPECT_EQ(opened.call_deltas[0].name, "get_weather");
  EXPECT_TRUE(opened.call_deltas[0].id.starts_with("call_"));
  EXPECT_EQ(opened.call_deltas[0].arguments, "{\"ci");
  EXPECT_TRUE(opened.tool_calls.empty());  // not complete yet
  MessageParts piece = parser.feed("ty\": \"Pa}{\\\"ris\"}");
  ASSERT_EQ(piece.call_deltas.size(), 1u);
  EXPECT_FALSE(piece.call_deltas[0].opens);
  EXPECT_EQ(piece.call_deltas[0].arguments, "ty\": \"Pa}{\\\"ris\"}");  // braces in a string are text
  MessageParts closed = parser.feed("}\n</tool");  // the call's object closes: no more arguments, the call is whole
  EXPECT_TRUE(closed.call_deltas.empty());
  ASSERT_EQ(closed.tool_calls.size(), 1u);
  EXPECT_EQ(closed.tool_calls[0].arguments, "{\"city\": \"Pa}{\\\"ris\"}");
  EXPECT_EQ(json::parse(closed.tool_calls[0].arguments)["city"], "Pa}{\"ris");
  EXPECT_TRUE(parser.feed("_call>").empty());  // the block's frame
}

// Found by fuzz_output_parser: arguments whose string never closes run into </tool_call>, which must end them there
// even when it arrives in pieces (the pieces sent before it completes were once more than the call's text).
TEST(OutputParser, AnUnclosedArgumentStringEndsAtTheCallsClose) {
  MessageParts message = parse_everywhere(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"x}\n</tool_call>after", options(ToolCallFormat::Hermes));
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.tool_calls[0].arguments, "{\"a\": \"x}\n");
  EXPECT_EQ(message.content, "after");
  // Cut right inside the marker, the held-back piece goes to the arguments at the end.
  MessageParts cut = parse_everywhere("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"x</tool", options(ToolCallFormat::Hermes));
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(cut.tool_calls[0].arguments, "{\"a\": \"x</tool");
}

TEST(OutputParser, Llama3JsonMessage) {
  MessageParts message = parse_everywhere(
      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", options(ToolCallFormat::Llama3Json));
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.tool_calls[0].name, "get_weather");
  EXPECT_EQ(message.tool_calls[0].arguments, R"({"city": "Oslo"})");  // as written
  EXPECT_EQ(message.content, "");
  MessageParts tagged = parse_everywhere("<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}",
                                         options(ToolCallFormat::Llama3Json));
  ASSERT_EQ(tagged.tool_calls.size(), 1u);
  EXPECT_EQ(tagged.tool_calls[0].name, "search");
  // A JSON answer that is not a call is content, as is text that merely mentions braces.
  MessageParts answer = parse_everywhere("{\"answer\": 42}", options(ToolCallFormat::Llama3Json));
  EXPECT_EQ(answer.content, "{\"answer\": 42}");
  EXPECT_TRUE(answer.tool_calls.empty());
  MessageParts person = parse_everywhere("{\"name\": \"Ann\", \"age\": 42}", options(ToolCallFormat::Llama3Json));
  EXPECT_EQ(person.content, "{\"name\": \"Ann\", \"age\": 42}");
  EXPECT_TRUE(person.tool_calls.empty());
  MessageParts prose = parse_everywhere("Use {\"name\": \"f\"} like this.", options(ToolCallFormat::Llama3Json));
  EXPECT_EQ(prose.content, "Use {\"name\": \"f\"} like this.");
  EXPECT_TRUE(prose.tool_calls.empty());
}

TEST(OutputParser, MistralBothForms) {
  MessageParts listed = parse_everywhere(
      "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, {\"name\": \"neg\", \"arguments\": "
      "{\"x\": 3}}]",
      options(ToolCallFormat::Mistral));
  ASSERT_EQ(listed.tool_calls.size(), 2u);
  EXPECT_EQ(listed.tool_calls[0].name, "add");
  EXPECT_EQ(listed.tool_calls[0].arguments, R"({"a": 1, "b": 2})");
  EXPECT_EQ(listed.tool_calls[1].name, "neg");
  EXPECT_EQ(listed.tool_calls[0].id.size(), 9u);  // Mistral's template checks for 9 characters
  MessageParts named = parse_everywhere("Sure.[TOOL_CALLS]add[ARGS]{\"a\": 1}[TOOL_CALLS]neg[ARGS]{\"x\": 3}",
                                        options(ToolCallFormat::Mistral));
  EXPECT_EQ(named.content, "Sure.");
  ASSERT_EQ(named.tool_calls.size(), 2u);
  EXPECT_EQ(named.tool_calls[0].name, "add");
  EXPECT_EQ(named.tool_calls[1].arguments, R"({"x": 3})");
  // Arguments that are not an object are parsed when the list ends.
  MessageParts scalar = parse_everywhere("[TOOL_CALLS]now[ARGS]\"utc\"", options(ToolCallFormat::Mistral));
  ASSERT_EQ(scalar.tool_calls.size(), 1u);
  EXPECT_EQ(scalar.tool_calls[0].arguments, R"("utc")");
}

// Llama 3's and Mistral's calls stream like Qwen's: the opening once the name is written, the arguments as they
// come, each call whole once its text closes; what the model writes after the list is content.
TEST(OutputParser, Llama3AndMistralCallsStreamAsTheyAreWritten) {
  struct Case {
    ToolCallFormat format;
    std::vector<std::string> pieces;  // the second opens the first call, the third and fourth stream its arguments
    std::string after;                // what follows the calls
  };
  for (const Case& c : {Case{ToolCallFormat::Llama3Json,
                             {"{\"name\": \"get_", "weather\", \"parameters\": {\"ci", "ty\": \"Os", "lo\"}", "}"}, ""},
                        Case{ToolCallFormat::Llama3Json,
                             {"<|python_tag|>{\"name\": \"get_", "weather\", \"parameters\": {", "\"city\": ", "\"Oslo\"}", "}"},
                             ""},
                        Case{ToolCallFormat::Mistral,
                             {"[TOOL_CALLS][{\"name\": \"get_", "weather\", \"arguments\": {\"ci", "ty\": \"Os", "lo\"}",
                              "}, {\"name\": \"now\", \"arguments\": {}}]"},
                             " Done."},
                        Case{ToolCallFormat::Mistral,
                             {"[TOOL_CALLS]get_", "weather[ARGS]{\"ci", "ty\": \"Os", "lo\"}", "[TOOL_CALLS]now[ARGS]{}"},
                             ""}}) {
    SCOPED_TRACE(c.pieces[0]);
    OutputParser parser(options(c.format));
    EXPECT_TRUE(parser.feed(c.pieces[0]).empty());
    MessageParts opened = parser.feed(c.pieces[1]);
    ASSERT_EQ(opened.call_deltas.size(), 1u);
    EXPECT_TRUE(opened.call_deltas[0].opens);
    EXPECT_EQ(opened.call_deltas[0].name, "get_weather");
    MessageParts piece = parser.feed(c.pieces[2]);
    ASSERT_EQ(piece.call_deltas.size(), 1u);
    EXPECT_FALSE(piece.call_deltas[0].opens);
    EXPECT_EQ(piece.call_deltas[0].arguments, c.pieces[2]);
    EXPECT_TRUE(piece.tool_calls.empty());
    parser.feed(c.pieces[3]);
    parser.feed(c.pieces[4] + c.after);
    MessageParts end = parser.finish();
    const MessageParts& message = parser.message();
    ASSERT_GE(message.tool_calls.size(), 1u);
    EXPECT_EQ(message.tool_calls[0].arguments, R"({"city": "Oslo"})");
    EXPECT_EQ(message.tool_calls.size(), c.format == ToolCallFormat::Mistral ? 2u : 1u);
    EXPECT_EQ(message.content, c.after.empty() ? "" : "Done.");
    parse_everywhere(c.pieces[0] + c.pieces[1] + c.pieces[2] + c.pieces[3] + c.pieces[4] + c.after, options(c.format));
  }
}

TEST(OutputParser, ArgumentsWrittenAsAString) {
  MessageParts message = parse_everywhere(
      "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", options(ToolCallFormat::Hermes));
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.tool_calls[0].arguments, R"({"a": 1})");
}

TEST(OutputParser, DetectsTheFormatFromTheChatTemplate) {
  EXPECT_EQ(detect_tool_call_format("{{- '<tool_call>\\n' }}"), ToolCallFormat::Hermes);
  EXPECT_EQ(detect_tool_call_format("{{- '[TOOL_CALLS]' }}"), ToolCallFormat::Mistral);
  EXPECT_EQ(detect_tool_call_format("{%- if message.role == 'ipython' %}"), ToolCallFormat::Llama3Json);
  EXPECT_EQ(detect_tool_call_format("{{ '<|python_tag|>' }}"), ToolCallFormat::Llama3Json);
  EXPECT_EQ(detect_tool_call_format("{{ messages }}"), ToolCallFormat::None);
  for (const char* name : {"qwen3", "llama3", "gemma3"}) {
    std::filesystem::path config = test::tokenizer_dir(name) / "tokenizer_config.json";
    if (!std::filesystem::exists(config)) GTEST_SKIP() << "missing " << config << " (run scripts/setup.sh)";
    json parsed = json::parse(test::read_text(config));
    std::string chat_template = parsed.value("chat_template", "");
    ToolCallFormat expected = std::string(name) == "qwen3" ? ToolCallFormat::Hermes : ToolCallFormat::None;
    if (std::string(name) == "llama3" && chat_template.find("ipython") != std::string::npos)
      expected = ToolCallFormat::Llama3Json;
    EXPECT_EQ(detect_tool_call_format(chat_template), expected) << name;
  }
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
    "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
])");

// Random allowed ids under the constraint until it ends; returns the text.
std::string random_walk(TokenConstraint& constraint, const Tokenizer& tokenizer, int32_t eos, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<int32_t> ids;
  std::vector<uint8_t> allowed(tokenizer.vocab_size());
  for (int step = 0; step < 3000; ++step) {
    std::fill(allowed.begin(), allowed.end(), 1);
    constraint.mask(allowed);
    std::vector<int32_t> pool, closing;
    for (size_t id = 0; id < allowed.size(); ++id) {
      if (!allowed[id]) continue;
      pool.push_back(static_cast<int32_t>(id));
      if (tokenizer.is_added(static_cast<int32_t>(id)) ||
          tokenizer.token_bytes(static_cast<int32_t>(id)).find_first_of("\"}],:") != std::string::npos)
        closing.push_back(static_cast<int32_t>(id));
    }
    if (pool.empty()) {
      ADD_FAILURE() << "nothing allowed";
      break;
    }
    const std::vector<int32_t>& from = closing.empty() || random() % 2 ? pool : closing;
    int32_t id = from[random() % from.size()];
    constraint.accept(id);
    if (id == eos) {
      EXPECT_TRUE(constraint.complete());
      return tokenizer.decode(ids);
    }
    ids.push_back(id);
  }
  ADD_FAILURE() << "the walk did not end";
  return tokenizer.decode(ids);
}

// A prompt that opened the reasoning: the answer reasons freely (never ending there), and the schema holds from
// </think> on, whether the model writes it as Qwen3's one token or in pieces; the parsed message's content is
// the JSON answer and its reasoning what came before.
TEST(AfterReasoning, TheSchemaHoldsFromTheReasoningsEnd) {
  GERBIL_REQUIRE_PATH(test::tokenizer_dir("qwen3"), "run scripts/setup.sh to fetch the tokenizer files");
  Tokenizer tokenizer = Tokenizer::load(test::tokenizer_dir("qwen3"));
  int32_t eos = *tokenizer.token_id("<|im_end|>");
  int32_t close = *tokenizer.token_id("</think>");
  json schema = kTools[0]["function"]["parameters"];
  auto grammar = JsonGrammar::from_schema(schema, "response_format");
  auto pieces = [&](std::initializer_list<std::string_view> texts) {
    std::vector<int32_t> ids;
    for (std::string_view text : texts) {
      std::vector<int32_t> piece = tokenizer.encode(text);
      ids.insert(ids.end(), piece.begin(), piece.end());
    }
    return ids;
  };
  std::vector<std::vector<int32_t>> closings = {{close}, pieces({"</", "think", ">"}), pieces({"</thi", "nk>"})};
  for (uint32_t seed = 1; seed <= closings.size(); ++seed) {
    auto constraint = after_reasoning(make_json_constraint(grammar, TokenTrie::of(tokenizer), {eos}), tokenizer, {eos});
    std::vector<int32_t> reasoning = tokenizer.encode("A city and days, so {\"city\": ... <");
    reasoning.insert(reasoning.end(), closings[seed - 1].begin(), closings[seed - 1].end());
    std::vector<uint8_t> allowed(tokenizer.vocab_size() + 7);  // a padded vocabulary
    // The same mask as bits for the GPU (mask_bits): the inner constraint's from </think> on.
    auto expect_same_bits = [&] {
      std::vector<uint32_t> bits((allowed.size() + 31) / 32, 0);
      for (size_t i = 0; i < allowed.size(); ++i) bits[i / 32] |= uint32_t{1} << (i % 32);
      constraint->mask_bits(bits, allowed.size());
      for (size_t i = 0; i < allowed.size(); ++i) ASSERT_EQ(bits[i / 32] >> (i % 32) & 1, allowed[i]) << "id " << i;
    };
    for (int32_t id : reasoning) {
      std::fill(allowed.begin(), allowed.end(), 1);
      constraint->mask(allowed);
      expect_same_bits();
      EXPECT_EQ(std::count(allowed.begin(), allowed.end(), 0), 1) << "only the end of sequence is ruled out";
      EXPECT_EQ(allowed[eos], 0);
      EXPECT_FALSE(constraint->complete());
      constraint->accept(id);
    }
    std::fill(allowed.begin(), allowed.end(), 1);
    constraint->mask(allowed);
    expect_same_bits();
    EXPECT_EQ(allowed[*tokenizer.token_id("{")], 1);
    EXPECT_EQ(allowed[*tokenizer.token_id("Hello")], 0) << "the schema holds after </think>";
    std::string text = tokenizer.decode(reasoning) + random_walk(*constraint, tokenizer, eos, seed);
    MessageParts message = parse_output(text, options(ToolCallFormat::Hermes, true, true));
    EXPECT_EQ(message.reasoning_content, "A city and days, so {\"city\": ... <") << text;
    json answer = json::parse(message.content);
    EXPECT_TRUE(answer["city"].is_string()) << text;
    EXPECT_TRUE(answer["days"].is_number_integer()) << text;
  }
}

}  // namespace
}  // namespace gerbil
