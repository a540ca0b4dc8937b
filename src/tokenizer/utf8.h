// UTF-8 helpers for the tokenizer: validation that reports where a string goes wrong, code point
// iteration, and the lossy conversion (invalid bytes become U+FFFD) that HF decoders apply.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gerbil::tok {

inline constexpr size_t npos = std::string_view::npos;
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at text[pos], or 0 when it is not valid. On 0,
// `prefix` is the length of the longest valid-so-far prefix (at least 1): the bytes that one
// U+FFFD replaces, as in Rust's String::from_utf8_lossy.
size_t utf8_sequence(std::string_view text, size_t pos, size_t* prefix = nullptr);

// Byte offset of the first invalid UTF-8 sequence in text, or npos when it is all valid.
size_t find_invalid_utf8(std::string_view text);

// Throws gerbil::Error naming `what` and the offset of the first invalid byte.
void check_utf8(std::string_view text, std::string_view what);

// text with every invalid sequence replaced by U+FFFD (Rust String::from_utf8_lossy).
std::string utf8_lossy(std::string_view text);

// Decodes the code point at text[pos] (which must be valid UTF-8) and advances pos past it.
inline char32_t next_code_point(std::string_view text, size_t& pos) {
  auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[i])); };
  char32_t b0 = byte(pos);
  if (b0 < 0x80) {
    pos += 1;
    return b0;
  }
  if (b0 < 0xE0) {
    pos += 2;
    return ((b0 & 0x1F) << 6) | (byte(pos - 1) & 0x3F);
  }
  if (b0 < 0xF0) {
    pos += 3;
    return ((b0 & 0x0F) << 12) | ((byte(pos - 2) & 0x3F) << 6) | (byte(pos - 1) & 0x3F);
  }
  pos += 4;
  return ((b0 & 0x07) << 18) | ((byte(pos - 3) & 0x3F) << 12) | ((byte(pos - 2) & 0x3F) << 6) |
         (byte(pos - 1) & 0x3F);
}

void append_utf8(std::string& out, char32_t code_point);

// Unicode White_Space, the set Rust's char::is_whitespace and regex \s use.
bool is_white_space(char32_t code_point);

}  // namespace gerbil::tok
