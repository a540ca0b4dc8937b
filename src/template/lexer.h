// Splits a template into text and tag tokens the way jinja2's lexer does with transformers' settings
// (trim_blocks and lstrip_blocks on, keep_trailing_newline off): newlines are normalised to "\n", one
// trailing newline is dropped, whitespace control (`{%-`, `-%}`, `{%+`, `+%}`) is applied to the text
// tokens, comments and raw blocks are resolved here, and tag contents become expression tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::jinja {

enum class TokenType {
  Text,        // literal output
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifiers and keywords
  String,      // text holds the unescaped value
  Integer,
  Float,
  Operator,  // text holds the operator
  End,       // end of the template
};

struct Token {
  TokenType type;
  std::string text;
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Throws gerbil::Error ("template syntax error at line N: ...") on unterminated tags, comments and
// strings, unbalanced brackets and unknown characters.
std::vector<Token> tokenize(std::string_view source);

}  // namespace gerbil::jinja
