// fuzz-link: src/generate/output_parser.cpp src/generate/json_constraint.cpp src/generate/regex_automaton.cpp gerbil_tokenizer
// A model's output text through the output parser (src/generate/output_parser.h) for every tool-call format, with
// and without reasoning, any number of calls or one: the first byte picks the format and options and where the
// text is cut into streamed pieces. Model text is untrusted: any text must give a message, and the streamed pieces must add up to the
// whole text's message (content, reasoning, each call's id, name and arguments). A crash, an exception or a
// mismatch is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "generate/output_parser.h"

namespace {

using namespace gerbil;

void check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t choice = data[0];
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  OutputParserOptions options;
  options.tool_format = static_cast<ToolCallFormat>(choice % 4);
  options.reasoning = (choice >> 2) & 1;
  options.thinking_opened = options.reasoning && ((choice >> 3) & 1);
  options.call_id_seed = 7;
  if (choice >> 7) options.max_tool_calls = 1;
  MessageParts whole = parse_output(text, options);
  check(whole.tool_calls.size() <= options.max_tool_calls);

  // The same text in pieces of 1 + ((choice >> 4) & 7) bytes.
  size_t piece = 1 + ((choice >> 4) & 7);
  OutputParser parser(options);
  MessageParts streamed;
  std::vector<ToolCall> pieced;
  for (size_t at = 0; at < text.size() + piece; at += piece) {
    MessageParts part = at < text.size() ? parser.feed(text.substr(at, piece)) : parser.finish();
    streamed.content += part.content;
    streamed.reasoning_content += part.reasoning_content;
    for (const ToolCallDelta& delta : part.call_deltas) {
      if (delta.opens) {
        check(delta.index == pieced.size());
        pieced.push_back({delta.index, delta.id, delta.name, ""});
      }
      check(delta.index < pieced.size());
      pieced[delta.index].arguments += delta.arguments;
    }
  }
  check(streamed.content == whole.content);
  check(streamed.reasoning_content == whole.reasoning_content);
  check(parser.message().tool_calls.size() == whole.tool_calls.size());
  check(pieced.size() == whole.tool_calls.size());
  for (size_t i = 0; i < pieced.size(); ++i) {
    const ToolCall& call = whole.tool_calls[i];
    check(call.index == i && !call.name.empty());
    check(pieced[i].id == call.id && pieced[i].name == call.name && pieced[i].arguments == call.arguments);
  }
  return 0;
}
