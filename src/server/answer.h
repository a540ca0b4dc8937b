// Where the server meets structured output: the token constraint a request's response_format or
// tool_choice asks for, and the split of a model's text into content, reasoning and tool calls.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "generate/constraint.h"
#include "generate/output_parser.h"
#include "server/request.h"
#include "tokenizer/tokenizer.h"

namespace gerbil::server {

// The JSON schema the answer must follow, if any: response_format's, or for a required or named tool call
// the call's (named: the function's parameters; required: {"name", "arguments"} of one of the tools).
std::optional<nlohmann::json> answer_schema(const CompletionRequest& request);

// The constraint for SCHEMA, compiled once for the request; EOS: the ids that may end the answer once the JSON
// is complete. A schema the constraint cannot compile is a 400 naming FIELD and the schema path.
std::unique_ptr<TokenConstraint> json_constraint(const nlohmann::json& schema, const std::string& field,
                                                 const Tokenizer& tokenizer, std::vector<int32_t> eos);
// The request field a request's answer schema comes from, for errors.
std::string answer_schema_field(const CompletionRequest& request);

struct Answer {
  std::string content;
  std::optional<std::string> reasoning;         // a reasoning model's thinking, apart
  nlohmann::ordered_json tool_calls = nullptr;  // OpenAI tool_calls (arguments as JSON strings), or null
};

// How a chat answer's text is split: tool calls in the model family's FORMAT (from its chat template) when the
// request offers tools, a <think> block with REASONING (a thinking model), which THINKING_OPENED says the
// prompt already opened.
struct AnswerSplit {
  ToolCallFormat format = ToolCallFormat::None;
  bool reasoning = false;
  bool thinking_opened = false;
};

// Splits a finished answer. With tool_choice named, the text is the constrained call's arguments; required, the
// call itself; else as SPLIT says, a <think> block becoming reasoning_content only once it is closed (or opened by
// the prompt).
Answer parse_answer(std::string_view text, const CompletionRequest& request, const AnswerSplit& split);

// A streamed chat answer's deltas: the model's text is fed as it comes, and each call returns the OpenAI
// `delta` it completes (reasoning_content, content, and tool_calls as OpenAI streams them: a call's index, id,
// type and name first, then its arguments' text in pieces), or an empty object while the text may still be a
// marker or a call's head being written. Not for a named tool_choice (the text is then the call's arguments).
class AnswerStream {
 public:
  AnswerStream(const CompletionRequest& request, const AnswerSplit& split);
  nlohmann::ordered_json feed(std::string_view text);
  nlohmann::ordered_json finish();
  bool has_tool_calls() const { return !parser_.message().tool_calls.empty(); }

 private:
  OutputParser parser_;
};

// A fresh tool-call id ("call_" and 24 hex digits).
std::string tool_call_id();

// MESSAGES as the chat template of a model writing tool calls in FORMAT takes them. Mistral's templates refuse a
// tool-call id that is not 9 characters long (the ids its model writes): a longer one, as OpenAI's and this
// server's named and required calls are, is cut to its last 9 characters (as vLLM cuts them), in the assistant's
// tool_calls and in the tool results alike, so each result still names its call.
nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages, ToolCallFormat format);

}  // namespace gerbil::server
