#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include <utf8proc.h>

#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace gerbil::tok {

namespace {

// Rust regex's \w: alphabetic, marks, decimal digits, connector punctuation and joiners.
bool is_word_char(char32_t cp) {
  if (cp == 0x200C || cp == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// Start of the last character of text (which must not be empty).
size_t last_char_start(std::string_view text) {
  size_t pos = text.size() - 1;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

bool ends_with_word(std::string_view text) {
  if (text.empty()) return false;
  size_t pos = last_char_start(text);
  return is_word_char(next_code_point(text, pos));
}

bool starts_with_word(std::string_view text) {
  size_t pos = 0;
  return !text.empty() && is_word_char(next_code_point(text, pos));
}

// Where the run of white space that ends text begins.
size_t white_space_run_start(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = last_char_start(text.substr(0, end)), pos = start;
    if (!is_white_space(next_code_point(text, pos))) break;
    end = start;
  }
  return end;
}

// Length of the run of white space that starts text.
size_t white_space_run_length(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!is_white_space(next_code_point(text, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view key, int32_t token_index) {
  int32_t node = 0;
  for (char c : key) {
    uint64_t edge = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(c);
    auto [it, inserted] = edges_.try_emplace(edge, static_cast<int32_t>(nodes_.size()));
    if (inserted) nodes_.push_back(-1);
    node = it->second;
  }
  nodes_[node] = token_index;  // a repeated key: the last token wins
  first_bytes_[static_cast<unsigned char>(key[0])] = true;
}

std::pair<size_t, int32_t> AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == edges_.end()) break;
    node = it->second;
    if (nodes_[node] >= 0) best = {i + 1 - pos, nodes_[node]};
  }
  return best;
}

void AddedVocabulary::add_tokens(std::vector<AddedToken> tokens, const StringMap<int32_t>& model_vocab,
                                 const Normalizer* normalizer) {
  int32_t next_id = static_cast<int32_t>(model_vocab.size());
  for (const AddedToken& token : tokens_)
    if (token.id >= next_id) next_id = token.id + 1;
  StringMap<int32_t> index;  // content -> position in tokens_
  for (size_t i = 0; i < tokens_.size(); ++i)
    index.insert_or_assign(tokens_[i].content, static_cast<int32_t>(i));
  for (AddedToken& token : tokens) {
    if (token.content.empty()) continue;  // HF ignores empty added tokens
    if (const int32_t* known = index.find(token.content)) {
      AddedToken& previous = tokens_[*known];
      token.id = previous.id;
      token.special |= previous.special;
      previous = std::move(token);
      continue;
    }
    const int32_t* model_id = model_vocab.find(token.content);
    token.id = model_id ? *model_id : next_id++;
    index.insert_or_assign(token.content, static_cast<int32_t>(tokens_.size()));
    tokens_.push_back(std::move(token));
  }
  raw_ = Trie();
  normalized_ = Trie();
  decode_texts_.clear();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    std::string form = tokens_[i].content;
    if (tokens_[i].normalized && normalizer) normalizer->normalize(form);
    if (!form.empty()) (tokens_[i].normalized ? normalized_ : raw_).insert(form, static_cast<int32_t>(i));
    decode_texts_.push_back(std::move(form));
  }
}

void AddedVocabulary::split(const Trie& trie, std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  if (text.empty()) return;
  size_t covered = 0;  // end of the last segment
  size_t pos = 0;
  while (!trie.empty() && pos < text.size()) {
    if (!trie.may_start_with(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    auto [length, index] = trie.longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    // The search resumes after the match whatever the options below make of it, as in HF.
    size_t start = pos, stop = pos + length;
    pos = stop;
    const AddedToken& token = tokens_[index];
    if (token.single_word && (ends_with_word(text.substr(0, start)) || starts_with_word(text.substr(stop))))
      continue;
    if (token.lstrip) start = std::max(white_space_run_start(text.substr(0, start)), covered);
    if (token.rstrip) stop += white_space_run_length(text.substr(stop));
    if (covered < start) out.push_back({covered, start, -1});
    out.push_back({start, stop, token.id});
    covered = stop;
  }
  if (covered != text.size()) out.push_back({covered, text.size(), -1});
}

}  // namespace gerbil::tok
