// gerbil tokenize / detokenize: text to token ids and back with a Hugging Face tokenizer.
#include <cstdio>

#include "command.h"
#include "generate/model_text.h"
#include "model/gguf_model.h"
#include "gerbil/error.h"
#include "json/json_file.h"
#include "token_ids.h"
#include "tokenizer/tokenizer.h"

namespace gerbil::cli {
namespace {

// A tokenizer file or folder, or the tokenizer a GGUF file's metadata describes.
Tokenizer load_tokenizer(const std::string& path) {
  return is_gguf_file(path) ? load_model_text(path).tokenizer : Tokenizer::load(path);
}

GERBIL_COMMAND("tokenize", "Encode text into token ids with a Hugging Face tokenizer", [](CLI::App& app) {
  auto tokenizer = std::make_shared<std::string>();
  auto text = std::make_shared<std::string>();
  auto text_file = std::make_shared<std::string>();
  auto special = std::make_shared<bool>(false);
  app.description(
      "Encode text into token ids, exactly as transformers' tokenizer.encode does, and print them as a JSON\n"
      "array on one line. Added and special tokens written in the text (e.g. <|im_start|>) map to their "
      "ids.");
  app.add_option("--tokenizer", *tokenizer,
                 "tokenizer.json, GPT-2 vocab.json/encoder.json, a folder holding one, or a GGUF file")
      ->required();
  auto text_option = app.add_option("--text", *text, "Text to encode");
  auto file_option =
      app.add_option("--text-file", *text_file, "File whose bytes (UTF-8) are the text to encode");
  text_option->excludes(file_option);
  app.add_flag("--add-special-tokens", *special, "Add the tokenizer's special tokens (e.g. a BOS in front)");
  return [=] {
    if (!*text_option && !*file_option) fail("tokenize: give --text or --text-file");
    Tokenizer t = load_tokenizer(*tokenizer);
    std::vector<int32_t> ids = t.encode(*file_option ? read_file_bytes(*text_file) : *text, *special);
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::printf("%s]\n", line.c_str());
    return 0;
  };
});

GERBIL_COMMAND("detokenize", "Decode token ids into text with a Hugging Face tokenizer", [](CLI::App& app) {
  auto tokenizer = std::make_shared<std::string>();
  auto ids = std::make_shared<std::string>();
  auto skip = std::make_shared<bool>(false);
  app.description(
      "Decode token ids into text, exactly as transformers' tokenizer.decode does (without cleaning up\n"
      "tokenization spaces), and print the text as it is, with no newline added.");
  app.add_option("--tokenizer", *tokenizer,
                 "tokenizer.json, GPT-2 vocab.json/encoder.json, a folder holding one, or a GGUF file")
      ->required();
  app.add_option("--ids", *ids, "Token ids separated by commas, e.g. 9707,11,1879 (or a JSON array)")
      ->required();
  app.add_flag("--skip-special-tokens", *skip, "Leave special tokens out of the text");
  return [=] {
    std::vector<int32_t> parsed = parse_token_ids(*ids, "--ids", /*allow_empty=*/true);
    Tokenizer t = load_tokenizer(*tokenizer);
    std::string text = t.decode(parsed, *skip);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  };
});

}  // namespace
}  // namespace gerbil::cli
