// Normalizers: the first stage of encoding, applied to each stretch of text between added tokens.
// Supported "type"s of tokenizer.json: NFC, NFD, NFKC, NFKD, Prepend, Replace, Strip, Sequence.
#pragma once

#include <memory>
#include <string>

namespace gerbil::tok {

class JsonField;

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// The normalizer a tokenizer.json "normalizer" field describes; null for JSON null.
std::unique_ptr<Normalizer> make_normalizer(const JsonField& field);

enum class UnicodeForm { NFC, NFD, NFKC, NFKD };

// text in the given normalization form. Only the stretches around characters that normalization
// can touch go through utf8proc; ASCII and other inert characters are copied as they are.
std::string unicode_normalize(std::string_view text, UnicodeForm form);

}  // namespace gerbil::tok
