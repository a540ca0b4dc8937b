// Tokenizers exact to Hugging Face transformers, built from a tokenizer.json (BPE models: byte-level
// like GPT-2 / Qwen / Llama 3, SentencePiece-style like Llama 2 / Gemma) or from GPT-2's
// vocab.json + merges.txt pair.
//
//   gerbil::Tokenizer tokenizer = gerbil::Tokenizer::load("models/qwen3");
//   std::vector<int32_t> ids = tokenizer.encode("Hello", /*add_special_tokens=*/true);
//   std::string text = tokenizer.decode(ids);
//
// A Tokenizer is cheap to copy (it shares its tables) and safe to use from many threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil {

class Tokenizer {
 public:
  // PATH is a tokenizer.json, GPT-2's vocab.json / encoder.json (with merges.txt / vocab.bpe beside
  // it), or a folder holding either. Throws gerbil::Error naming the file and field at fault.
  static Tokenizer load(const std::filesystem::path& path_or_dir);
  // The tokenizer a tokenizer.json document describes (e.g. one made from a GGUF file's metadata); SOURCE
  // names it in errors.
  static Tokenizer from_json(const nlohmann::json& tokenizer_json, const std::filesystem::path& source);

  // The ids of text, like transformers' tokenizer.encode(text, add_special_tokens=...). Added and
  // special tokens written in the text (e.g. "<|im_start|>") map to their ids. Throws gerbil::Error
  // naming the byte offset when text is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

  // The text of ids, like transformers' decode(ids, skip_special_tokens=..., without cleaning up
  // tokenization spaces). Ids without a token (past the vocabulary, as a padded model's logits give)
  // decode to nothing, as in transformers; a negative id throws gerbil::Error naming it and its position.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One more than the largest id, added tokens included.
  size_t vocab_size() const;
  // The id of a vocabulary string or added token ("<|im_end|>", "Ġthe"), if there is one.
  std::optional<int32_t> token_id(std::string_view token) const;
  // The vocabulary string of id (what the decoder sees). Throws gerbil::Error when out of range.
  std::string_view token_text(int32_t id) const;
  // Whether id is a special added token (skipped by decode(..., skip_special_tokens=true)).
  bool is_special(int32_t id) const;
  // Whether id is an added token, special or not ("<|im_end|>", Qwen's "<think>").
  bool is_added(int32_t id) const;
  // The bytes id adds to a decoded text when it is not the first token: the vocabulary string through the
  // decoder, less the text-start rules and UTF-8 repair, so a token holding part of a character keeps its
  // raw bytes ("Ġ" -> " ", "<0xE4>" -> "\xE4", "▁the" -> " the"). An added token gives its decoded text.
  // What constrained decoding matches against. Throws gerbil::Error when id is out of range.
  std::string token_bytes(int32_t id) const;
  // The file the tokenizer came from.
  const std::filesystem::path& source() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
  friend class StreamDecoder;
};

// Decodes ids one at a time as a model generates them, returning only text that is final: valid,
// complete UTF-8 that later ids cannot change. A character split over byte-level tokens is held
// back until its last byte arrives; a run of <0xNN> byte-fallback tokens (which the ByteFallback
// decoder turns into text as a whole, or into U+FFFD per byte when it is not valid UTF-8) is held
// back until a token that is not a byte ends it. The SentencePiece leading-space rule applies as in
// a full decode. The concatenation of everything step() and finish() return equals decode() of all
// the ids, whatever they are.
class StreamDecoder {
 public:
  explicit StreamDecoder(Tokenizer tokenizer, bool skip_special_tokens = false);

  // Takes the next id; returns the text it completes (often empty while a character is pending).
  // An id without a token adds nothing (as in decode()); a negative id throws gerbil::Error.
  std::string step(int32_t id);
  // Returns whatever is still held back (an incomplete character comes out as U+FFFD), and resets.
  std::string finish();

 private:
  std::string decode_window() const;

  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  // The ids of the piece returned last (the first context_ of them), then the ids held back since.
  // Decoding them together keeps the decoder's view of where the text starts (Strip of a leading
  // space, Metaspace's first token) as it is in a full decode.
  std::vector<int32_t> window_;
  size_t context_ = 0;
  std::string emitted_;  // decode of the context ids alone
};

}  // namespace gerbil
