#include "generate/output_parser.h"

#include <algorithm>
#include <random>
#include <span>

#include <nlohmann/json.hpp>

#include "gerbil/error.h"

namespace gerbil {

namespace {

using nlohmann::json;

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kToolCallOpen = "<tool_call>", kToolCallClose = "</tool_call>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]", kMistralArgs = "[ARGS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kWhitespace = " \t\r\n";

std::string_view trim(std::string_view text) {
  size_t begin = text.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kWhitespace) + 1 - begin);
}

std::string_view trim_end(std::string_view text) {
  size_t end = text.find_last_not_of(kWhitespace);
  return end == std::string_view::npos ? std::string_view() : text.substr(0, end + 1);
}

// The length of the longest end of TEXT that is a proper beginning of MARKER.
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t length = std::min(text.size(), marker.size() - 1); length > 0; --length)
    if (marker.starts_with(text.substr(text.size() - length))) return length;
  return 0;
}

std::optional<json> parse_json(std::string_view text) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// {"name": ..., "arguments" or "parameters": ...} as a name and JSON arguments; nullopt when it is not one (a
// JSON answer that merely has a "name", {"name": "Ann", "age": 42}, is not a call).
std::optional<std::pair<std::string, std::string>> call_of(const json& value) {
  if (!value.is_object() || !value.contains("name") || !value["name"].is_string() ||
      value["name"].get<std::string>().empty())
    return std::nullopt;
  const char* key = value.contains("arguments") ? "arguments" : value.contains("parameters") ? "parameters" : nullptr;
  if (!key) return std::nullopt;
  const json& arguments = value[key];
  // Arguments written as a JSON string holding JSON are taken as that JSON text.
  if (arguments.is_string() && parse_json(arguments.get<std::string>()))
    return std::pair{value["name"].get<std::string>(), arguments.get<std::string>()};
  return std::pair{value["name"].get<std::string>(), arguments.dump()};
}

using Calls = std::vector<std::pair<std::string, std::string>>;

std::optional<Calls> json_calls(std::string_view text) {
  std::optional<json> value = parse_json(trim(text));
  if (!value) return std::nullopt;
  Calls calls;
  for (const json& item : value->is_array() ? *value : json::array({*value})) {
    auto call = call_of(item);
    if (!call) return std::nullopt;
    calls.push_back(*call);
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Mistral's newer form: name[ARGS]{...}, the calls after the first separated by [TOOL_CALLS].
std::optional<Calls> mistral_named_calls(std::string_view text) {
  Calls calls;
  while (!text.empty()) {
    size_t args = text.find(kMistralArgs);
    if (args == std::string_view::npos) return std::nullopt;
    std::string_view name = trim(text.substr(0, args));
    text.remove_prefix(args + kMistralArgs.size());
    size_t next = text.find(kMistralCalls);
    std::string_view arguments = trim(text.substr(0, next));
    std::optional<json> value = parse_json(arguments);
    if (name.empty() || !value) return std::nullopt;
    calls.emplace_back(std::string(name), value->dump());
    text = next == std::string_view::npos ? std::string_view() : text.substr(next + kMistralCalls.size());
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// The length of the JSON object TEXT starts with, or npos while it is not closed yet.
size_t json_object_length(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// How a Hermes call's text begins: {"name": "NAME", "arguments": {  (or "parameters"), what streaming needs.
struct CallHead {
  enum class Kind { Incomplete, Other, Found } kind = Kind::Incomplete;
  std::string name;
  size_t arguments_begin = 0;  // the arguments object's '{'
};

CallHead hermes_call_head(std::string_view text) {
  using Kind = CallHead::Kind;
  size_t at = 0;
  // Skips whitespace, then reads EXPECTED: Found when it is there, Incomplete when the text ends in it.
  auto expect = [&](std::string_view expected) {
    at = std::min(text.size(), text.find_first_not_of(kWhitespace, at));
    std::string_view rest = text.substr(at, expected.size());
    if (rest != expected.substr(0, rest.size())) return Kind::Other;
    if (rest.size() < expected.size()) return Kind::Incomplete;
    at += expected.size();
    return Kind::Found;
  };
  auto string_end = [&]() {  // the end of the JSON string starting at `at`, or npos
    for (size_t i = at + 1; i < text.size(); ++i) {
      if (text[i] == '\\') ++i;
      else if (text[i] == '"') return i + 1;
    }
    return std::string_view::npos;
  };
  CallHead head;
  for (std::string_view token : {"{", "\"name\"", ":", "\""}) {
    if (Kind kind = expect(token); kind != Kind::Found) return {kind};
  }
  --at;  // back to the name's opening quote
  size_t end = string_end();
  if (end == std::string_view::npos) return {Kind::Incomplete};
  std::optional<json> name = parse_json(text.substr(at, end - at));
  if (!name || !name->is_string() || name->get<std::string>().empty()) return {Kind::Other};
  at = end;
  for (std::string_view token : {",", "\""}) {
    if (Kind kind = expect(token); kind != Kind::Found) return {kind};
  }
  std::string_view key = "arguments\"";
  if (!key.starts_with(text.substr(at, key.size()))) key = "parameters\"";
  if (Kind kind = expect(key); kind != Kind::Found) return {kind};
  for (std::string_view token : {":", "{"}) {
    if (Kind kind = expect(token); kind != Kind::Found) return {kind};
  }
  return {Kind::Found, name->get<std::string>(), at - 1};
}

std::vector<std::string_view> content_markers(const OutputParserOptions& options) {
  std::vector<std::string_view> markers;
  if (options.reasoning) markers.push_back(kThinkOpen);
  if (options.tool_format == ToolCallFormat::Hermes) markers.push_back(kToolCallOpen);
  if (options.tool_format == ToolCallFormat::Mistral) markers.push_back(kMistralCalls);
  if (options.tool_format == ToolCallFormat::Llama3Json) markers.push_back(kPythonTag);
  return markers;
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view chat_template) {
  if (chat_template.find(kToolCallOpen) != std::string_view::npos) return ToolCallFormat::Hermes;
  if (chat_template.find(kMistralCalls) != std::string_view::npos) return ToolCallFormat::Mistral;
  if (chat_template.find(kPythonTag) != std::string_view::npos ||
      chat_template.find("ipython") != std::string_view::npos)
    return ToolCallFormat::Llama3Json;
  return ToolCallFormat::None;
}

bool prompt_opens_thinking(std::string_view prompt) { return trim_end(prompt).ends_with(kThinkOpen); }

OutputParser::OutputParser(const OutputParserOptions& options)
    : options_(options), random_state_(options.call_id_seed ? options.call_id_seed : std::random_device()()) {
  if (options_.reasoning && options_.thinking_opened) mode_ = Mode::Reasoning;
}

MessageParts OutputParser::feed(std::string_view text) {
  pending_ += text;
  MessageParts out;
  process(out);
  return out;
}

void OutputParser::process(MessageParts& out) {
  for (bool changed = true; changed && !ended_;) {
    switch (mode_) {
      case Mode::Content: changed = process_content(out); break;
      case Mode::Reasoning: changed = process_reasoning(out); break;
      case Mode::HermesCall: changed = process_hermes_call(out); break;
      case Mode::Calls:  // they run to the message's end
        stream_calls(out, pending_.size());
        changed = false;
        break;
    }
  }
  if (ended_) pending_.clear();
}

bool OutputParser::skip_section_whitespace() {
  if (!at_section_start_) return true;
  size_t begin = pending_.find_first_not_of(kWhitespace);
  pending_.erase(0, begin);  // npos: all of it
  at_section_start_ = begin == std::string::npos;
  return !at_section_start_;
}

bool OutputParser::process_content(MessageParts& out) {
  if (!message_started_ && !hold_message_start()) return mode_ != Mode::Content;  // Llama 3's call began
  if (!skip_section_whitespace()) return false;
  std::string_view text = pending_;
  size_t first = std::string_view::npos;
  std::string_view marker;
  for (std::string_view candidate : content_markers(options_)) {
    size_t at = text.find(candidate);
    if (at < first) {
      first = at;
      marker = candidate;
    }
  }
  if (first == std::string_view::npos) {
    size_t hold = 0;
    for (std::string_view candidate : content_markers(options_)) hold = std::max(hold, partial_marker(text, candidate));
    emit_content(out, text.substr(0, text.size() - hold));
    pending_.erase(0, text.size() - hold);
    return false;
  }
  emit_content(out, text.substr(0, first));
  pending_.erase(0, first + marker.size());
  message_started_ = true;
  if (marker == kThinkOpen) {
    mode_ = Mode::Reasoning;
    at_section_start_ = true;
  } else {
    marker_ = marker;
    begin_calls(marker == kToolCallOpen ? Mode::HermesCall : Mode::Calls);
  }
  return true;
}

void OutputParser::begin_calls(Mode mode) {
  mode_ = mode;
  list_ = {};
}

bool OutputParser::hold_message_start() {
  size_t text_begin = pending_.find_first_not_of(kWhitespace);
  if (text_begin == std::string::npos) return false;  // only whitespace so far
  std::string_view text = std::string_view(pending_).substr(text_begin);
  auto markers = content_markers(options_);
  if (options_.tool_format == ToolCallFormat::Llama3Json) {
    // A message that is one JSON object may be a tool call.
    if (text.starts_with('{')) {
      pending_.erase(0, text_begin);
      marker_.clear();
      begin_calls(Mode::Calls);
      message_started_ = true;
      return false;
    }
  }
  for (std::string_view marker : markers) {
    if (text.size() < marker.size() && marker.starts_with(text)) return false;  // may still become a marker
    if (text.starts_with(marker)) {
      pending_.erase(0, text_begin);  // whitespace before a leading marker is not content
      return true;
    }
  }
  // Plain text: its leading whitespace is content, as written.
  at_section_start_ = false;
  message_started_ = true;
  return true;
}

bool OutputParser::process_reasoning(MessageParts& out) {
  if (!skip_section_whitespace()) return false;
  size_t close = pending_.find(kThinkClose);
  if (close == std::string::npos) {
    // Hold back what may begin </think> and the whitespace before it (the reasoning's end is trimmed).
    std::string_view text = pending_;
    std::string_view sure = trim_end(text.substr(0, text.size() - partial_marker(text, kThinkClose)));
    emit_reasoning(out, sure);
    pending_.erase(0, sure.size());
    return false;
  }
  emit_reasoning(out, trim_end(std::string_view(pending_).substr(0, close)));
  pending_.erase(0, close + kThinkClose.size());
  mode_ = Mode::Content;
  at_section_start_ = true;
  message_started_ = true;  // what follows the reasoning is a section of its own
  return true;
}

bool OutputParser::process_hermes_call(MessageParts& out) {
  size_t close = pending_.find(kToolCallClose);
  // What may begin </tool_call> is not streamed: if it completes, it ends the call's text there.
  size_t sure = close != std::string::npos ? close : pending_.size() - partial_marker(pending_, kToolCallClose);
  stream_calls(out, sure);
  if (close == std::string::npos || ended_) return false;
  end_calls(out, close, kToolCallOpen, kToolCallClose);
  pending_.erase(0, close + kToolCallClose.size());
  mode_ = Mode::Content;
  at_section_start_ = true;
  return true;
}

void OutputParser::stream_calls(MessageParts& out, size_t end) {
  std::string_view text = std::string_view(pending_).substr(0, end);
  for (bool moved = true; moved && !ended_ && !list_.done && !list_.stuck;) {
    switch (list_.phase) {
      case CallList::Phase::Separator: moved = read_separator(text); break;
      case CallList::Phase::Name: moved = open_call(out, text); break;
      case CallList::Phase::Arguments: moved = stream_arguments(out, text); break;
      case CallList::Phase::Close: moved = close_call(out, text); break;
    }
  }
}

bool OutputParser::expect_in_list(std::string_view text, std::string_view token) {
  size_t at = std::min(text.size(), text.find_first_not_of(kWhitespace, list_.cursor));
  std::string_view found = text.substr(at, token.size());
  if (found != token.substr(0, found.size())) {
    list_.stuck = true;
    return false;
  }
  if (found.size() < token.size()) return false;
  list_.cursor = at + token.size();
  return true;
}

bool OutputParser::read_separator(std::string_view text) {
  size_t first = text.find_first_not_of(kWhitespace, list_.cursor);
  if (first == std::string_view::npos) return false;
  if (!list_.syntax) {
    bool mistral = options_.tool_format == ToolCallFormat::Mistral;
    list_.syntax = !mistral || text[first] == '{' ? CallSyntax::Object
                   : text[first] == '['            ? CallSyntax::Array
                                                   : CallSyntax::Named;
  }
  switch (*list_.syntax) {
    case CallSyntax::Object:
      list_.done = list_.added > 0;  // one call
      break;
    case CallSyntax::Array:
      if (!list_.opened) {
        list_.opened = expect_in_list(text, "[");
        return list_.opened;
      }
      if (text[first] == ']') {
        list_.cursor = first + 1;
        list_.done = true;
      } else if (list_.added > 0 && !expect_in_list(text, ",")) {
        return false;
      }
      break;
    case CallSyntax::Named:
      if (list_.added > 0 && !expect_in_list(text, kMistralCalls)) return false;
      break;
  }
  if (list_.done) return false;
  list_.phase = CallList::Phase::Name;
  return true;
}

bool OutputParser::open_call(MessageParts& out, std::string_view text) {
  std::string name;
  if (list_.syntax == CallSyntax::Named) {
    size_t args = text.find(kMistralArgs, list_.cursor);
    if (args == std::string_view::npos) return false;
    name = trim(text.substr(list_.cursor, args - list_.cursor));
    size_t brace = text.find_first_not_of(kWhitespace, args + kMistralArgs.size());
    if (!name.empty() && brace == std::string_view::npos) return false;
    list_.stuck = name.empty() || text[brace] != '{';  // other arguments are parsed whole
    list_.arguments_begin = brace;
  } else {
    CallHead head = hermes_call_head(text.substr(list_.cursor));
    if (head.kind == CallHead::Kind::Incomplete) return false;
    list_.stuck = head.kind == CallHead::Kind::Other;
    name = std::move(head.name);
    list_.arguments_begin = list_.cursor + head.arguments_begin;
  }
  if (list_.stuck) return false;
  list_.call_begin = list_.cursor;
  list_.open = ToolCall{message_.tool_calls.size(), next_id(), name, ""};
  emit_call_delta(out, {list_.open->index, true, list_.open->id, name, ""});
  list_.phase = CallList::Phase::Arguments;
  return true;
}

bool OutputParser::stream_arguments(MessageParts& out, std::string_view text) {
  // Everything up to the arguments' closing brace is theirs; what follows it is the call's frame.
  std::string_view arguments = text.substr(list_.arguments_begin);
  size_t length = json_object_length(arguments);
  std::string_view fresh = arguments.substr(0, std::min(arguments.size(), length)).substr(list_.open->arguments.size());
  if (!fresh.empty()) {
    list_.open->arguments += fresh;
    emit_call_delta(out, {list_.open->index, false, "", "", std::string(fresh)});
  }
  if (length == std::string_view::npos) return false;
  list_.cursor = list_.arguments_begin + length;
  if (list_.syntax == CallSyntax::Named) return add_open_call(out);
  list_.phase = CallList::Phase::Close;
  return true;
}

bool OutputParser::close_call(MessageParts& out, std::string_view text) {
  size_t length = json_object_length(text.substr(list_.call_begin));
  if (length == std::string_view::npos) return false;
  list_.cursor = list_.call_begin + length;
  return add_open_call(out);
}

bool OutputParser::add_open_call(MessageParts& out) {
  add_call(out, std::move(*list_.open));
  list_.open.reset();
  ++list_.added;
  list_.phase = CallList::Phase::Separator;
  return true;
}

void OutputParser::end_calls(MessageParts& out, size_t end, std::string_view marker, std::string_view close) {
  std::string_view text = std::string_view(pending_).substr(0, end);
  if (list_.open) {
    // Sent is sent: the call stays as streamed, even where the model stopped inside it.
    add_call(out, std::move(*list_.open));
  } else if (list_.added == 0) {
    if (!add_calls(out, text)) emit_content(out, std::string(marker) + std::string(text) + std::string(close));
  } else if (!ended_) {
    emit_content(out, trim(text.substr(std::min(list_.cursor, text.size()))));
  }
  list_ = {};
}

MessageParts OutputParser::finish() {
  MessageParts out;
  process(out);
  if (ended_) mode_ = Mode::Content;  // process() dropped the rest
  switch (mode_) {
    case Mode::Content: emit_content(out, pending_); break;
    case Mode::Reasoning: emit_reasoning(out, trim_end(pending_)); break;
    case Mode::HermesCall:  // the model stopped before </tool_call>
      stream_calls(out, pending_.size());  // what was held back as a possible </tool_call>
      if (!ended_) end_calls(out, pending_.size(), kToolCallOpen, "");
      break;
    case Mode::Calls:
      end_calls(out, pending_.size(), marker_, "");
      break;
  }
  pending_.clear();
  mode_ = Mode::Content;
  return out;
}

void OutputParser::emit_content(MessageParts& out, std::string_view text) {
  if (text.empty()) return;
  out.content += text;
  message_.content += text;
  message_started_ = true;
}

void OutputParser::emit_reasoning(MessageParts& out, std::string_view text) {
  out.reasoning_content += text;
  message_.reasoning_content += text;
}

bool OutputParser::add_calls(MessageParts& out, std::string_view text) {
  std::optional<Calls> calls;
  if (options_.tool_format == ToolCallFormat::Mistral) {
    calls = trim(text).starts_with('[') || trim(text).starts_with('{') ? json_calls(text) : mistral_named_calls(text);
  } else {
    calls = json_calls(text);
    if (calls && calls->size() != 1) calls.reset();  // Hermes and Llama 3 write one call per block
  }
  if (!calls) return false;
  for (auto& [name, arguments] : *calls) {
    if (ended_) break;
    ToolCall call{message_.tool_calls.size(), next_id(), std::move(name), std::move(arguments)};
    emit_call_delta(out, {call.index, true, call.id, call.name, call.arguments});
    add_call(out, std::move(call));
  }
  return true;
}

void OutputParser::add_call(MessageParts& out, ToolCall call) {
  out.tool_calls.push_back(call);
  message_.tool_calls.push_back(std::move(call));
  ended_ = message_.tool_calls.size() >= options_.max_tool_calls;
}

void OutputParser::emit_call_delta(MessageParts& out, ToolCallDelta delta) {
  // Pieces of one call in one step go out as one (a chunk names each call once).
  if (!out.call_deltas.empty() && out.call_deltas.back().index == delta.index && !delta.opens) {
    out.call_deltas.back().arguments += delta.arguments;
    return;
  }
  out.call_deltas.push_back(std::move(delta));
}

std::string OutputParser::next_id() {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  bool mistral = options_.tool_format == ToolCallFormat::Mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) {
    random_state_ = random_state_ * 6364136223846793005ull + 1442695040888963407ull;  // a 64-bit LCG
    id += kAlphabet[(random_state_ >> 33) % kAlphabet.size()];
  }
  return id;
}

MessageParts parse_output(std::string_view text, const OutputParserOptions& options) {
  OutputParser parser(options);
  parser.feed(text);
  parser.finish();
  return parser.message();
}

}  // namespace gerbil

namespace gerbil {

namespace {

class AfterReasoning final : public TokenConstraint {
 public:
  AfterReasoning(std::unique_ptr<TokenConstraint> inner, Tokenizer tokenizer, std::vector<int32_t> eos_ids)
      : inner_(std::move(inner)), tokenizer_(std::move(tokenizer)), eos_ids_(std::move(eos_ids)) {}

  void mask(std::span<uint8_t> allowed) override {
    if (reasoned_) return inner_->mask(allowed);
    for (int32_t id : eos_ids_)
      if (id >= 0 && static_cast<size_t>(id) < allowed.size()) allowed[id] = 0;
  }

  void mask_bits(std::span<uint32_t> allowed, size_t ids) override {
    if (reasoned_) return inner_->mask_bits(allowed, ids);
    for (int32_t id : eos_ids_)
      if (id >= 0 && static_cast<size_t>(id) < ids) allowed[id / 32] &= ~(uint32_t{1} << (id % 32));
  }

  void accept(int32_t id) override {
    if (reasoned_) return inner_->accept(id);
    if (id >= 0 && static_cast<size_t>(id) < tokenizer_.vocab_size()) tail_ += tokenizer_.token_bytes(id);
    reasoned_ = tail_.find(kThinkClose) != std::string::npos;
    // Only the end that may begin </think> matters to the next id.
    if (tail_.size() >= kThinkClose.size()) tail_.erase(0, tail_.size() - (kThinkClose.size() - 1));
  }

  bool complete() const override { return reasoned_ && inner_->complete(); }

 private:
  std::unique_ptr<TokenConstraint> inner_;
  Tokenizer tokenizer_;
  std::vector<int32_t> eos_ids_;
  std::string tail_;  // the reasoning's last bytes
  bool reasoned_ = false;
};

}  // namespace

std::unique_ptr<TokenConstraint> after_reasoning(std::unique_ptr<TokenConstraint> inner, Tokenizer tokenizer,
                                                 std::vector<int32_t> eos_ids) {
  return std::make_unique<AfterReasoning>(std::move(inner), std::move(tokenizer), std::move(eos_ids));
}

}  // namespace gerbil
