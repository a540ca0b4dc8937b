#include "template/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "gerbil/error.h"

namespace gerbil::jinja::text {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    auto byte = static_cast<unsigned char>(s[i]);
    int extra = byte < 0x80           ? 0
                : (byte >> 5) == 0x6  ? 1
                : (byte >> 4) == 0xe  ? 2
                : (byte >> 3) == 0x1e ? 3
                                      : -1;
    char32_t c = extra <= 0 ? byte : byte & (0x3f >> extra);
    bool valid = extra >= 0 && i + extra < s.size();
    for (int k = 1; valid && k <= extra; ++k) {
      auto next = static_cast<unsigned char>(s[i + k]);
      valid = (next & 0xc0) == 0x80;
      c = (c << 6) | (next & 0x3f);
    }
    if (!valid) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    out.push_back(c);
    i += extra + 1;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

std::string encode(std::u32string_view codepoints) {
  std::string out;
  out.reserve(codepoints.size());
  for (char32_t c : codepoints) append_utf8(out, c);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

static bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::u32string u = decode(s);
  std::vector<std::string> lines;
  size_t start = 0, i = 0;
  while (i < u.size()) {
    if (!is_line_break(u[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    i += (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1;
    lines.push_back(encode(std::u32string_view(u).substr(start, (keepends ? i : end) - start)));
    start = i;
  }
  if (start < u.size()) lines.push_back(encode(std::u32string_view(u).substr(start)));
  return lines;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, Side side) {
  std::u32string u = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strippable = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  size_t begin = 0, end = u.size();
  if (side != Side::Right)
    while (begin < end && strippable(u[begin])) ++begin;
  if (side != Side::Left)
    while (end > begin && strippable(u[end - 1])) --end;
  return encode(std::u32string_view(u).substr(begin, end - begin));
}

// Splitting on runs of whitespace, as str.split() / str.rsplit() with no separator.
static std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit, bool from_right) {
  std::u32string u = decode(s);
  if (from_right) std::reverse(u.begin(), u.end());
  std::vector<std::string> parts;
  size_t i = 0;
  while (true) {
    while (i < u.size() && is_space(u[i])) ++i;
    if (i == u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      // The remainder keeps its inner and trailing whitespace.
      std::u32string rest = u.substr(i);
      if (from_right) std::reverse(rest.begin(), rest.end());
      parts.push_back(encode(rest));
      break;
    }
    size_t start = i;
    while (i < u.size() && !is_space(u[i])) ++i;
    std::u32string word = u.substr(start, i - start);
    if (from_right) std::reverse(word.begin(), word.end());
    parts.push_back(encode(word));
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right) {
  if (!sep) return split_whitespace(s, maxsplit, from_right);
  if (sep->empty()) fail("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep->size()) break;
    size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::string replace(std::string_view s, std::string_view old, std::string_view replacement, int64_t count) {
  std::string out;
  int64_t done = 0;
  auto room = [&] { return count < 0 || done < count; };
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    std::u32string u = decode(s);
    for (char32_t c : u) {
      if (room()) out += replacement, ++done;
      append_utf8(out, c);
    }
    if (room()) out += replacement;
    return out;
  }
  size_t start = 0;
  while (room()) {
    size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += replacement;
    start = at + old.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

int64_t find(std::string_view s, std::string_view sub, bool from_right) {
  size_t at = from_right ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(length(s.substr(0, at)));
}

// Simple (one to one) case mapping for ASCII, Latin-1, Latin Extended-A, Latin Extended Additional,
// Greek and Cyrillic; other characters have no case here.
static char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0xb5) return c;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3cb && c != 0x3c2) ||
      (c >= 0x430 && c <= 0x44f))
    return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0x3c2) return 0x3a3;
  if (c == 0x131) return 'I';  // dotless i; its pair U+0130 lowercases to two characters, left as is
  if (c == 0x130) return c;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  bool odd = c & 1;
  if (((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177) || (c >= 0x1e00 && c <= 0x1e95) ||
       (c >= 0x1ea0 && c <= 0x1eff)) &&
      odd)
    return c - 1;
  if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) && !odd) return c - 1;
  return c;
}

static char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xc0) return c;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3ab && c != 0x3a2) ||
      (c >= 0x410 && c <= 0x42f))
    return c + 32;
  if (c == 0x178) return 0xff;
  if (c == 0x130 || c == 0x131) return c;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  bool odd = c & 1;
  if (((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177) || (c >= 0x1e00 && c <= 0x1e95) ||
       (c >= 0x1ea0 && c <= 0x1eff)) &&
      !odd)
    return c + 1;
  if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) && odd) return c + 1;
  return c;
}

static bool is_cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c; }

static std::string map_case(std::string_view s, char32_t (*map)(char32_t)) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decode(s)) append_utf8(out, map(c));
  return out;
}

std::string upper(std::string_view s) { return map_case(s, to_upper); }
std::string lower(std::string_view s) { return map_case(s, to_lower); }

std::string capitalize(std::string_view s) {
  std::u32string chars = decode(s);
  for (size_t i = 0; i < chars.size(); ++i) chars[i] = i == 0 ? to_upper(chars[i]) : to_lower(chars[i]);
  return encode(chars);
}

std::string title_words(std::string_view s) {
  // A cased character is uppercased after an uncased one and lowercased after a cased one.
  std::u32string chars = decode(s);
  bool previous_cased = false;
  for (char32_t& c : chars) {
    bool cased = is_cased(c);
    if (cased) c = previous_cased ? to_lower(c) : to_upper(c);
    previous_cased = cased;
  }
  return encode(chars);
}

std::string title_filter(std::string_view s) {
  auto is_break = [](char32_t c) {
    return is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::u32string chars = decode(s);
  bool word_start = true;
  for (char32_t& c : chars) {
    if (is_break(c)) {
      word_start = true;
      continue;
    }
    c = word_start ? to_upper(c) : to_lower(c);
    word_start = false;
  }
  return encode(chars);
}

// Python str.islower / str.isupper: some cased character, and none of the other case.
static bool all_cased_are(std::string_view s, bool want_lower) {
  bool any = false;
  for (char32_t c : decode(s)) {
    if (!is_cased(c)) continue;
    if ((to_lower(c) == c) != want_lower) return false;
    any = true;
  }
  return any;
}

bool is_lower(std::string_view s) { return all_cased_are(s, true); }
bool is_upper(std::string_view s) { return all_cased_are(s, false); }

// Characters Python's repr() escapes: controls, separators other than ' ', and common format characters.
static bool repr_escapes(char32_t c) {
  if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) return true;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) || c == 0x205f) return true;
  if ((c >= 0x2060 && c <= 0x206f) || c == 0x3000 || c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb)) return true;
  return (c >= 0xd800 && c <= 0xf8ff) || c >= 0xf0000;
}

std::string repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode(s)) {
    if (c == '\\' || c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (repr_escapes(c)) {
      out += c < 0x100     ? fmt::format("\\x{:02x}", static_cast<uint32_t>(c))
             : c < 0x10000 ? fmt::format("\\u{:04x}", static_cast<uint32_t>(c))
                           : fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
    } else {
      append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  for (char32_t c : decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
      }
    } else {
      append_utf8(out, c);
    }
  }
  out += '"';
  return out;
}

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  std::string sign = std::signbit(x) ? "-" : "";
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), std::fabs(x), std::chars_format::scientific);
  std::string sci(buf, result.ptr);  // d[.ddd]e[+-]XX, shortest round-trip digits
  size_t e_at = sci.find('e');
  std::string digits = sci.substr(0, e_at);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::stoi(sci.substr(e_at + 1));
  if (exponent < -4 || exponent >= 16) {
    std::string mantissa = digits.substr(0, 1);
    if (digits.size() > 1) mantissa += "." + digits.substr(1);
    return fmt::format("{}{}e{}{:02d}", sign, mantissa, exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(-exponent - 1, '0') + digits;
  } else if (static_cast<int>(digits.size()) <= exponent + 1) {
    out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
  }
  return sign + out;
}

}  // namespace gerbil::jinja::text
