// Added tokens (special tokens such as <|im_start|>, and extra ones such as <think>): they are found
// in the text before any normalization or BPE and map straight to their id, following HF's
// AddedVocabulary: leftmost-longest matching, then the single_word / lstrip / rstrip options.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/string_map.h"

namespace gerbil::tok {

class Normalizer;

struct AddedToken {
  int32_t id = 0;  // assigned by AddedVocabulary::add_tokens
  std::string content;
  bool special = false;      // skipped by decode(skip_special_tokens=true)
  bool single_word = false;  // only matches when not inside a word
  bool lstrip = false;       // swallows the white space on its left
  bool rstrip = false;       // swallows the white space on its right
  bool normalized = false;   // matched against normalized text instead of the raw input
};

// A stretch of text: either plain text to tokenize (id < 0) or an added token.
struct Segment {
  size_t begin, end;
  int32_t id;
};

class AddedVocabulary {
 public:
  // Adds tokens as HF's AddedVocabulary::add_tokens does, which also decides their ids: a token
  // added before or in the model vocabulary keeps that id; a new one takes the next id after the
  // model's `model_vocab_size` entries (HF only warns when tokenizer.json says otherwise). A token
  // added twice takes the later options, and is special if either was. A token with `normalized`
  // is matched (and decoded) in its normalized form.
  void add_tokens(std::vector<AddedToken> tokens, const StringMap<int32_t>& model_vocab,
                  const Normalizer* normalizer);

  // Cuts text into segments covering it, with the tokens that are matched on raw input.
  void split_raw(std::string_view text, std::vector<Segment>& out) const { split(raw_, text, out); }
  // Cuts normalized text, with the tokens that are matched on normalized text.
  void split_normalized(std::string_view text, std::vector<Segment>& out) const {
    split(normalized_, text, out);
  }

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // The text the decoder sees for each added token (its normalized form where it has one).
  const std::string& decode_text(size_t index) const { return decode_texts_[index]; }

 private:
  // A byte trie of token strings for leftmost-longest search.
  class Trie {
   public:
    void insert(std::string_view key, int32_t token_index);
    bool empty() const { return nodes_.size() <= 1; }
    // Longest key starting at text[pos]: its length and token index, or {0, -1}.
    std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;
    bool may_start_with(unsigned char byte) const { return first_bytes_[byte]; }

   private:
    std::vector<int32_t> nodes_{-1};               // token index ending at each node, or -1
    std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
    std::array<bool, 256> first_bytes_{};
  };

  void split(const Trie& trie, std::string_view text, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  std::vector<std::string> decode_texts_;
  Trie raw_, normalized_;
};

}  // namespace gerbil::tok
