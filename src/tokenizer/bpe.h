// The BPE model: turns one pre-tokenized word into vocabulary ids by starting from its characters
// and repeatedly applying the lowest-ranked merge (leftmost first), exactly as HF tokenizers does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/int_map.h"
#include "tokenizer/string_map.h"

namespace gerbil::tok {

using Vocab = StringMap<int32_t>;  // token string -> id

// Reusable memory for one encode call: merge buffers and a cache of words already tokenized.
class BpeState {
 public:
  // Appends the cached ids of word to out, if it was tokenized before in this call.
  bool lookup(std::string_view word, std::vector<int32_t>& out) const;
  void remember(std::string_view word, const int32_t* ids, size_t count);

  struct Symbol {
    int32_t id;
    int32_t prev, next;  // neighbours in the word, -1 at the ends
    bool removed;
  };
  struct Merge {
    uint32_t rank;
    int32_t pos;                // index of the left symbol
    int32_t left_id, right_id;  // the pair as it was when queued
    int32_t new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Merge> queue;

 private:
  StringMap<std::pair<uint32_t, uint32_t>> cache_;  // word -> (offset, count) in cached_ids_
  std::vector<int32_t> cached_ids_;
};

struct BpeOptions {
  std::optional<std::string> unk_token;  // must be in the vocabulary
  bool fuse_unk = false;
  bool byte_fallback = false;  // unknown characters become <0xNN> byte tokens
  bool ignore_merges = false;  // a word that is itself in the vocabulary is one token
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
};

class Bpe {
 public:
  Bpe(Vocab vocab, BpeOptions options);

  // Adds the merge `a b` with the next rank. Returns the token it names that is not in the
  // vocabulary (a, b, or their concatenation), if any; the merge is then not added.
  std::optional<std::string> add_merge(std::string_view a, std::string_view b);

  // Appends the ids of word to out.
  void tokenize(std::string_view word, std::vector<int32_t>& out, BpeState& state) const;

  const Vocab& vocab() const { return vocab_; }

 private:
  static uint64_t pair_key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }
  std::optional<int32_t> find(std::string_view token) const;
  int32_t char_id(char32_t cp, std::string_view character) const;
  void tokenize_chunk(std::string_view chunk, std::vector<int32_t>& out, BpeState& state) const;
  void initial_symbols(std::string_view word, BpeState& state) const;
  void merge_all(BpeState& state) const;

  Vocab vocab_;
  BpeOptions options_;
  IntMap<std::pair<uint32_t, int32_t>> merges_;  // id pair -> (rank, id of the merged token)
  uint32_t next_rank_ = 0;
  std::vector<int32_t> small_char_ids_;  // id of each single-character token below U+0800, or -1
  int32_t byte_ids_[256];                // id of <0xNN>, or -1
  std::optional<int32_t> unk_id_;
  // No continuing-subword prefix or end-of-word suffix: symbols are the word's own characters.
  bool plain_ = true;
  // Code point pairs that occur inside some vocabulary token. Between two known characters that
  // form no such pair no merge can ever apply, so a long word splits there into parts that BPE
  // independently (and that the cache can share). Only for plain models, where parts are independent.
  IntMap<uint8_t> bigrams_;
  bool split_words_ = false;
};

}  // namespace gerbil::tok
