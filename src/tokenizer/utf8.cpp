#include "tokenizer/utf8.h"

#include <cstdint>
#include <cstring>

#include "gerbil/error.h"

namespace gerbil::tok {

namespace {

// Allowed range of the second byte for each lead byte (RFC 3629 table 3-7); later bytes are 80..BF.
struct LeadByte {
  int length;  // 0: never valid as a lead byte
  unsigned char second_lo, second_hi;
};

LeadByte lead_byte(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // no UTF-16 surrogates
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0, 0, 0};
}

}  // namespace

size_t utf8_sequence(std::string_view text, size_t pos, size_t* prefix) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  LeadByte lead = lead_byte(byte(pos));
  size_t valid = lead.length == 0 ? 0 : 1;
  for (int k = 1; k < lead.length; ++k) {
    if (pos + k >= text.size()) break;
    unsigned char lo = k == 1 ? lead.second_lo : 0x80, hi = k == 1 ? lead.second_hi : 0xBF;
    if (byte(pos + k) < lo || byte(pos + k) > hi) break;
    ++valid;
  }
  if (lead.length != 0 && valid == static_cast<size_t>(lead.length)) return valid;
  if (prefix) *prefix = valid == 0 ? 1 : valid;
  return 0;
}

size_t find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path: eight bytes at a time.
    while (pos + 8 <= text.size()) {
      uint64_t word;
      std::memcpy(&word, text.data() + pos, 8);
      if (word & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= text.size()) break;
    size_t length = utf8_sequence(text, pos);
    if (length == 0) return pos;
    pos += length;
  }
  return npos;
}

void check_utf8(std::string_view text, std::string_view what) {
  size_t bad = find_invalid_utf8(text);
  if (bad != npos)
    fail("{} is not valid UTF-8: byte 0x{:02X} at offset {}", what, static_cast<unsigned char>(text[bad]),
         bad);
}

std::string utf8_lossy(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t prefix = 0;
    size_t length = utf8_sequence(text, pos, &prefix);
    if (length) {
      out.append(text.substr(pos, length));
      pos += length;
    } else {
      out.append(kReplacementChar);
      pos += prefix;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

}  // namespace gerbil::tok
