// Building a Tokenizer from tokenizer.json, or from GPT-2's vocab.json + merges.txt.
#include <fstream>

#include "gerbil/error.h"
#include "json/json_file.h"
#include "tokenizer/json_field.h"
#include "tokenizer/tokenizer_impl.h"

namespace gerbil {

namespace {

namespace fs = std::filesystem;
using tok::JsonField;

// Ids above this are surely a broken file rather than a vocabulary (the largest are ~260k).
constexpr int64_t kMaxTokenId = 1 << 24;

int32_t token_id(const JsonField& field) {
  int64_t id = field.integer();
  if (id < 0 || id >= kMaxTokenId)
    field.fail(fmt::format("token id {} is out of range [0, {})", id, kMaxTokenId));
  return static_cast<int32_t>(id);
}

tok::Vocab parse_vocab(const JsonField& field) {
  tok::Vocab vocab;
  vocab.reserve(field.json().size());
  for (const auto& [token, entry] : field.members()) vocab.insert_or_assign(token, token_id(entry));
  if (vocab.empty()) field.fail("the vocabulary is empty");
  return vocab;
}

// A merge as "a b" (older files, GPT-2's merges.txt lines) or ["a", "b"]. Read straight from the
// JSON: there can be half a million of them.
std::pair<std::string, std::string> parse_merge(const JsonField& field) {
  const nlohmann::json& merge = field.json();
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  if (!merge.is_string()) field.fail("expected a merge as \"a b\" or [\"a\", \"b\"]");
  const std::string& text = merge.get_ref<const std::string&>();
  size_t space = text.find(' ');
  if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
    field.fail(fmt::format("merge '{}' is not two tokens separated by one space", text));
  return {text.substr(0, space), text.substr(space + 1)};
}

std::unique_ptr<tok::Bpe> make_bpe(const JsonField& model) {
  if (auto type = model.find("type"); type && type->string() != "BPE")
    (*type).fail(fmt::format("unsupported model type '{}' (only BPE is supported)", type->string()));
  if (auto dropout = model.find("dropout"); dropout && !(dropout->json().is_number() && dropout->json() == 0))
    dropout->fail("BPE dropout is not supported (encoding would not be deterministic)");
  tok::BpeOptions options;
  if (auto unk = model.find("unk_token")) options.unk_token = unk->string();
  options.fuse_unk = model.boolean_or("fuse_unk", false);
  options.byte_fallback = model.boolean_or("byte_fallback", false);
  options.ignore_merges = model.boolean_or("ignore_merges", false);
  options.continuing_subword_prefix = model.string_or("continuing_subword_prefix", "");
  options.end_of_word_suffix = model.string_or("end_of_word_suffix", "");
  tok::Vocab vocab = parse_vocab(model["vocab"]);
  if (options.unk_token && !vocab.contains(*options.unk_token))
    model["unk_token"].fail(fmt::format("'{}' is not in model.vocab", *options.unk_token));
  auto bpe = std::make_unique<tok::Bpe>(std::move(vocab), std::move(options));
  for (const JsonField& merge : model["merges"].elements()) {
    auto [a, b] = parse_merge(merge);
    if (auto unknown = bpe->add_merge(a, b))
      merge.fail(fmt::format("merge '{} {}' names token '{}', which is not in model.vocab", a, b, *unknown));
  }
  return bpe;
}

// The "id" must be there, but HF decides ids itself (see AddedVocabulary::add_tokens).
tok::AddedToken parse_added_token(const JsonField& field) {
  tok::AddedToken token;
  token_id(field["id"]);
  token.content = field["content"].string();
  token.special = field.boolean_or("special", false);
  token.single_word = field.boolean_or("single_word", false);
  token.lstrip = field.boolean_or("lstrip", false);
  token.rstrip = field.boolean_or("rstrip", false);
  token.normalized = field.boolean_or("normalized", !token.special);
  return token;
}

Tokenizer::Impl tokenizer_from_json(const nlohmann::json& json, const fs::path& path) {
  const std::string file = path.string();
  JsonField root(json, file);
  if (!json.is_object()) root.fail("expected an object");
  Tokenizer::Impl impl;
  impl.source = path;
  // truncation and padding are ignored: transformers turns them off unless a call asks for them.
  impl.model = make_bpe(root["model"]);
  if (auto normalizer = root.find("normalizer")) impl.normalizer = tok::make_normalizer(*normalizer);
  if (auto pre_tokenizer = root.find("pre_tokenizer"))
    impl.pre_tokenizer = tok::make_pre_tokenizer(*pre_tokenizer);
  if (auto decoder = root.find("decoder")) impl.decoder = tok::make_decoder(*decoder);
  if (auto added = root.find("added_tokens")) {
    std::vector<tok::AddedToken> tokens;
    for (const JsonField& token : added->elements()) tokens.push_back(parse_added_token(token));
    impl.added.add_tokens(std::move(tokens), impl.model->vocab(), impl.normalizer.get());
  }
  impl.index_tokens();
  if (auto post_processor = root.find("post_processor"))
    impl.post_processor = tok::make_post_processor(*post_processor, impl.kinds.size());
  return impl;
}

Tokenizer::Impl load_tokenizer_json(const fs::path& path) { return tokenizer_from_json(read_json_file(path), path); }

// GPT-2's original files: vocab.json (token -> id) and merges.txt ("a b" per line after a
// "#version" header), with GPT-2's byte-level pre-tokenizer and <|endoftext|> as special token.
Tokenizer::Impl load_gpt2_pair(const fs::path& vocab_path, const fs::path& merges_path) {
  const std::string vocab_file = vocab_path.string();
  nlohmann::json vocab_json = read_json_file(vocab_path);
  Tokenizer::Impl impl;
  impl.source = vocab_path;
  impl.model = std::make_unique<tok::Bpe>(parse_vocab(JsonField(vocab_json, vocab_file)), tok::BpeOptions{});
  std::ifstream merges(merges_path, std::ios::binary);
  if (!merges) fail("{}: cannot open merges file", merges_path.string());
  std::string line;
  for (size_t number = 1; std::getline(merges, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#version")) continue;
    size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      fail("{}: line {}: expected two tokens separated by one space, got '{}'", merges_path.string(), number,
           line);
    std::string_view text(line);
    if (auto unknown = impl.model->add_merge(text.substr(0, space), text.substr(space + 1)))
      fail("{}: line {}: merge '{}' names token '{}', which is not in {}", merges_path.string(), number, line,
           *unknown, vocab_file);
  }
  impl.pre_tokenizer = tok::make_byte_level_pre_tokenizer(/*add_prefix_space=*/false, /*use_regex=*/true);
  impl.decoder = tok::make_byte_level_decoder();
  if (impl.model->vocab().contains("<|endoftext|>"))
    impl.added.add_tokens({{.content = "<|endoftext|>", .special = true}}, impl.model->vocab(), nullptr);
  impl.index_tokens();
  return impl;
}

// The pair of GPT-2 files next to `vocab` (vocab.json + merges.txt or encoder.json + vocab.bpe).
fs::path merges_beside(const fs::path& vocab) {
  fs::path merges = vocab.parent_path() / (vocab.filename() == "encoder.json" ? "vocab.bpe" : "merges.txt");
  if (!fs::exists(merges))
    fail("{}: GPT-2 vocabulary without its merges file {}", vocab.string(), merges.string());
  return merges;
}

}  // namespace

Tokenizer Tokenizer::load(const fs::path& path_or_dir) {
  fs::path path = path_or_dir;
  if (fs::is_directory(path)) {
    if (fs::exists(path / "tokenizer.json"))
      path /= "tokenizer.json";
    else if (fs::exists(path / "vocab.json"))
      path /= "vocab.json";
    else if (fs::exists(path / "encoder.json"))
      path /= "encoder.json";
    else
      fail("{}: no tokenizer.json, vocab.json + merges.txt or encoder.json + vocab.bpe in this folder",
           path.string());
  } else if (!fs::exists(path)) {
    fail("{}: no such tokenizer file or folder", path.string());
  }
  bool gpt2_pair = path.filename() == "vocab.json" || path.filename() == "encoder.json";
  Impl impl = gpt2_pair ? load_gpt2_pair(path, merges_beside(path)) : load_tokenizer_json(path);
  return Tokenizer(std::make_shared<const Impl>(std::move(impl)));
}

Tokenizer Tokenizer::from_json(const nlohmann::json& tokenizer_json, const fs::path& source) {
  return Tokenizer(std::make_shared<const Impl>(tokenizer_from_json(tokenizer_json, source)));
}

}  // namespace gerbil
