// Pre-tokenizers cut normalized text into the pieces ("words") that the model tokenizes one by
// one, and may rewrite them (byte-level alphabet, '▁' for spaces). Supported "type"s of
// tokenizer.json: Split, ByteLevel, Metaspace, Sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::tok {

class JsonField;

struct PreTokens {
  struct Piece {
    uint32_t begin, end;  // byte range in text
    bool at_start;        // begins at the start of the input (Metaspace prepend_scheme "first")
  };
  std::string text;
  std::vector<Piece> pieces;

  std::string_view view(const Piece& piece) const {
    return std::string_view(text).substr(piece.begin, piece.end - piece.begin);
  }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(PreTokens& tokens) const = 0;
};

// The settings of a Metaspace pre-tokenizer, which its decoder shares.
struct MetaspaceOptions {
  enum class Prepend { Always, First, Never };  // where a replacement goes in front of the text
  std::string replacement;                      // one character, usually '▁'
  Prepend prepend = Prepend::Always;
  bool split = true;  // cut the text before every replacement character
};
MetaspaceOptions parse_metaspace(const JsonField& field);

// The pre-tokenizer a tokenizer.json "pre_tokenizer" field describes; null for JSON null.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonField& field);

// GPT-2's ByteLevel pre-tokenizer with its own regex (what vocab.json + merges.txt files use).
std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex);

}  // namespace gerbil::tok
