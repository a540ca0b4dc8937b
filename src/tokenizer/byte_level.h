// GPT-2's byte-level alphabet: every byte is shown as a printable code point, so that any byte
// string is a string of vocabulary characters ('Ġ' is the space byte, 'Ċ' the newline).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gerbil::tok {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();

  // The UTF-8 encoding of the code point that stands for `byte`.
  std::string_view encode(uint8_t byte) const { return {chars_[byte].data(), lengths_[byte]}; }
  // Appends the byte-level form of every byte of text.
  void encode(std::string_view text, std::string& out) const;
  // The byte a code point stands for, or -1 when it is not in the alphabet.
  int decode(char32_t code_point) const { return code_point < kMaxCodePoint ? bytes_[code_point] : -1; }

 private:
  ByteLevelAlphabet();
  static constexpr char32_t kMaxCodePoint = 0x144;  // the alphabet uses U+0021..U+0143
  std::array<std::array<char, 2>, 256> chars_{};
  std::array<uint8_t, 256> lengths_{};
  std::array<int16_t, kMaxCodePoint> bytes_{};
};

}  // namespace gerbil::tok
