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
// U+FFFD replaces, as in Rust's String::from_utf8_lossy. `truncated` says the prefix was cut
// short by the end of the text rather than by a bad byte.
size_t utf8_sequence(std::string_view text, size_t pos, size_t* prefix = nullptr,
                     bool* truncated = nullptr);

// Byte offset of the first invalid UTF-8 sequence in text, or npos when it is all valid.
size_t find_invalid_utf8(std::string_view text);

// Throws gerbil::Error naming `what` and the offset of the first invalid byte.
void check_utf8(std::string_view text, std::string_view what);

// Whether text ends inside a multi-byte character that more bytes could still complete.
bool ends_with_incomplete_utf8(std::string_view text);

// text with every invalid sequence replaced by U+FFFD (Rust String::from_utf8_lossy).
std::string utf8_lossy(std::string_view text);

// Decodes the code point at text[pos] (which must be valid UTF-8) and advances pos past it.
char32_t next_code_point(std::string_view text, size_t& pos);

void append_utf8(std::string& out, char32_t code_point);

// Unicode White_Space, the set Rust's char::is_whitespace and regex \s use.
bool is_white_space(char32_t code_point);

}  // namespace gerbil::tok
