// Turns a chat model's output into OpenAI's message parts: `reasoning_content` (Qwen3's <think>...</think>),
// `content`, and `tool_calls` in the format of the model's family, both for a finished text and
// incrementally while streaming (only text that may be the start of a marker, or a tool call still being
// written, is held back). Every family's calls stream as OpenAI streams them: a call's id and name as soon as
// the name is written, then its arguments piece by piece.
//
//   OutputParser parser({.tool_format = detect_tool_call_format(chat_template), .reasoning = true});
//   for (...) send(parser.feed(piece));
//   send(parser.finish());
//
// The markers must reach the parser as text: decode with skip_special_tokens = false where they are special
// tokens (Mistral's [TOOL_CALLS], Llama 3's <|python_tag|>); Qwen's <think> and <tool_call> are not special.
// A call streams where it is written {"name": ..., "arguments" (or "parameters"): {...}} (Mistral's other form:
// name[ARGS]{...}); its arguments are then the text the model wrote, sent as it came, whatever follows. Calls
// written otherwise are parsed when their text ends: then a call whose JSON does not parse, or that lacks a
// name, is returned as content, as written.
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
  // Mode::Calls: a list of calls after its marker, running to the message's end (Llama 3, Mistral); HermesCall:
  // one call's <tool_call> block.
  enum class Mode { Content, Reasoning, HermesCall, Calls };
  // How the calls after a marker are written: one object (Qwen's block, Llama 3's message), a JSON array of
  // objects, or Mistral's name[ARGS]{...} separated by [TOOL_CALLS].
  enum class CallSyntax { Object, Array, Named };
  void process(MessageParts& out);
  bool process_content(MessageParts& out);  // whether it changed mode
  bool process_reasoning(MessageParts& out);
  bool process_hermes_call(MessageParts& out);
  // Streams the calls written in pending_'s first END bytes, from where it stopped: each call's opening once its
  // name is known, its arguments as they come, and the call itself once its text closes.
  void stream_calls(MessageParts& out, size_t end);
  // The steps of stream_calls(), each on the list's text: true when it moved on, false when it must wait for more
  // text or can go no further (the list done or stuck).
  bool read_separator(std::string_view text);  // what opens the list or comes between two calls
  bool open_call(MessageParts& out, std::string_view text);  // a call's name: its opening goes out
  bool stream_arguments(MessageParts& out, std::string_view text);
  bool close_call(MessageParts& out, std::string_view text);  // the end of a call's object: the call is added
  // Reads TOKEN after whitespace at the list's cursor: true when read; false while the text may still become it
  // (waits), or, where it cannot, with the list stuck.
  bool expect_in_list(std::string_view text, std::string_view token);
  bool add_open_call(MessageParts& out);
  // Ends the call list written in pending_'s first END bytes after MARKER (the model's output ended, or CLOSE,
  // </tool_call>, came): the call being streamed is added as sent and what follows the list's last call is
  // content; a list that never streamed is parsed whole, or given back as content, as written.
  void end_calls(MessageParts& out, size_t end, std::string_view marker, std::string_view close);
  void begin_calls(Mode mode);  // a list of calls starts at pending_'s start
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
  std::string marker_;           // what started Mode::Calls ("[TOOL_CALLS]", or "" for Llama 3's whole message)
  bool at_section_start_ = true;  // leading whitespace of a section is dropped
  bool message_started_ = false;  // content or a marker was seen (Llama 3's JSON must be the whole message)
  // The calls after a marker, as far as they were streamed (offsets into pending_, which holds the list's text
  // from its start while it lasts).
  struct CallList {
    enum class Phase { Separator, Name, Arguments, Close } phase = Phase::Separator;
    std::optional<CallSyntax> syntax;  // known once the list's first character is
    bool opened = false;               // an array's '[' was read
    size_t cursor = 0;                 // where the next call, or what separates it from the last, begins
    size_t added = 0;                  // calls of this list added
    std::optional<ToolCall> open;      // the call streaming now (arguments: what was sent)
    size_t call_begin = 0, arguments_begin = 0;  // where its text and its arguments' '{' are
    bool done = false;                 // the list ended (its last call, or an array's ']'): the rest is content
    bool stuck = false;                // the text is not in a streamable form from the cursor on
  };
  CallList list_;
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
