#include "template/lexer.h"

#include <charconv>

#include "template/errors.h"
#include "template/text.h"

namespace gerbil::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// "\r\n" and "\r" become "\n"; one trailing newline goes (jinja2's keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's unicode-escape decoding of a string literal's body, as jinja2 applies it.
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    char c = body[++i];
    auto hex_escape = [&](size_t digits) {
      uint32_t code = 0;
      for (size_t k = 1; k <= digits; ++k) {
        if (i + k >= body.size() || !is_hex(body[i + k]))
          syntax_error(line, fmt::format("truncated \\{} escape in string literal", c));
        char h = body[i + k];
        code = code * 16 + (is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      if (code > 0x10ffff) syntax_error(line, "illegal Unicode character in string literal");
      text::append_utf8(out, code);
      i += digits;
    };
    switch (c) {
      case '\n':
        break;  // line continuation
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
        hex_escape(2);
        break;
      case 'u':
        hex_escape(4);
        break;
      case 'U':
        hex_escape(8);
        break;
      case 'N':
        syntax_error(line, "\\N{...} escapes are not supported in string literals");
      default:
        if (c >= '0' && c <= '7') {
          uint32_t code = c - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            code = code * 8 + (body[++i] - '0');
          text::append_utf8(out, code);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t open = find_tag_start(pos_);
      if (open == std::string::npos) {
        emit_text(src_.substr(pos_), line_);
        break;
      }
      char kind = src_[open + 1];
      char sign =
          open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+') ? src_[open + 2] : 0;
      emit_text(strip_before_tag(src_.substr(pos_, open - pos_), kind, sign), line_);
      advance_to(open + 2 + (sign ? 1 : 0));
      if (kind == '#') {
        lex_comment();
      } else if (kind == '%' && lex_raw()) {
        continue;
      } else {
        lex_tag(kind);
      }
    }
    tokens_.push_back({TokenType::End, "", line_});
    return std::move(tokens_);
  }

 private:
  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the last tag ended with a newline (or nothing came before)
  std::vector<Token> tokens_;

  size_t find_tag_start(size_t from) const {
    for (size_t at = src_.find('{', from); at != std::string::npos; at = src_.find('{', at + 1))
      if (at + 1 < src_.size() && (src_[at + 1] == '{' || src_[at + 1] == '%' || src_[at + 1] == '#'))
        return at;
    return std::string::npos;
  }

  void advance_to(size_t to) {
    for (size_t i = pos_; i < to; ++i) line_ += src_[i] == '\n';
    pos_ = to;
  }

  bool starts_with(std::string_view s) const { return std::string_view(src_).substr(pos_, s.size()) == s; }

  // Length of the whitespace character at `at` (0 if there is none), Python's \s.
  size_t space_at(size_t at) const {
    if (at >= src_.size()) return 0;
    auto byte = static_cast<unsigned char>(src_[at]);
    size_t width = byte < 0x80 ? 1 : byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
    std::u32string c = text::decode(std::string_view(src_).substr(at, width));
    return c.size() == 1 && text::is_space(c[0]) ? width : 0;
  }

  void emit_text(std::string text, int line) {
    if (!text.empty()) tokens_.push_back({TokenType::Text, std::move(text), line});
  }

  // Whitespace control before a tag: `{%-` strips all whitespace before it; lstrip_blocks strips the
  // spaces and tabs between the start of the line and a block or comment tag.
  std::string strip_before_tag(std::string text, char kind, char sign) const {
    if (sign == '-') return text::strip(text, std::nullopt, text::Side::Right);
    if (sign == '+' || kind == '{') return text;
    size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (line_start == 0 && !line_starting_) return text;
    if (text.find_first_not_of(" \t", line_start) != std::string::npos) return text;
    return text.substr(0, line_start);
  }

  // Whitespace control after a tag: `-%}` strips all whitespace after it; trim_blocks removes the newline
  // right after a block or comment tag unless it ends with `+%}`.
  void strip_after_tag(char sign, bool trim_newline) {
    size_t start = pos_;
    if (sign == '-') {
      size_t end = pos_;
      while (size_t width = space_at(end)) end += width;
      advance_to(end);
    } else if (sign != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
    line_starting_ = pos_ > start && src_[pos_ - 1] == '\n';
  }

  void lex_comment() {
    int start_line = line_;
    size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) syntax_error(start_line, "missing end of comment tag");
    char sign = close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    advance_to(close + 2);
    strip_after_tag(sign, true);
  }

  // `{% raw %}...{% endraw %}`: returns false (consuming nothing) when the block tag is not `raw`.
  bool lex_raw() {
    size_t after;
    char sign;
    // jinja2 recognises `{% raw %}` and `{% raw -%}` but not `{% raw +%}` (an unknown tag 'raw' then).
    if (!match_tag_word(pos_, "raw", after, sign) || sign == '+') return false;
    advance_to(after);
    strip_after_tag(sign, false);  // jinja2 applies no trim_blocks after `raw`
    int content_line = line_;
    size_t content_start = pos_;
    for (size_t open = src_.find("{%", pos_); open != std::string::npos; open = src_.find("{%", open + 2)) {
      size_t inner = open + 2;
      char open_sign = inner < src_.size() && (src_[inner] == '-' || src_[inner] == '+') ? src_[inner] : 0;
      size_t end;
      char close_sign;
      if (!match_tag_word(inner + (open_sign ? 1 : 0), "endraw", end, close_sign)) continue;
      std::string content = src_.substr(content_start, open - content_start);
      emit_text(strip_before_tag(std::move(content), '%', open_sign), content_line);
      advance_to(end);
      strip_after_tag(close_sign, true);
      return true;
    }
    syntax_error(content_line, "missing end of raw block ({% endraw %})");
  }

  // Matches `\s*word\s*[-+]?%}` at `at`; sets the position after it and the sign before `%}`.
  bool match_tag_word(size_t at, std::string_view word, size_t& after, char& sign) const {
    while (size_t width = space_at(at)) at += width;
    if (std::string_view(src_).substr(at, word.size()) != word) return false;
    at += word.size();
    while (size_t width = space_at(at)) at += width;
    sign = at < src_.size() && (src_[at] == '-' || src_[at] == '+') ? src_[at] : 0;
    if (sign) ++at;
    if (std::string_view(src_).substr(at, 2) != "%}") return false;
    after = at + 2;
    return true;
  }

  void lex_tag(char kind) {
    bool block = kind == '%';
    int start_line = line_;
    tokens_.push_back({block ? TokenType::BlockBegin : TokenType::VarBegin, "", line_});
    std::string brackets;  // open brackets awaiting their closing one
    while (true) {
      while (size_t width = space_at(pos_)) advance_to(pos_ + width);
      if (pos_ >= src_.size())
        syntax_error(start_line, block ? "unexpected end of template, missing '%}'"
                                       : "unexpected end of template, missing '}}'");
      if (brackets.empty() && lex_tag_end(block)) return;
      lex_expression_token(brackets);
    }
  }

  bool lex_tag_end(bool block) {
    std::string_view close = block ? "%}" : "}}";
    char sign = 0;
    if ((src_[pos_] == '-' || (block && src_[pos_] == '+')) &&
        std::string_view(src_).substr(pos_ + 1, 2) == close)
      sign = src_[pos_];
    else if (!starts_with(close))
      return false;
    tokens_.push_back({block ? TokenType::BlockEnd : TokenType::VarEnd, "", line_});
    advance_to(pos_ + (sign ? 3 : 2));
    strip_after_tag(sign, block);
    return true;
  }

  void lex_expression_token(std::string& brackets) {
    char c = src_[pos_];
    if (is_digit(c)) return lex_number();
    if (is_name_start(c)) {
      size_t end = pos_;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      tokens_.push_back({TokenType::Name, src_.substr(pos_, end - pos_), line_});
      advance_to(end);
      return;
    }
    if (c == '\'' || c == '"') return lex_string();
    static const char* const two_char[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two_char) {
      if (starts_with(op)) {
        tokens_.push_back({TokenType::Operator, op, line_});
        advance_to(pos_ + 2);
        return;
      }
    }
    if (std::string_view("+-*/%~[](){}<>=.:|,;").find(c) == std::string_view::npos)
      syntax_error(line_, fmt::format("unexpected char '{}'", c));
    if (c == '(' || c == '[' || c == '{') brackets += c;
    if (c == ')' || c == ']' || c == '}') {
      char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty() || brackets.back() != open) syntax_error(line_, fmt::format("unexpected '{}'", c));
      brackets.pop_back();
    }
    tokens_.push_back({TokenType::Operator, std::string(1, c), line_});
    advance_to(pos_ + 1);
  }

  // Digits with single underscores between them, as jinja2's number literals allow.
  size_t scan_digits(size_t at, bool (*digit)(char)) const {
    size_t end = at;
    while (end < src_.size() && (digit(src_[end]) || (src_[end] == '_' && end > at && end + 1 < src_.size() &&
                                                      digit(src_[end + 1]))))
      ++end;
    return end;
  }

  void lex_number() {
    if (src_[pos_] == '0' && pos_ + 2 < src_.size()) {
      char prefix = src_[pos_ + 1] | 0x20;
      int base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : prefix == 'b' ? 2 : 0;
      if (base) return lex_prefixed_integer(base);
    }
    size_t end = scan_digits(pos_, is_digit);
    bool is_float = false;
    bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';  // `x.0.1` is two subscripts, not a float
    if (!after_dot && end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      end = scan_digits(end + 1, is_digit);
      is_float = true;
    }
    if (!after_dot && end < src_.size() && (src_[end] | 0x20) == 'e') {
      size_t exp = end + 1;
      if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
      if (exp < src_.size() && is_digit(src_[exp])) {
        end = scan_digits(exp, is_digit);
        is_float = true;
      }
    }
    std::string digits;
    for (size_t i = pos_; i < end; ++i)
      if (src_[i] != '_') digits += src_[i];
    Token token{is_float ? TokenType::Float : TokenType::Integer, src_.substr(pos_, end - pos_), line_};
    const char* first = digits.data();
    const char* last = first + digits.size();
    auto result = is_float ? std::from_chars(first, last, token.float_value)
                           : std::from_chars(first, last, token.int_value);
    if (result.ec != std::errc() || result.ptr != last)
      syntax_error(line_, fmt::format("number literal {} is out of range", token.text));
    tokens_.push_back(std::move(token));
    advance_to(end);
  }

  void lex_prefixed_integer(int base) {
    auto digit = base == 16  ? is_hex
                 : base == 8 ? +[](char c) { return c >= '0' && c <= '7'; }
                             : +[](char c) { return c == '0' || c == '1'; };
    size_t start = pos_ + 2;
    if (start < src_.size() && src_[start] == '_') ++start;
    size_t end = scan_digits(start, digit);
    if (end == start) syntax_error(line_, "invalid number literal");
    std::string digits;
    for (size_t i = start; i < end; ++i)
      if (src_[i] != '_') digits += src_[i];
    Token token{TokenType::Integer, src_.substr(pos_, end - pos_), line_};
    auto result = std::from_chars(digits.data(), digits.data() + digits.size(), token.int_value, base);
    if (result.ec != std::errc())
      syntax_error(line_, fmt::format("number literal {} is out of range", token.text));
    tokens_.push_back(std::move(token));
    advance_to(end);
  }

  void lex_string() {
    char quote = src_[pos_];
    int start_line = line_;
    size_t end = pos_ + 1;
    while (end < src_.size() && src_[end] != quote) end += src_[end] == '\\' ? 2 : 1;
    if (end >= src_.size()) syntax_error(start_line, "unterminated string literal");
    std::string value = unescape(std::string_view(src_).substr(pos_ + 1, end - pos_ - 1), start_line);
    tokens_.push_back({TokenType::String, std::move(value), start_line});
    advance_to(end + 1);
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace gerbil::jinja
