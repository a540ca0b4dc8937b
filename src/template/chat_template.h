// Chat templates: turn a list of chat messages into the prompt text a model was trained on, by
// rendering the Jinja `chat_template` of a Hugging Face tokenizer_config.json exactly as transformers'
// apply_chat_template(tokenize=False) does.
//
//   auto chat = gerbil::ChatTemplate::from_tokenizer_config(".deps/tokenizers/qwen3");
//   std::string prompt = chat.render(messages, /*add_generation_prompt=*/true, {{"enable_thinking", false}});
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "template/jinja.h"

namespace gerbil {

// A special token of tokenizer_config.json CONFIG (read from PATH), e.g. "eos_token": a string, or an
// AddedToken object {"content": ...}; nothing when absent or null.
std::optional<std::string> tokenizer_config_token(const nlohmann::ordered_json& config, const char* field,
                                                  const std::filesystem::path& path);

class ChatTemplate {
 public:
  // Reads `chat_template` from tokenizer_config.json (a string, or a list of {name, template} of which
  // "default" is used, and "tool_use" when tools are given), or from chat_template.jinja beside it, which
  // takes precedence as in transformers; and `bos_token` / `eos_token` (a string or {"content": ...}).
  // `dir_or_file` is the folder holding tokenizer_config.json or the file itself.
  static ChatTemplate from_tokenizer_config(const std::filesystem::path& dir_or_file);

  explicit ChatTemplate(std::string source, std::optional<std::string> bos_token = std::nullopt,
                        std::optional<std::string> eos_token = std::nullopt);

  // `messages` must be an array of objects, each with a string `role` and a `content` that is a string,
  // null or a list of content-part objects (it may be absent). The template sees `messages`,
  // `add_generation_prompt`, `tools` and `documents` (none unless given in `extra_vars`), `bos_token` /
  // `eos_token` (when the tokenizer has them) and every entry of `extra_vars` (e.g. enable_thinking).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra_vars = nullptr) const;
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& extra_vars = nullptr) const;

  const std::string& source() const { return source_; }
  const std::optional<std::string>& bos_token() const { return bos_token_; }
  const std::optional<std::string>& eos_token() const { return eos_token_; }

 private:
  std::string source_;
  jinja::Template template_;
  std::shared_ptr<const jinja::Template> tool_use_;  // the "tool_use" template of a named list, if any
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
};

// Fails with a message naming the message index and field unless `messages` has the shape described above.
void validate_chat_messages(const nlohmann::ordered_json& messages);

}  // namespace gerbil
