#include "server/answer.h"

#include <random>

namespace gerbil::server {

std::optional<nlohmann::json> answer_schema(const CompletionRequest& request) {
  using nlohmann::json;
  auto parameters = [&](const std::string& name) {
    for (const auto& tool : request.tools)
      if (tool["function"]["name"] == name) {
        auto it = tool["function"].find("parameters");
        return it == tool["function"].end() ? json{{"type", "object"}} : json::parse(it->dump());
      }
    return json{{"type", "object"}};
  };
  switch (request.tool_choice.kind) {
    case ToolChoice::Kind::Named:
      return parameters(request.tool_choice.name);
    case ToolChoice::Kind::Required: {
      json choices = json::array();
      for (const auto& tool : request.tools) {
        std::string name = tool["function"]["name"];
        choices.push_back({{"type", "object"},
                           {"properties", {{"name", {{"const", name}}}, {"arguments", parameters(name)}}},
                           {"required", {"name", "arguments"}}});
      }
      return json{{"anyOf", choices}};
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

std::unique_ptr<TokenConstraint> json_constraint(const nlohmann::json& /*schema*/, const Tokenizer& /*tokenizer*/,
                                                 size_t /*logits*/) {
  // Wired to generate/json_constraint.h when structured output lands (branch h-structured).
  throw ApiError(400, "structured output (response_format json_object / json_schema, tool_choice required or "
                      "a named function) is not available in this build", "response_format");
}

std::string tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("call_{:016x}{:08x}", rng(), uint32_t(rng()));
}

Answer parse_answer(std::string_view text, const CompletionRequest& request, std::string_view /*model_type*/) {
  Answer answer;
  auto call = [](const std::string& name, const std::string& arguments) {
    return nlohmann::ordered_json{{"id", tool_call_id()},
                                  {"type", "function"},
                                  {"function", {{"name", name}, {"arguments", arguments}}}};
  };
  if (request.tool_choice.kind == ToolChoice::Kind::Named) {
    answer.tool_calls = nlohmann::ordered_json::array({call(request.tool_choice.name, std::string(text))});
    return answer;
  }
  if (request.tool_choice.kind == ToolChoice::Kind::Required) {
    auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
    if (parsed.is_object() && parsed.contains("name") && parsed["name"].is_string() && parsed.contains("arguments")) {
      answer.tool_calls = nlohmann::ordered_json::array({call(parsed["name"], parsed["arguments"].dump())});
      return answer;
    }
  }
  // Wired to generate/output_parser.h (model tool-call formats, <think> reasoning) when it lands.
  answer.content = std::string(text);
  return answer;
}

}  // namespace gerbil::server
