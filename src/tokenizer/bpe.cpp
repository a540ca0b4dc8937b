#include "tokenizer/bpe.h"

#include <algorithm>

#include "gerbil/error.h"
#include "tokenizer/utf8.h"

namespace gerbil::tok {

namespace {

// HF caches only words shorter than this, and at most this many of them.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCachedWords = 1 << 16;

constexpr char32_t kSmallCharLimit = 0x800;  // code points with a direct id table

// Words up to this long go to the cache whole; longer ones are first split where no merge applies.
constexpr size_t kSplitWordBytes = 32;

uint64_t bigram_key(char32_t a, char32_t b) { return (static_cast<uint64_t>(a) << 21) | b; }

// Min-heap order of pending merges: lowest rank first, then leftmost.
bool later_merge(const BpeState::Merge& a, const BpeState::Merge& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

bool BpeState::lookup(std::string_view word, std::vector<int32_t>& out) const {
  const std::pair<uint32_t, uint32_t>* span = cache_.find(word);
  if (!span) return false;
  out.insert(out.end(), cached_ids_.begin() + span->first, cached_ids_.begin() + span->first + span->second);
  return true;
}

void BpeState::remember(std::string_view word, const int32_t* ids, size_t count) {
  if (word.size() >= kMaxCachedWordBytes || cache_.size() >= kMaxCachedWords) return;
  cache_.insert_or_assign(word, {static_cast<uint32_t>(cached_ids_.size()), static_cast<uint32_t>(count)});
  cached_ids_.insert(cached_ids_.end(), ids, ids + count);
}

Bpe::Bpe(Vocab vocab, BpeOptions options) : vocab_(std::move(vocab)), options_(std::move(options)) {
  plain_ = options_.continuing_subword_prefix.empty() && options_.end_of_word_suffix.empty();
  small_char_ids_.assign(kSmallCharLimit, -1);
  size_t single_chars = 0;
  vocab_.for_each([&](std::string_view token, int32_t id) {
    size_t pos = 0, count = 0;
    char32_t previous = 0;
    while (pos < token.size()) {
      char32_t cp = next_code_point(token, pos);
      if (count++ > 0 && plain_) bigrams_.insert_or_assign(bigram_key(previous, cp), 1);
      previous = cp;
    }
    if (count == 1 && previous < kSmallCharLimit) small_char_ids_[previous] = id;
    single_chars += count == 1;
  });
  // Byte-level vocabularies hold a good share (~15%) of all pairs of their 256 characters, so their
  // words practically never split and looking would only cost time. SentencePiece vocabularies of
  // thousands of characters hold a tiny share (~0.03%), and their unsplit text splits into words.
  split_words_ = plain_ && bigrams_.size() * 100 < single_chars * single_chars;
  if (!split_words_) bigrams_ = {};
  for (int b = 0; b < 256; ++b) byte_ids_[b] = find(fmt::format("<0x{:02X}>", b)).value_or(-1);
  if (options_.unk_token) unk_id_ = find(*options_.unk_token);
  merges_.reserve(vocab_.size());
}

std::optional<int32_t> Bpe::find(std::string_view token) const {
  const int32_t* id = vocab_.find(token);
  if (!id) return std::nullopt;
  return *id;
}

std::optional<std::string> Bpe::add_merge(std::string_view a, std::string_view b) {
  std::optional<int32_t> a_id = find(a), b_id = find(b);
  if (!a_id) return std::string(a);
  if (!b_id) return std::string(b);
  // b carries the continuing-subword prefix, which the merged token has only once, in front.
  std::string merged(a);
  merged += b.substr(std::min(options_.continuing_subword_prefix.size(), b.size()));
  std::optional<int32_t> merged_id = find(merged);
  if (!merged_id) return merged;
  // A repeated pair keeps its last rank, like HF's map built from the list.
  merges_.insert_or_assign(pair_key(*a_id, *b_id), {next_rank_++, *merged_id});
  return std::nullopt;
}

int32_t Bpe::char_id(char32_t cp, std::string_view character) const {
  if (cp < kSmallCharLimit) return small_char_ids_[cp];
  return find(character).value_or(-1);
}

void Bpe::initial_symbols(std::string_view word, BpeState& state) const {
  state.symbols.clear();
  auto add = [&](int32_t id) {
    int32_t index = static_cast<int32_t>(state.symbols.size());
    state.symbols.push_back({id, index - 1, -1, false});
    if (index > 0) state.symbols[index - 1].next = index;
  };
  int32_t pending_unk = -1;  // an unknown token not yet added, kept to fuse the next ones into
  std::string affixed;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t start = pos;
    char32_t cp = next_code_point(word, pos);
    std::string_view character = word.substr(start, pos - start);
    std::optional<int32_t> id;
    if (plain_) {
      if (int32_t known = char_id(cp, character); known >= 0) id = known;
    } else {
      affixed.clear();
      if (start > 0) affixed += options_.continuing_subword_prefix;
      affixed += character;
      if (pos == word.size()) affixed += options_.end_of_word_suffix;
      id = find(affixed);
    }
    if (id) {
      if (pending_unk >= 0) add(pending_unk);
      pending_unk = -1;
      add(*id);
      continue;
    }
    std::string_view bytes = plain_ ? character : std::string_view(affixed);
    if (options_.byte_fallback &&
        std::all_of(bytes.begin(), bytes.end(), [&](char c) { return byte_ids_[uint8_t(c)] >= 0; })) {
      // HF leaves a pending unknown token in place here, so it lands after these bytes.
      for (char c : bytes) add(byte_ids_[static_cast<uint8_t>(c)]);
      continue;
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !options_.fuse_unk) add(pending_unk);
      pending_unk = *unk_id_;
    }
    // Without an unknown token HF drops the character.
  }
  if (pending_unk >= 0) add(pending_unk);
}

void Bpe::merge_all(BpeState& state) const {
  std::vector<BpeState::Symbol>& symbols = state.symbols;
  std::vector<BpeState::Merge>& queue = state.queue;
  // Queues the merge of the pair starting at symbol `left`, if there is one.
  auto queue_pair = [&](int32_t left) {
    int32_t right = symbols[left].next;
    if (right < 0) return;
    int32_t left_id = symbols[left].id, right_id = symbols[right].id;
    if (const auto* merge = merges_.find(pair_key(left_id, right_id)))
      queue.push_back({merge->first, left, left_id, right_id, merge->second});
  };
  queue.clear();
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) queue_pair(i);
  std::make_heap(queue.begin(), queue.end(), later_merge);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), later_merge);
    BpeState::Merge top = queue.back();
    queue.pop_back();
    // Skip a stale entry: a merge since it was queued changed one side of the pair (and so the
    // token the pair would form, since merged tokens only grow).
    BpeState::Symbol& left = symbols[top.pos];
    if (left.removed || left.id != top.left_id || left.next < 0 || symbols[left.next].id != top.right_id)
      continue;
    BpeState::Symbol& right = symbols[left.next];
    left.id = top.new_id;
    right.removed = true;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    for (int32_t start : {left.prev, top.pos}) {
      if (start < 0) continue;
      size_t size = queue.size();
      queue_pair(start);
      if (queue.size() > size) std::push_heap(queue.begin(), queue.end(), later_merge);
    }
  }
}

void Bpe::tokenize_chunk(std::string_view chunk, std::vector<int32_t>& out, BpeState& state) const {
  if (state.lookup(chunk, out)) return;
  initial_symbols(chunk, state);
  merge_all(state);
  size_t first = out.size();
  for (const BpeState::Symbol& symbol : state.symbols)
    if (!symbol.removed) out.push_back(symbol.id);
  state.remember(chunk, out.data() + first, out.size() - first);
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out, BpeState& state) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (std::optional<int32_t> id = find(word)) {
      out.push_back(*id);
      return;
    }
  }
  if (!split_words_ || word.size() <= kSplitWordBytes) return tokenize_chunk(word, out, state);
  size_t chunk = 0, pos = 0;
  char32_t previous = 0;
  bool previous_known = false;
  while (pos < word.size()) {
    size_t start = pos;
    char32_t cp = next_code_point(word, pos);
    bool known = char_id(cp, word.substr(start, pos - start)) >= 0;
    if (start > chunk && previous_known && known && !bigrams_.contains(bigram_key(previous, cp))) {
      tokenize_chunk(word.substr(chunk, start - chunk), out, state);
      chunk = start;
    }
    previous = cp;
    previous_known = known;
  }
  tokenize_chunk(word.substr(chunk), out, state);
}

}  // namespace gerbil::tok
