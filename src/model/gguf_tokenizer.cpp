#include "model/gguf_tokenizer.h"

#include "gerbil/error.h"

namespace gerbil {

using nlohmann::json;

namespace {

// llama.cpp's token types (llama_token_type).
constexpr int64_t kControl = 3, kUserDefined = 4;

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

json split_then_bytes(std::string_view regex) {
  json split = {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", {split, byte_level(false)}}};
}

// The normalizer, pre-tokenizer and merge rule of the Hugging Face tokenizers llama.cpp names by PRE.
struct PreTokenizer {
  std::string_view name;
  json normalizer;
  json pre_tokenizer;
  bool ignore_merges;
};

std::optional<PreTokenizer> pre_tokenizer(std::string_view pre) {
  if (pre == "qwen2")
    return PreTokenizer{pre, {{"type", "NFC"}},
                        split_then_bytes("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
                        false};
  if (pre == "llama-bpe")
    return PreTokenizer{pre, nullptr,
                        split_then_bytes("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
                        true};
  if (pre == "gpt-2" || pre == "default") return PreTokenizer{pre, nullptr, byte_level(true), false};
  return std::nullopt;
}

}  // namespace

json gguf_tokenizer_json(const Gguf& gguf) {
  std::string_view model = gguf.require_string("tokenizer.ggml.model");
  if (model != "gpt2")
    fail("{}: tokenizer.ggml.model \"{}\" is not supported (gerbil reads \"gpt2\", byte-level BPE)", gguf.name(),
         model);
  std::string_view pre_name = gguf.get_string("tokenizer.ggml.pre").value_or("default");
  std::optional<PreTokenizer> pre = pre_tokenizer(pre_name);
  if (!pre)
    fail("{}: tokenizer.ggml.pre \"{}\" is not supported (qwen2, llama-bpe, gpt-2, default are)", gguf.name(),
         pre_name);

  std::optional<std::vector<std::string_view>> listed = gguf.get_strings("tokenizer.ggml.tokens");
  if (!listed) fail("{}: metadata \"tokenizer.ggml.tokens\" is missing", gguf.name());
  const std::vector<std::string_view>& tokens = *listed;
  std::vector<int64_t> types = gguf.get_ints("tokenizer.ggml.token_type").value_or(std::vector<int64_t>{});
  if (!types.empty() && types.size() != tokens.size())
    fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", gguf.name(), types.size(), tokens.size());

  json vocab = json::object();
  json added = json::array();
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    std::string token(tokens[id]);
    int64_t type = types.empty() ? 1 : types[id];
    if (type == kControl || type == kUserDefined)
      added.push_back({{"id", id}, {"content", token}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == kControl}});
    if (vocab.contains(token)) fail("{}: tokenizer.ggml.tokens[{}] \"{}\" appears twice", gguf.name(), id, token);
    vocab[token] = id;
  }
  json merges = json::array();
  for (std::string_view merge : gguf.get_strings("tokenizer.ggml.merges").value_or(std::vector<std::string_view>{}))
    merges.push_back(std::string(merge));

  json doc = {{"version", "1.0"},
              {"added_tokens", added},
              {"normalizer", pre->normalizer},
              {"pre_tokenizer", pre->pre_tokenizer},
              {"decoder", byte_level(true)},
              {"model",
               {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", pre->ignore_merges},
                {"byte_fallback", false}, {"fuse_unk", false}}}};
  std::optional<int64_t> bos = gguf.get_int("tokenizer.ggml.bos_token_id");
  if (gguf.get_bool("tokenizer.ggml.add_bos_token").value_or(false)) {
    if (!bos || *bos < 0 || std::size_t(*bos) >= tokens.size())
      fail("{}: tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is missing or outside the {} "
           "tokens",
           gguf.name(), tokens.size());
    std::string bos_text(tokens[std::size_t(*bos)]);
    doc["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", bos_text}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", json::array()},
        {"special_tokens", {{bos_text, {{"id", bos_text}, {"ids", {*bos}}, {"tokens", {bos_text}}}}}}};
  }
  return doc;
}

std::optional<std::string> gguf_chat_template(const Gguf& gguf) {
  if (auto text = gguf.get_string("tokenizer.chat_template")) return std::string(*text);
  return std::nullopt;
}

}  // namespace gerbil
