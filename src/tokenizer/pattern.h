// Patterns of the Split pre-tokenizer and the Replace normalizer/decoder: a literal string or a
// regular expression. HF tokenizers runs its regexes with Oniguruma; we run them with PCRE2 in
// UTF + UCP mode (JIT-compiled when available), translating the few constructs whose meaning differs.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::tok {

class JsonField;

class Regex {
 public:
  // Throws gerbil::Error with PCRE2's message and the offset in the pattern.
  explicit Regex(std::string_view pattern);

  // The first match at or after byte `from`; false when there is none. The text must be valid UTF-8.
  bool find(std::string_view text, size_t from, size_t& begin, size_t& end) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

// Oniguruma's \s and \S are the Unicode White_Space property; PCRE2's also take U+180E. Rewrites
// them to \p{White_Space} / \P{White_Space}, leaving escaped backslashes alone.
std::string translate_oniguruma(std::string_view pattern);

// One piece of a text cut by a pattern: [begin, end), and whether it is a match.
struct PatternPiece {
  size_t begin, end;
  bool is_match;
};

class Pattern {
 public:
  static Pattern literal(std::string text);
  static Pattern regex(std::string_view pattern);
  // {"String": "..."} or {"Regex": "..."}, as in tokenizer.json.
  static Pattern from_json(const JsonField& field);

  // Cuts text into consecutive pieces: the matches and the gaps between them, in order; empty text
  // gives no pieces. Mirrors HF's Pattern::find_matches (an empty literal matches nothing).
  void cut(std::string_view text, std::vector<PatternPiece>& pieces) const;

  // text with every match replaced by `content`.
  std::string replace(std::string_view text, std::string_view content) const;

 private:
  bool find(std::string_view text, size_t from, size_t& begin, size_t& end) const;

  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

}  // namespace gerbil::tok
