// A model's text side: its tokenizer and, when it has one, its chat template, from a Hugging Face folder
// (tokenizer.json, tokenizer_config.json / chat_template.jinja) or from a GGUF file's metadata. Every client
// that takes text (the engine, the server, the CLI's text commands) loads it here, the same way.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace gerbil {

struct ModelText {
  Tokenizer tokenizer;
  std::optional<ChatTemplate> chat;
};

// PATH: a model folder or a .gguf file. Throws gerbil::Error naming the path when it is neither, and the file
// and field at fault when the tokenizer or template cannot be read.
ModelText load_model_text(const std::filesystem::path& path);

// The model's chat template, or an error naming PATH and where a template would have been looked for.
const ChatTemplate& chat_template_of(const ModelText& text, const std::filesystem::path& path);

// Throws chat_template_of's error, followed by "; " and WHY, when the model at PATH (a folder or a .gguf file) has
// no chat template, reading only where one would be: a command that needs one refuses before its model loads.
void require_chat_template(const std::filesystem::path& path, std::string_view why);

}  // namespace gerbil
