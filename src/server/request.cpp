#include "server/request.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace gerbil::server {
namespace {

using nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& param, std::string message) {
  throw ApiError(400, std::move(message), param);
}

const char* type_name(const ordered_json& value) { return value.type_name(); }

ordered_json parse_object(std::string_view body) {
  ordered_json json;
  try {
    json = ordered_json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    bad("", fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!json.is_object()) bad("", fmt::format("the request body must be a JSON object, got {}", type_name(json)));
  return json;
}

// The field NAME of OBJECT, or null when absent (an explicit null counts as absent, as in OpenAI's API).
const ordered_json* field(const ordered_json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const ordered_json& object, const char* name, double min, double max) {
  const ordered_json* value = field(object, name);
  if (!value) return std::nullopt;
  if (!value->is_number()) bad(name, fmt::format("`{}` must be a number, got {}", name, type_name(*value)));
  double x = value->get<double>();
  if (!std::isfinite(x) || x < min || x > max)
    bad(name, fmt::format("`{}` must be between {} and {}, got {}", name, min, max, value->dump()));
  return x;
}

std::optional<float> real(const ordered_json& object, const char* name, double min, double max) {
  auto x = number(object, name, min, max);
  return x ? std::optional<float>(float(*x)) : std::nullopt;
}

std::optional<int64_t> integer(const ordered_json& object, const char* name, int64_t min, int64_t max) {
  const ordered_json* value = field(object, name);
  if (!value) return std::nullopt;
  if (!value->is_number_integer())
    bad(name, fmt::format("`{}` must be an integer, got {}", name, value->is_number() ? value->dump() : type_name(*value)));
  if (value->is_number_unsigned() && value->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    bad(name, fmt::format("`{}` must be between {} and {}, got {}", name, min, max, value->dump()));
  int64_t x = value->get<int64_t>();
  if (x < min || x > max) bad(name, fmt::format("`{}` must be between {} and {}, got {}", name, min, max, x));
  return x;
}

std::optional<bool> boolean(const ordered_json& object, const char* name) {
  const ordered_json* value = field(object, name);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) bad(name, fmt::format("`{}` must be a boolean, got {}", name, type_name(*value)));
  return value->get<bool>();
}

const ordered_json& typed(const ordered_json& value, const std::string& path, ordered_json::value_t type,
                          const char* wanted) {
  if (value.type() != type) bad(path, fmt::format("`{}` must be {}, got {}", path, wanted, type_name(value)));
  return value;
}
const ordered_json& string_at(const ordered_json& object, const std::string& path, const char* name) {
  auto it = object.find(name);
  if (it == object.end()) bad(path + "." + name, fmt::format("`{}.{}` is missing", path, name));
  return typed(*it, path + "." + name, ordered_json::value_t::string, "a string");
}

std::vector<std::string> parse_stop(const ordered_json& body) {
  const ordered_json* stop = field(body, "stop");
  if (!stop) return {};
  std::vector<std::string> strings;
  if (stop->is_string()) {
    strings.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (size_t i = 0; i < stop->size(); ++i)
      strings.push_back(typed((*stop)[i], fmt::format("stop[{}]", i), ordered_json::value_t::string, "a string")
                            .get<std::string>());
  } else {
    bad("stop", fmt::format("`stop` must be a string or a list of strings, got {}", type_name(*stop)));
  }
  constexpr size_t kMaxStops = 16;
  if (strings.size() > kMaxStops) bad("stop", fmt::format("`stop` has {} strings, at most {}", strings.size(), kMaxStops));
  for (const std::string& s : strings)
    if (s.empty()) bad("stop", "`stop` strings must not be empty");
  return strings;
}

// A message's content: a string, null, or text parts (joined, as vLLM does for text-only models).
ordered_json parse_content(const ordered_json& content, const std::string& path) {
  if (content.is_string() || content.is_null()) return content;
  if (!content.is_array())
    bad(path, fmt::format("`{}` must be a string or a list of content parts, got {}", path, type_name(content)));
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    std::string part = fmt::format("{}[{}]", path, j);
    typed(content[j], part, ordered_json::value_t::object, "an object");
    const std::string& type = string_at(content[j], part, "type").get_ref<const std::string&>();
    if (type != "text") bad(part + ".type", fmt::format("`{}.type` \"{}\" is not supported (only \"text\")", part, type));
    if (j) text += "\n";
    text += string_at(content[j], part, "text").get<std::string>();
  }
  return text;
}

// An assistant message's tool_calls, with each call's `arguments` (a JSON string in OpenAI's API) parsed
// into JSON, the form chat templates expect (as transformers and vLLM pass them).
ordered_json parse_tool_calls(const ordered_json& calls, const std::string& path) {
  typed(calls, path, ordered_json::value_t::array, "a list");
  ordered_json out = ordered_json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    std::string call_path = fmt::format("{}[{}]", path, j);
    const ordered_json& call = typed(calls[j], call_path, ordered_json::value_t::object, "an object");
    auto function_it = call.find("function");
    if (function_it == call.end()) bad(call_path + ".function", fmt::format("`{}.function` is missing", call_path));
    std::string function_path = call_path + ".function";
    const ordered_json& function = typed(*function_it, function_path, ordered_json::value_t::object, "an object");
    ordered_json arguments = ordered_json::object();
    if (auto it = function.find("arguments"); it != function.end() && !it->is_null()) {
      if (it->is_string()) {
        arguments = ordered_json::parse(it->get_ref<const std::string&>(), nullptr, false);
        if (arguments.is_discarded())
          bad(function_path + ".arguments", fmt::format("`{}.arguments` is not valid JSON", function_path));
      } else {
        arguments = typed(*it, function_path + ".arguments", ordered_json::value_t::object, "a JSON string");
      }
    }
    ordered_json parsed = call;
    parsed["type"] = "function";
    parsed["function"] = {{"name", string_at(function, function_path, "name")}, {"arguments", arguments}};
    out.push_back(std::move(parsed));
  }
  return out;
}

ordered_json parse_messages(const ordered_json& body) {
  const ordered_json* messages = field(body, "messages");
  if (!messages) bad("messages", "`messages` is missing");
  typed(*messages, "messages", ordered_json::value_t::array, "a list");
  if (messages->empty()) bad("messages", "`messages` must not be empty");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    std::string path = fmt::format("messages[{}]", i);
    const ordered_json& message = typed((*messages)[i], path, ordered_json::value_t::object, "an object");
    const std::string& role = string_at(message, path, "role").get_ref<const std::string&>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool")
      bad(path + ".role", fmt::format("`{}.role` \"{}\" is not one of system, developer, user, assistant, tool", path, role));
    ordered_json parsed = message;
    auto content = message.find("content");
    parsed["content"] = content == message.end() ? ordered_json() : parse_content(*content, path + ".content");
    // An assistant turn that only called tools comes back with content null; templates test strings against it
    // (Qwen3's `'</think>' in message.content`), so it is rendered as empty text, as llama-server does.
    if (role == "assistant" && parsed["content"].is_null()) parsed["content"] = "";
    if (auto calls = message.find("tool_calls"); calls != message.end() && !calls->is_null()) {
      if (role != "assistant") bad(path + ".tool_calls", fmt::format("`{}.tool_calls` is only for assistant messages", path));
      parsed["tool_calls"] = parse_tool_calls(*calls, path + ".tool_calls");
    }
    if (role == "tool" && message.contains("tool_call_id")) string_at(message, path, "tool_call_id");
    out.push_back(std::move(parsed));
  }
  return out;
}

ordered_json parse_tools(const ordered_json& body) {
  const ordered_json* tools = field(body, "tools");
  if (!tools) return nullptr;
  typed(*tools, "tools", ordered_json::value_t::array, "a list");
  for (size_t i = 0; i < tools->size(); ++i) {
    std::string path = fmt::format("tools[{}]", i);
    const ordered_json& tool = typed((*tools)[i], path, ordered_json::value_t::object, "an object");
    if (string_at(tool, path, "type") != "function")
      bad(path + ".type", fmt::format("`{}.type` must be \"function\"", path));
    auto function = tool.find("function");
    if (function == tool.end()) bad(path + ".function", fmt::format("`{}.function` is missing", path));
    typed(*function, path + ".function", ordered_json::value_t::object, "an object");
    const std::string name = string_at(*function, path + ".function", "name").get<std::string>();
    if (auto parameters = function->find("parameters"); parameters != function->end())
      typed(*parameters, path + ".function.parameters", ordered_json::value_t::object, "an object");
    // A call names its tool: two of one name could not be told apart.
    for (size_t j = 0; j < i; ++j)
      if ((*tools)[j]["function"]["name"] == name)
        bad(path + ".function.name", fmt::format("`{}.function.name` \"{}\" is also tools[{}]'s: tool names must differ",
                                                path, name, j));
  }
  return tools->empty() ? ordered_json() : *tools;
}

bool has_tool(const ordered_json& tools, const std::string& name) {
  if (tools.is_array())
    for (const auto& tool : tools)
      if (tool["function"]["name"] == name) return true;
  return false;
}

ToolChoice parse_tool_choice(const ordered_json& body, const ordered_json& tools) {
  const ordered_json* choice = field(body, "tool_choice");
  ToolChoice parsed;
  if (!choice) return parsed;
  if (choice->is_string()) {
    const std::string& name = choice->get_ref<const std::string&>();
    if (name == "auto") parsed.kind = ToolChoice::Kind::Auto;
    else if (name == "none") parsed.kind = ToolChoice::Kind::None;
    else if (name == "required") parsed.kind = ToolChoice::Kind::Required;
    else bad("tool_choice", fmt::format("`tool_choice` \"{}\" is not one of auto, none, required", name));
  } else if (choice->is_object()) {
    auto function = choice->find("function");
    if (function == choice->end()) bad("tool_choice.function", "`tool_choice.function` is missing");
    typed(*function, "tool_choice.function", ordered_json::value_t::object, "an object");
    parsed.kind = ToolChoice::Kind::Named;
    parsed.name = string_at(*function, "tool_choice.function", "name").get<std::string>();
    if (!has_tool(tools, parsed.name))
      bad("tool_choice", fmt::format("`tool_choice` names the function \"{}\", which is not in `tools`", parsed.name));
  } else {
    bad("tool_choice", fmt::format("`tool_choice` must be a string or an object, got {}", type_name(*choice)));
  }
  if (parsed.kind != ToolChoice::Kind::None && parsed.kind != ToolChoice::Kind::Auto && tools.is_null())
    bad("tool_choice", "`tool_choice` asks for a tool call but `tools` is empty");
  return parsed;
}

ResponseFormat parse_response_format(const ordered_json& body) {
  const ordered_json* format = field(body, "response_format");
  ResponseFormat parsed;
  if (!format) return parsed;
  typed(*format, "response_format", ordered_json::value_t::object, "an object");
  const std::string& type = string_at(*format, "response_format", "type").get_ref<const std::string&>();
  if (type == "text") return parsed;
  if (type == "json_object") {
    parsed.kind = ResponseFormat::Kind::JsonObject;
    return parsed;
  }
  if (type != "json_schema")
    bad("response_format.type", fmt::format("`response_format.type` \"{}\" is not one of text, json_object, json_schema", type));
  parsed.kind = ResponseFormat::Kind::JsonSchema;
  auto spec = format->find("json_schema");
  if (spec == format->end()) bad("response_format.json_schema", "`response_format.json_schema` is missing");
  typed(*spec, "response_format.json_schema", ordered_json::value_t::object, "an object");
  auto schema = spec->find("schema");
  if (schema == spec->end()) bad("response_format.json_schema.schema", "`response_format.json_schema.schema` is missing");
  typed(*schema, "response_format.json_schema.schema", ordered_json::value_t::object, "an object");
  parsed.schema = nlohmann::json::parse(schema->dump());
  return parsed;
}

std::vector<int32_t> token_ids(const ordered_json& list, const std::string& path) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < list.size(); ++i) {
    const ordered_json& id = list[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad(path, fmt::format("`{}[{}]` must be a token id (a non-negative integer), got {}", path, i, id.dump()));
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

// prompt: a string, a list of token ids, or a list of one of either (OpenAI's batch form, one prompt only).
void parse_prompt(const ordered_json& body, CompletionRequest& request) {
  const ordered_json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "`prompt` is missing");
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    prompt = &(*prompt)[0];
  else if (prompt->is_array() && !prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    bad("prompt", fmt::format("`prompt` holds {} prompts; this server answers one prompt per request", prompt->size()));
  if (prompt->is_string()) {
    request.prompt = prompt->get<std::string>();
    if (request.prompt.empty()) bad("prompt", "`prompt` must not be empty");
  } else if (prompt->is_array()) {
    request.prompt_ids = token_ids(*prompt, "prompt");
    if (request.prompt_ids.empty()) bad("prompt", "`prompt` must not be empty");
  } else {
    bad("prompt", fmt::format("`prompt` must be a string or a list of token ids, got {}", type_name(*prompt)));
  }
}

void parse_logprobs(const ordered_json& body, CompletionRequest& request) {
  if (request.endpoint == Endpoint::Completion) {
    // Completions: `logprobs` is the number of top candidates (0-5) to return beside each chosen token.
    if (auto top = integer(body, "logprobs", 0, 5)) {
      request.logprobs = true;
      request.top_logprobs = uint32_t(*top);
    }
    return;
  }
  request.logprobs = boolean(body, "logprobs").value_or(false);
  if (auto top = integer(body, "top_logprobs", 0, 20)) {
    if (!request.logprobs) bad("top_logprobs", "`top_logprobs` needs `logprobs` set to true");
    request.top_logprobs = uint32_t(*top);
  }
}

}  // namespace

ApiError::ApiError(int status, std::string message, std::string param, std::string type)
    : Error(std::move(message)), status(status), param(std::move(param)), type(std::move(type)) {
  if (this->type.empty()) {
    this->type = status == 401 ? "authentication_error"
                 : status == 404 ? "not_found_error"
                 : status == 429 ? "rate_limit_error"
                 : status >= 500 ? (status == 503 ? "service_unavailable_error" : "server_error")
                                 : "invalid_request_error";
  }
}

// logit_bias: {"token id": bias in [-100, 100], ...}.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const ordered_json& body) {
  std::vector<std::pair<int32_t, float>> biases;
  const ordered_json* object = field(body, "logit_bias");
  if (!object) return biases;
  typed(*object, "logit_bias", ordered_json::value_t::object, "an object of token ids and biases");
  for (const auto& [key, value] : object->items()) {
    int32_t id = -1;
    auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc() || end != key.data() + key.size() || id < 0)
      bad("logit_bias", fmt::format("`logit_bias` key \"{}\" is not a token id", key));
    if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
      bad("logit_bias", fmt::format("`logit_bias` of token {} must be a number between -100 and 100, got {}", id,
                                    value.dump()));
    biases.emplace_back(id, value.get<float>());
  }
  return biases;
}

// Fields of OpenAI's API this server does not implement are refused, not ignored.
void refuse_unsupported(const ordered_json& body, bool streamed) {
  if (boolean(body, "echo").value_or(false)) bad("echo", "`echo` is not supported");
  if (field(body, "suffix")) bad("suffix", "`suffix` is not supported");
  if (auto best_of = integer(body, "best_of", 1, std::numeric_limits<int64_t>::max()); best_of && *best_of != 1)
    bad("best_of", fmt::format("`best_of` must be 1 (one answer is computed per request), got {}", *best_of));
  for (const char* legacy : {"functions", "function_call"})
    if (field(body, legacy)) bad(legacy, fmt::format("`{}` is not supported: use `tools` and `tool_choice`", legacy));
  if (field(body, "stream_options") && !streamed)
    bad("stream_options", "`stream_options` is only allowed when `stream` is true");
}

CompletionRequest parse_completion_request(std::string_view body_text, Endpoint endpoint) {
  ordered_json body = parse_object(body_text);
  CompletionRequest request;
  request.endpoint = endpoint;
  if (const ordered_json* model = field(body, "model"))
    request.model = typed(*model, "model", ordered_json::value_t::string, "a string").get<std::string>();
  if (endpoint == Endpoint::Chat) {
    request.messages = parse_messages(body);
    request.tools = parse_tools(body);
    request.tool_choice = parse_tool_choice(body, request.tools);
    request.parallel_tool_calls = boolean(body, "parallel_tool_calls").value_or(true);
    if (const ordered_json* kwargs = field(body, "chat_template_kwargs"))
      request.template_kwargs = typed(*kwargs, "chat_template_kwargs", ordered_json::value_t::object, "an object");
  } else {
    parse_prompt(body, request);
    for (const char* chat_only : {"messages", "tools", "tool_choice", "parallel_tool_calls"})
      if (field(body, chat_only)) bad(chat_only, fmt::format("`{}` belongs to /v1/chat/completions", chat_only));
  }
  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  auto max_tokens = integer(body, "max_completion_tokens", 1, kMaxTokens);
  if (!max_tokens) max_tokens = integer(body, "max_tokens", 1, kMaxTokens);
  if (max_tokens) request.max_tokens = uint32_t(*max_tokens);
  request.temperature = real(body, "temperature", 0, 2);
  request.top_p = real(body, "top_p", 0, 1);
  if (request.top_p && *request.top_p <= 0) bad("top_p", "`top_p` must be above 0");
  request.min_p = real(body, "min_p", 0, 1);
  request.presence_penalty = real(body, "presence_penalty", -2, 2);
  request.frequency_penalty = real(body, "frequency_penalty", -2, 2);
  request.repetition_penalty = real(body, "repetition_penalty", 0, 10);
  if (request.repetition_penalty && *request.repetition_penalty <= 0)
    bad("repetition_penalty", "`repetition_penalty` must be above 0");
  // top_k: -1 (vLLM) and 0 both mean no limit.
  if (auto top_k = integer(body, "top_k", -1, std::numeric_limits<int32_t>::max()))
    request.top_k = int32_t(std::max<int64_t>(*top_k, 0));
  if (const ordered_json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", fmt::format("`seed` must be an integer, got {}", seed->is_number() ? seed->dump() : type_name(*seed)));
    request.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : uint64_t(seed->get<int64_t>());
  }
  if (auto n = integer(body, "n", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()); n && *n != 1)
    bad("n", fmt::format("`n` must be 1 (this server returns one choice per request), got {}", *n));
  request.stop = parse_stop(body);
  request.stream = boolean(body, "stream").value_or(false);
  if (const ordered_json* options = field(body, "stream_options")) {
    typed(*options, "stream_options", ordered_json::value_t::object, "an object");
    if (auto usage = options->find("include_usage"); usage != options->end() && !usage->is_null())
      request.include_usage = typed(*usage, "stream_options.include_usage", ordered_json::value_t::boolean, "a boolean").get<bool>();
  }
  parse_logprobs(body, request);
  request.logit_bias = parse_logit_bias(body);
  request.response_format = parse_response_format(body);
  refuse_unsupported(body, request.stream);
  return request;
}

TokenizeRequest parse_tokenize_request(std::string_view body_text) {
  ordered_json body = parse_object(body_text);
  const ordered_json* content = field(body, "content");
  if (!content) bad("content", "`content` is missing");
  return {typed(*content, "content", ordered_json::value_t::string, "a string").get<std::string>(),
          boolean(body, "add_special").value_or(false)};
}

DetokenizeRequest parse_detokenize_request(std::string_view body_text) {
  ordered_json body = parse_object(body_text);
  const ordered_json* tokens = field(body, "tokens");
  if (!tokens) bad("tokens", "`tokens` is missing");
  return {token_ids(typed(*tokens, "tokens", ordered_json::value_t::array, "a list"), "tokens")};
}

}  // namespace gerbil::server
