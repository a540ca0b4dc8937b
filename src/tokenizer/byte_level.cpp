#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace gerbil::tok {

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  bytes_.fill(-1);
  // Printable Latin-1 bytes stand for themselves; the others (controls, space, 0x7F-0xA0, 0xAD)
  // take U+0100, U+0101, ... in byte order.
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    char32_t cp = printable(b) ? static_cast<char32_t>(b) : next++;
    std::string utf8;
    append_utf8(utf8, cp);
    lengths_[b] = static_cast<uint8_t>(utf8.size());
    for (size_t i = 0; i < utf8.size(); ++i) chars_[b][i] = utf8[i];
    bytes_[cp] = static_cast<int16_t>(b);
  }
}

void ByteLevelAlphabet::encode(std::string_view text, std::string& out) const {
  // Every byte takes at most 2 bytes of UTF-8: write through a pointer, then trim.
  size_t start = out.size();
  out.resize(start + 2 * text.size());
  char* end = out.data() + start;
  for (char c : text) {
    uint8_t byte = static_cast<uint8_t>(c);
    end[0] = chars_[byte][0];
    end[1] = chars_[byte][1];
    end += lengths_[byte];
  }
  out.resize(static_cast<size_t>(end - out.data()));
}

}  // namespace gerbil::tok
