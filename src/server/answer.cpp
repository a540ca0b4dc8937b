#include "server/answer.h"

#include <random>

#include "generate/json_constraint.h"

namespace gerbil::server {

std::optional<nlohmann::json> answer_schema(const CompletionRequest& request) {
  using nlohmann::json;
  auto parameters = [&](const std::string& name) {
    for (const auto& tool : request.tools)
      if (tool["function"]["name"] == name) {
        // Arguments are an object: a tool without parameters, or with a schema that does not say what its value is
        // (empty, or annotations only), takes any object.
        auto it = tool["function"].find("parameters");
        if (it == tool["function"].end()) return json{{"type", "object"}};
        json schema = json::parse(it->dump());
        bool says = false;
        for (const char* keyword : {"type", "properties", "anyOf", "oneOf", "allOf", "$ref", "enum", "const"})
          says = says || schema.contains(keyword);
        if (!says) schema["type"] = "object";
        return schema;
      }
    return json{{"type", "object"}};
  };
  switch (request.tool_choice.kind) {
    case ToolChoice::Kind::Named:
      return parameters(request.tool_choice.name);
    case ToolChoice::Kind::Required: {
      // A call of one of the tools with that tool's arguments: a branch per tool, told apart by its name.
      json calls = json::array();
      for (const auto& tool : request.tools) {
        const std::string name = tool["function"]["name"].get<std::string>();
        calls.push_back({{"type", "object"},
                         {"properties", {{"name", {{"const", name}}}, {"arguments", embeddable_schema(parameters(name))}}},
                         {"required", {"name", "arguments"}}});
      }
      return calls.size() == 1 ? calls[0] : json{{"anyOf", calls}};
    }
    default:
      break;
  }
  switch (request.response_format.kind) {
    case ResponseFormat::Kind::JsonObject:
      return json{{"type", "object"}};
    case ResponseFormat::Kind::JsonSchema:
      return request.response_format.schema;
    default:
      return std::nullopt;
  }
}

std::string answer_schema_field(const CompletionRequest& request) {
  switch (request.tool_choice.kind) {
    case ToolChoice::Kind::Named:
    case ToolChoice::Kind::Required:
      return "tools";
    default:
      return request.response_format.kind == ResponseFormat::Kind::JsonSchema ? "response_format.json_schema.schema"
                                                                              : "response_format";
  }
}

std::unique_ptr<TokenConstraint> json_constraint(const nlohmann::json& schema, const std::string& field,
                                                 const Tokenizer& tokenizer, std::vector<int32_t> eos) {
  try {
    return make_json_constraint(JsonGrammar::from_schema(schema, field), TokenTrie::of(tokenizer), std::move(eos));
  } catch (const Error& e) {
    throw ApiError(400, e.what(), field);
  }
}

std::string tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("call_{:016x}{:08x}", rng(), uint32_t(rng()));
}

namespace {

OutputParserOptions parser_options(const CompletionRequest& request, const AnswerSplit& split) {
  // A required call's text is one {"name": ..., "arguments": {...}} object, as Llama 3 writes its calls.
  if (request.tool_choice.kind == ToolChoice::Kind::Required)
    return {.tool_format = ToolCallFormat::Llama3Json, .max_tool_calls = 1};
  bool tools = !request.tools.is_null() && request.tool_choice.kind != ToolChoice::Kind::None;
  return {.tool_format = tools ? split.format : ToolCallFormat::None,
          .reasoning = split.reasoning,
          .thinking_opened = split.reasoning && split.thinking_opened,
          .max_tool_calls = request.parallel_tool_calls ? SIZE_MAX : 1};
}

nlohmann::ordered_json call_json(const std::string& id, const std::string& name, const std::string& arguments) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
}

// The delta of PARTS (an empty object when they are).
nlohmann::ordered_json delta_of(const MessageParts& parts) {
  nlohmann::ordered_json delta = nlohmann::ordered_json::object();
  if (!parts.reasoning_content.empty()) delta["reasoning_content"] = parts.reasoning_content;
  if (!parts.content.empty()) delta["content"] = parts.content;
  if (!parts.call_deltas.empty()) {
    delta["tool_calls"] = nlohmann::ordered_json::array();
    for (const ToolCallDelta& piece : parts.call_deltas) {
      nlohmann::ordered_json call = {{"index", piece.index}};
      if (piece.opens)
        call.update(call_json(piece.id, piece.name, piece.arguments));
      else
        call["function"] = {{"arguments", piece.arguments}};
      delta["tool_calls"].push_back(std::move(call));
    }
  }
  return delta;
}

}  // namespace

Answer parse_answer(std::string_view text, const CompletionRequest& request, const AnswerSplit& split) {
  Answer answer;
  if (request.tool_choice.kind == ToolChoice::Kind::Named) {
    answer.tool_calls =
        nlohmann::ordered_json::array({call_json(tool_call_id(), request.tool_choice.name, std::string(text))});
    return answer;
  }
  if (request.endpoint == Endpoint::Completion) {
    answer.content = std::string(text);
    return answer;
  }
  AnswerSplit whole = split;
  // A <think> the model opened and never closed stays content (as vLLM answers it): the answer was cut short.
  whole.reasoning = split.reasoning && (split.thinking_opened || text.find("</think>") != std::string_view::npos);
  MessageParts parts = parse_output(text, parser_options(request, whole));
  answer.content = std::move(parts.content);
  if (!parts.reasoning_content.empty()) answer.reasoning = std::move(parts.reasoning_content);
  if (!parts.tool_calls.empty()) {
    answer.tool_calls = nlohmann::ordered_json::array();
    for (const ToolCall& c : parts.tool_calls) answer.tool_calls.push_back(call_json(c.id, c.name, c.arguments));
  }
  return answer;
}

AnswerStream::AnswerStream(const CompletionRequest& request, const AnswerSplit& split)
    : parser_(parser_options(request, split)) {}

nlohmann::ordered_json AnswerStream::feed(std::string_view text) { return delta_of(parser_.feed(text)); }

nlohmann::ordered_json AnswerStream::finish() { return delta_of(parser_.finish()); }

nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages, ToolCallFormat format) {
  if (format != ToolCallFormat::Mistral) return messages;
  auto shorten = [](nlohmann::ordered_json& id) {
    if (!id.is_string()) return;
    const std::string& text = id.get_ref<const std::string&>();
    if (text.size() > 9) id = text.substr(text.size() - 9);
  };
  nlohmann::ordered_json out = messages;
  for (auto& message : out) {
    if (auto id = message.find("tool_call_id"); id != message.end()) shorten(*id);
    if (auto calls = message.find("tool_calls"); calls != message.end() && calls->is_array())
      for (auto& call : *calls)
        if (auto id = call.find("id"); id != call.end()) shorten(*id);
  }
  return out;
}

}  // namespace gerbil::server
