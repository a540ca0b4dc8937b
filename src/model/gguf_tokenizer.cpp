#include "model/gguf_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "gerbil/error.h"

namespace gerbil {

using nlohmann::json;

namespace {

// llama.cpp's token types (llama_token_type).
constexpr int64_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;

// SentencePiece's space marker ("▁", U+2581).
constexpr std::string_view kSpace = "\xE2\x96\x81";

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

// The names llama.cpp gives each split (its converter names a tokenizer by its hash; several share a split).
std::optional<PreTokenizer> pre_tokenizer(std::string_view pre) {
  auto any_of = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), pre) != names.end();
  };
  if (any_of({"qwen2", "deepseek-r1-qwen"}))
    return PreTokenizer{pre, {{"type", "NFC"}},
                        split_then_bytes("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
                        false};
  if (any_of({"llama-bpe", "llama3", "llama-v3"}))
    return PreTokenizer{pre, nullptr,
                        split_then_bytes("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
                        true};
  if (any_of({"gpt-2", "phi-2", "default"})) return PreTokenizer{pre, nullptr, byte_level(true), false};
  return std::nullopt;
}

// tokenizer.ggml.tokens with their tokenizer.ggml.token_type (all normal when the file has none).
struct Vocabulary {
  std::vector<std::string_view> tokens;
  std::vector<int64_t> types;
};

Vocabulary read_vocabulary(const Gguf& gguf) {
  std::optional<std::vector<std::string_view>> tokens = gguf.get_strings("tokenizer.ggml.tokens");
  if (!tokens) fail("{}: metadata \"tokenizer.ggml.tokens\" is missing", gguf.name());
  std::vector<int64_t> types = gguf.get_ints("tokenizer.ggml.token_type").value_or(std::vector<int64_t>{});
  if (types.empty()) types.assign(tokens->size(), kNormal);
  if (types.size() != tokens->size())
    fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", gguf.name(), types.size(), tokens->size());
  for (std::size_t id = 0; id < types.size(); ++id)
    if (types[id] < kNormal || types[id] > kByte)
      fail("{}: tokenizer.ggml.token_type[{}] is {}, not a llama.cpp token type (1 to 6)", gguf.name(), id,
           types[id]);
  return {std::move(*tokens), std::move(types)};
}

// The id that KEY names, checked against the vocabulary; FALLBACK when the key is absent.
std::optional<int64_t> token_id(const Gguf& gguf, std::string_view key, const Vocabulary& vocabulary,
                                std::optional<int64_t> fallback) {
  std::optional<int64_t> id = gguf.get_int(key);
  if (!id && !fallback) return std::nullopt;
  if (int64_t value = id.value_or(*fallback); value < 0 || std::size_t(value) >= vocabulary.tokens.size())
    fail("{}: {} is {}{}, outside the {} tokens", gguf.name(), key, value, id ? "" : " (absent: llama.cpp's default)",
         vocabulary.tokens.size());
  return id ? id : fallback;
}

// Control, unknown and user-defined tokens are matched in the text before the model sees it, as llama.cpp
// does; Hugging Face's form of that is an added token.
json added_tokens(const Vocabulary& vocabulary) {
  json added = json::array();
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    int64_t type = vocabulary.types[id];
    if (type == kControl || type == kUnknown || type == kUserDefined)
      added.push_back({{"id", id}, {"content", std::string(vocabulary.tokens[id])}, {"single_word", false},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                       {"special", type != kUserDefined}});
  }
  return added;
}

json vocab_object(const Gguf& gguf, const Vocabulary& vocabulary) {
  json vocab = json::object();
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    std::string token(vocabulary.tokens[id]);
    if (vocab.contains(token)) fail("{}: tokenizer.ggml.tokens[{}] \"{}\" appears twice", gguf.name(), id, token);
    vocab[token] = id;
  }
  return vocab;
}

// BOS in front (tokenizer.ggml.add_bos_token) and EOS behind (tokenizer.ggml.add_eos_token) when the file
// asks for them; null when it asks for neither.
json special_tokens_template(const Gguf& gguf, const Vocabulary& vocabulary, bool add_bos_default,
                             std::optional<int64_t> bos_default, std::optional<int64_t> eos_default) {
  json single = json::array(), special_tokens = json::object();
  auto add = [&](std::string_view flag, std::string_view id_key, bool flag_default,
                 std::optional<int64_t> id_default) {
    if (!gguf.get_bool(flag).value_or(flag_default)) return;
    std::optional<int64_t> id = token_id(gguf, id_key, vocabulary, id_default);
    if (!id) fail("{}: {} is true but {} is missing", gguf.name(), flag, id_key);
    std::string text(vocabulary.tokens[std::size_t(*id)]);
    single.push_back({{"SpecialToken", {{"id", text}, {"type_id", 0}}}});
    special_tokens[text] = {{"id", text}, {"ids", {*id}}, {"tokens", {text}}};
  };
  add("tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id", add_bos_default, bos_default);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  add("tokenizer.ggml.add_eos_token", "tokenizer.ggml.eos_token_id", false, eos_default);
  if (special_tokens.empty()) return nullptr;
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", json::array()},
          {"special_tokens", special_tokens}};
}

json gpt2_tokenizer_json(const Gguf& gguf) {
  std::string_view pre_name = gguf.get_string("tokenizer.ggml.pre").value_or("default");
  std::optional<PreTokenizer> pre = pre_tokenizer(pre_name);
  if (!pre)
    fail("{}: tokenizer.ggml.pre \"{}\" is not supported (qwen2, deepseek-r1-qwen, llama-bpe, llama3, llama-v3, "
         "gpt-2, phi-2 and default are)", gguf.name(), pre_name);
  // Files from before llama.cpp recorded the pre-tokenizer do not say how their model splits text.
  if (pre_name == "default")
    std::fprintf(stderr,
                 "warning: %s does not name its pre-tokenizer (tokenizer.ggml.pre): splitting text as GPT-2 does; "
                 "if the model split it otherwise, its token ids differ (a newer conversion of the file names it)\n",
                 gguf.name().c_str());
  Vocabulary vocabulary = read_vocabulary(gguf);
  json merges = json::array();
  for (std::string_view merge : gguf.get_strings("tokenizer.ggml.merges").value_or(std::vector<std::string_view>{}))
    merges.push_back(std::string(merge));
  return {{"version", "1.0"},
          {"added_tokens", added_tokens(vocabulary)},
          {"normalizer", pre->normalizer},
          {"pre_tokenizer", pre->pre_tokenizer},
          {"post_processor", special_tokens_template(gguf, vocabulary, false, std::nullopt, std::nullopt)},
          {"decoder", byte_level(true)},
          {"model",
           {{"type", "BPE"}, {"vocab", vocab_object(gguf, vocabulary)}, {"merges", merges},
            {"ignore_merges", pre->ignore_merges}, {"byte_fallback", false}, {"fuse_unk", false}}}};
}

// Byte tokens are the byte-fallback pieces, which Hugging Face looks up as "<0xNN>" (upper-case hex).
void check_byte_tokens(const Gguf& gguf, const Vocabulary& vocabulary) {
  auto is_upper_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    std::string_view token = vocabulary.tokens[id];
    if (vocabulary.types[id] == kByte &&
        !(token.size() == 6 && token.starts_with("<0x") && token.ends_with(">") && is_upper_hex(token[3]) &&
          is_upper_hex(token[4])))
      fail("{}: tokenizer.ggml.tokens[{}] \"{}\" has token type 6 (byte) but is not of the form <0xNN>", gguf.name(),
           id, token);
  }
}

std::size_t code_points(std::string_view text) {
  return std::size_t(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// SentencePiece BPE as merges: llama.cpp's tokenizer repeatedly joins the adjacent pair whose concatenation is
// the vocabulary piece with the highest score, so every split of a piece into two pieces is a merge ranked by
// the piece's score, highest first. Equal scores (user-defined and control pieces all score 0) are ordered as
// Hugging Face's SentencePieceExtractor, which made the tokenizer.json files of these models, orders them:
// longer left piece first, then longer right piece, then by ids.
json merges_from_scores(const Vocabulary& vocabulary, const std::vector<double>& scores) {
  std::unordered_map<std::string_view, int64_t> ids;
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) ids.emplace(vocabulary.tokens[id], int64_t(id));
  struct Merge {
    double score;
    std::size_t left_length, right_length;
    int64_t merged, left, right;
  };
  // Only cuts into two lengths some token has are looked up: a piece of n bytes costs n lookups of up to n bytes
  // otherwise, which one long piece made a hang.
  std::vector<bool> is_length;
  for (std::string_view token : vocabulary.tokens) {
    if (token.size() >= is_length.size()) is_length.resize(token.size() + 1);
    is_length[token.size()] = true;
  }
  std::vector<std::size_t> lengths;
  for (std::size_t length = 1; length < is_length.size(); ++length)
    if (is_length[length]) lengths.push_back(length);
  std::vector<Merge> merges;
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    std::string_view piece = vocabulary.tokens[id];
    for (std::size_t cut : lengths) {
      if (cut >= piece.size()) break;
      if (!is_length[piece.size() - cut]) continue;
      auto left = ids.find(piece.substr(0, cut)), right = ids.find(piece.substr(cut));
      if (left != ids.end() && right != ids.end())
        merges.push_back({scores[id], code_points(left->first), code_points(right->first), int64_t(id),
                          left->second, right->second});
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tie(b.score, b.left_length, b.right_length, a.merged, a.left, a.right) <
           std::tie(a.score, a.left_length, a.right_length, b.merged, b.left, b.right);
  });
  json out = json::array();
  for (const Merge& merge : merges)
    out.push_back({vocabulary.tokens[std::size_t(merge.left)], vocabulary.tokens[std::size_t(merge.right)]});
  return out;
}

// The form of LlamaTokenizerFast / GemmaTokenizerFast: spaces become "▁" (and one goes in front when
// tokenizer.ggml.add_space_prefix says so), BPE with byte fallback, and the reverse on decoding.
json llama_tokenizer_json(const Gguf& gguf) {
  Vocabulary vocabulary = read_vocabulary(gguf);
  check_byte_tokens(gguf, vocabulary);
  std::optional<std::vector<double>> scores = gguf.get_floats("tokenizer.ggml.scores");
  if (!scores) fail("{}: metadata \"tokenizer.ggml.scores\" is missing", gguf.name());
  if (scores->size() != vocabulary.tokens.size())
    fail("{}: tokenizer.ggml.scores has {} entries for {} tokens", gguf.name(), scores->size(),
         vocabulary.tokens.size());
  for (std::size_t id = 0; id < scores->size(); ++id)
    if (!std::isfinite((*scores)[id]))
      fail("{}: tokenizer.ggml.scores[{}] is {}, not a finite score", gguf.name(), id, (*scores)[id]);
  bool space_prefix = gguf.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  json space_to_marker = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
  json normalizer = space_prefix ? json{{"type", "Sequence"},
                                        {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpace}}, space_to_marker}}}
                                 : space_to_marker;
  json decoders = {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}};
  if (space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  json model = {{"type", "BPE"}, {"vocab", vocab_object(gguf, vocabulary)},
                {"merges", merges_from_scores(vocabulary, *scores)}, {"byte_fallback", true}, {"fuse_unk", true}};
  // llama.cpp's defaults for SentencePiece files: BOS 1 added in front, EOS 2; the unknown token is the one
  // of type "unknown" when the id is not given.
  auto typed_unknown = std::find(vocabulary.types.begin(), vocabulary.types.end(), kUnknown);
  std::optional<int64_t> unknown_default;
  if (typed_unknown != vocabulary.types.end()) unknown_default = typed_unknown - vocabulary.types.begin();
  if (auto unk = token_id(gguf, "tokenizer.ggml.unknown_token_id", vocabulary, unknown_default))
    model["unk_token"] = std::string(vocabulary.tokens[std::size_t(*unk)]);
  return {{"version", "1.0"},
          {"added_tokens", added_tokens(vocabulary)},
          {"normalizer", normalizer},
          {"pre_tokenizer", nullptr},
          {"post_processor", special_tokens_template(gguf, vocabulary, true, 1, 2)},
          {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
          {"model", model}};
}

}  // namespace

json gguf_tokenizer_json(const Gguf& gguf) {
  std::string_view model = gguf.require_string("tokenizer.ggml.model");
  if (model == "gpt2") return gpt2_tokenizer_json(gguf);
  if (model == "llama") return llama_tokenizer_json(gguf);
  fail("{}: tokenizer.ggml.model \"{}\" is not supported (gerbil reads \"gpt2\", byte-level BPE, and \"llama\", "
       "SentencePiece)",
       gguf.name(), model);
}

std::optional<std::string> gguf_chat_template(const Gguf& gguf) {
  if (auto text = gguf.get_string("tokenizer.chat_template")) return std::string(*text);
  return std::nullopt;
}

}  // namespace gerbil
