#include "template/chat_template.h"

#include "gerbil/error.h"
#include "json/json_file.h"

namespace gerbil {

std::optional<std::string> tokenizer_config_token(const nlohmann::ordered_json& config, const char* field,
                                                  const std::filesystem::path& path) {
  auto it = config.find(field);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  fail("{}: field '{}' must be a string or an object with a string 'content'", path.string(), field);
}

void validate_chat_messages(const nlohmann::ordered_json& messages) {
  if (!messages.is_array()) fail("chat messages must be a JSON array, got {}", messages.type_name());
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& message = messages[i];
    if (!message.is_object()) fail("chat message {} must be a JSON object, got {}", i, message.type_name());
    auto role = message.find("role");
    if (role == message.end()) fail("chat message {}: field 'role' is missing", i);
    if (!role->is_string())
      fail("chat message {}: field 'role' must be a string, got {}", i, role->type_name());
    auto content = message.find("content");
    if (content == message.end() || content->is_string() || content->is_null()) continue;
    if (!content->is_array())
      fail("chat message {}: field 'content' must be a string, null or a list of content parts, got {}", i,
           content->type_name());
    for (size_t j = 0; j < content->size(); ++j)
      if (!(*content)[j].is_object())
        fail("chat message {}: content part {} must be a JSON object, got {}", i, j,
             (*content)[j].type_name());
  }
}

ChatTemplate::ChatTemplate(std::string source, std::optional<std::string> bos_token,
                           std::optional<std::string> eos_token)
    : source_(std::move(source)),
      template_(source_),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)) {}

ChatTemplate ChatTemplate::from_tokenizer_config(const std::filesystem::path& dir_or_file) {
  bool is_dir = std::filesystem::is_directory(dir_or_file);
  std::filesystem::path config_path = is_dir ? dir_or_file / "tokenizer_config.json" : dir_or_file;
  std::filesystem::path jinja_path = config_path.parent_path() / "chat_template.jinja";
  if (!std::filesystem::exists(config_path)) fail("{}: file not found", config_path.string());
  nlohmann::ordered_json config = read_json_file<nlohmann::ordered_json>(config_path);
  if (!config.is_object()) fail("{}: expected a JSON object", config_path.string());

  std::string source, origin;
  std::optional<std::string> tool_use_source;
  auto field = config.find("chat_template");
  if (std::filesystem::exists(jinja_path)) {
    source = read_file_bytes(jinja_path);
    origin = jinja_path.string();
  } else if (field == config.end() || field->is_null()) {
    fail("{}: has no 'chat_template' (and there is no chat_template.jinja beside it)", config_path.string());
  } else if (field->is_string()) {
    source = field->get<std::string>();
    origin = config_path.string() + " chat_template";
  } else if (field->is_array()) {
    std::string names;
    for (const auto& entry : *field) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template") || !entry["template"].is_string())
        fail("{}: each 'chat_template' list entry must be an object with string 'name' and 'template'",
             config_path.string());
      std::string name = entry["name"].get<std::string>();
      names += (names.empty() ? "" : ", ") + name;
      if (name == "default") source = entry["template"].get<std::string>();
      if (name == "tool_use") tool_use_source = entry["template"].get<std::string>();
    }
    if (source.empty())
      fail("{}: 'chat_template' has no 'default' entry (it has: {})", config_path.string(), names);
    origin = config_path.string() + " chat_template 'default'";
  } else {
    fail("{}: field 'chat_template' must be a string or a list of {{name, template}}", config_path.string());
  }

  // Syntax errors name the file (and list entry) the template came from.
  auto parsed = [](std::string text, const std::string& where, auto make) {
    try {
      return make(std::move(text));
    } catch (const Error& e) {
      fail("{}: {}", where, e.what());
    }
  };
  auto bos_token = tokenizer_config_token(config, "bos_token", config_path);
  auto eos_token = tokenizer_config_token(config, "eos_token", config_path);
  ChatTemplate chat = parsed(std::move(source), origin, [&](std::string text) {
    return ChatTemplate(std::move(text), bos_token, eos_token);
  });
  if (tool_use_source)
    chat.tool_use_ = parsed(std::move(*tool_use_source), config_path.string() + " chat_template 'tool_use'",
                            [](std::string text) { return std::make_shared<const jinja::Template>(text); });
  return chat;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra_vars) const {
  validate_chat_messages(messages);
  if (!extra_vars.is_null() && !extra_vars.is_object())
    fail("chat template variables must be a JSON object, got {}", extra_vars.type_name());
  // The variables transformers' apply_chat_template passes: tools and documents are None unless given,
  // the special tokens come first so that extra variables can override them.
  jinja::Dict variables;
  if (bos_token_) variables.set("bos_token", *bos_token_);
  if (eos_token_) variables.set("eos_token", *eos_token_);
  variables.set("messages", jinja::Value::from_json(messages));
  variables.set("tools", jinja::Value::none());
  variables.set("documents", jinja::Value::none());
  variables.set("add_generation_prompt", add_generation_prompt);
  bool has_tools = false;
  if (extra_vars.is_object()) {
    for (const auto& [name, value] : extra_vars.items()) {
      if (name == "messages" || name == "add_generation_prompt")
        fail("chat template variable '{}' is set by the renderer and cannot be passed as an extra variable",
             name);
      variables.set(name, jinja::Value::from_json(value));
      has_tools = has_tools || (name == "tools" && !value.is_null());
    }
  }
  const jinja::Template& chosen = has_tools && tool_use_ ? *tool_use_ : template_;
  return chosen.render(variables);
}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra_vars) const {
  return render(nlohmann::ordered_json(messages), add_generation_prompt, nlohmann::ordered_json(extra_vars));
}

}  // namespace gerbil
