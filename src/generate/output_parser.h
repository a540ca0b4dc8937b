// Turns a chat model's output into OpenAI's message parts: `reasoning_content` (Qwen3's <think>...</think>),
// `content`, and `tool_calls` in the format of the model's family, both for a finished text and
// incrementally while streaming (only text that may be the start of a marker, or a tool call still being
// written, is held back).
//
//   OutputParser parser({.tool_format = detect_tool_call_format(chat_template), .reasoning = true});
//   for (...) send(parser.feed(piece));
//   send(parser.finish());
//
// The markers must reach the parser as text: decode with skip_special_tokens = false where they are special
// tokens (Mistral's [TOOL_CALLS], Llama 3's <|python_tag|>); Qwen's <think> and <tool_call> are not special.
// A tool call whose JSON does not parse, or that lacks a name, is returned as content, as written.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "generate/constraint.h"
#include "generate/json_constraint.h"

namespace gerbil {

enum class ToolCallFormat {
  None,
  Hermes,      // Qwen: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, possibly several
  Llama3Json,  // Llama 3: the whole message is {"name": ..., "parameters": {...}}, maybe after <|python_tag|>
  Mistral,     // [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] or [TOOL_CALLS]name[ARGS]{...}...
};

// The format a chat template's tool calls take, from the markers its text holds; None when it has none.
ToolCallFormat detect_tool_call_format(std::string_view chat_template);
// Whether a rendered prompt leaves the model inside a <think> block (the template opened it).
bool prompt_opens_thinking(std::string_view prompt);

struct ToolCall {
  size_t index = 0;      // its position among the message's tool calls
  std::string id;        // "call_" and 24 letters or digits; 9 letters or digits for Mistral, as its template wants
  std::string name;
  std::string arguments;  // JSON text
};

// A piece of a tool call as it streams (OpenAI's streamed tool_calls): the call's opening, with its id and name,
// or the next piece of its arguments' JSON text. A call's pieces' arguments add up to its ToolCall::arguments.
struct ToolCallDelta {
  size_t index = 0;
  bool opens = false;     // the first piece: id and name are set
  std::string id;
  std::string name;
  std::string arguments;  // the next piece of the arguments' text
};

// A message, or what a step added to one.
struct MessageParts {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;         // calls completed
  std::vector<ToolCallDelta> call_deltas;   // what streams of the calls, as soon as it is sure
  bool empty() const {
    return reasoning_content.empty() && content.empty() && tool_calls.empty() && call_deltas.empty();
  }
};

struct OutputParserOptions {
  ToolCallFormat tool_format = ToolCallFormat::None;  // None: tool calls are left in the content
  bool reasoning = false;         // split out <think>...</think>
  bool thinking_opened = false;   // the prompt opened <think>: the output starts inside the reasoning
  uint64_t call_id_seed = 0;      // tool-call ids come from this seed; 0: a random one
  // The message ends with its last allowed call; what the model writes after it is dropped (OpenAI's
  // parallel_tool_calls false: 1).
  size_t max_tool_calls = SIZE_MAX;
};

class OutputParser {
 public:
  explicit OutputParser(const OutputParserOptions& options);

  // Takes the next piece of output; returns the parts it completes.
  MessageParts feed(std::string_view text);
  // Ends the output: returns what was held back, a pending tool call parsed (or given back as content).
  MessageParts finish();
  // Everything returned so far.
  const MessageParts& message() const { return message_; }

 private:
  enum class Mode { Content, Reasoning, HermesCall, HoldAll };
  void process(MessageParts& out);
  bool process_content(MessageParts& out);  // whether it changed mode
  bool process_reasoning(MessageParts& out);
  bool process_hermes_call(MessageParts& out);
  // Streams the Hermes call being written in pending_'s first BODY bytes: its opening once its name is known,
  // then its arguments as they come. A call not written {"name": ..., "arguments": {...}} waits for its end.
  void stream_hermes_call(MessageParts& out, size_t body);
  // Ends the Hermes call written in BODY, whose text ended with CLOSE (</tool_call>, or nothing where the model
  // stopped first): the call streamed, else BODY parsed whole, else BODY given back as content, as written.
  void end_hermes_call(MessageParts& out, std::string_view body, std::string_view close);
  void emit_call_delta(MessageParts& out, ToolCallDelta delta);
  void add_call(MessageParts& out, ToolCall call);
  bool skip_section_whitespace();  // false while only whitespace has come
  // At the message's start: false while it may still begin with a marker (or Llama 3's call, then held whole).
  bool hold_message_start();
  void emit_content(MessageParts& out, std::string_view text);
  void emit_reasoning(MessageParts& out, std::string_view text);
  // Adds the tool calls written in TEXT; false (and nothing added) when TEXT is not tool calls.
  bool add_calls(MessageParts& out, std::string_view text);
  std::string next_id();

  OutputParserOptions options_;
  Mode mode_ = Mode::Content;
  std::string pending_;          // text not classified yet
  std::string marker_;           // what started HoldAll ("[TOOL_CALLS]", or "" for Llama 3's whole message)
  bool at_section_start_ = true;  // leading whitespace of a section is dropped
  bool message_started_ = false;  // content or a marker was seen (Llama 3's JSON must be the whole message)
  // The Hermes call streaming now: its opening went out; its arguments start at pending_[arguments_begin].
  struct StreamedCall {
    ToolCall call;  // arguments: what was sent
    size_t arguments_begin = 0;
  };
  std::optional<StreamedCall> streamed_;
  bool unstreamable_ = false;  // the call being written is not in the streamable form
  bool ended_ = false;         // the last allowed tool call is in: what follows is dropped
  uint64_t random_state_;
  MessageParts message_;
};

// For a prompt that opened the model's reasoning (<think>): any id but end of sequence until the text accepted
// ends the reasoning (</think>), then INNER (a JSON answer's constraint). The answer so ends as INNER allows,
// or runs out of tokens. Bytes after </think> within its token are not INNER's (a Qwen3 </think> is one token).
std::unique_ptr<TokenConstraint> after_reasoning(std::unique_ptr<TokenConstraint> inner, Tokenizer tokenizer,
                                                 std::vector<int32_t> eos_ids);

// The parts of a whole output: OutputParser's feed() and finish() at once.
MessageParts parse_output(std::string_view text, const OutputParserOptions& options);

}  // namespace gerbil
