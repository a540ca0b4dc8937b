#include "generate/model_text.h"

#include "gerbil/error.h"
#include "json/json_file.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"
#include "model/weights.h"

namespace gerbil {
namespace {

namespace fs = std::filesystem;

// Whether DIR has a chat template at all. A tokenizer_config.json that is not a JSON object counts as
// having one, so that loading it reports what is wrong instead of the template silently going missing.
bool has_chat_template_file(const fs::path& dir) {
  if (fs::exists(dir / "chat_template.jinja")) return true;
  if (!fs::exists(dir / "tokenizer_config.json")) return false;
  nlohmann::json config = read_json_file(dir / "tokenizer_config.json");
  return !config.is_object() || config.contains("chat_template");
}

// The text of the special token whose id the GGUF key holds, for the template's bos_token / eos_token.
std::optional<std::string> special_token(const Gguf& gguf, const char* key, const Tokenizer& tokenizer) {
  std::optional<int64_t> id = gguf.get_int(key);
  if (!id || *id < 0 || size_t(*id) >= tokenizer.vocab_size()) return std::nullopt;
  return std::string(tokenizer.token_text(int32_t(*id)));
}

ModelText load_gguf_text(const fs::path& file) {
  Gguf gguf = Gguf::open(file);
  ModelText text{Tokenizer::from_json(gguf_tokenizer_json(gguf), file), std::nullopt};
  if (std::optional<std::string> source = gguf_chat_template(gguf))
    text.chat.emplace(*source, special_token(gguf, "tokenizer.ggml.bos_token_id", text.tokenizer),
                      special_token(gguf, "tokenizer.ggml.eos_token_id", text.tokenizer));
  return text;
}

}  // namespace

ModelText load_model_text(const fs::path& path) {
  check_model_folder(path);
  if (is_gguf_file(path)) return load_gguf_text(path);
  ModelText text{Tokenizer::load(path), std::nullopt};
  if (has_chat_template_file(path)) text.chat = ChatTemplate::from_tokenizer_config(path);
  return text;
}

namespace {

[[noreturn]] void no_chat_template(const fs::path& path, std::string_view why = "") {
  fail("{}: the model has no chat template ({}){}{}", path.string(),
       is_gguf_file(path) ? "no tokenizer.chat_template in its metadata"
                          : "no 'chat_template' in tokenizer_config.json and no chat_template.jinja",
       why.empty() ? "" : "; ", why);
}

}  // namespace

const ChatTemplate& chat_template_of(const ModelText& text, const fs::path& path) {
  if (!text.chat) no_chat_template(path);
  return *text.chat;
}

void require_chat_template(const fs::path& path, std::string_view why) {
  check_model_folder(path);
  bool has = is_gguf_file(path) ? gguf_chat_template(Gguf::open(path)).has_value()
                                : has_chat_template_file(path);
  if (!has) no_chat_template(path, why);
}

}  // namespace gerbil
