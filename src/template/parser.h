// Parses the token list into statements, following jinja2's grammar and operator precedence. Unknown
// tags, filters and tests are syntax errors, as they are when jinja2 compiles a template.
#pragma once

#include <vector>

#include "template/ast.h"
#include "template/lexer.h"

namespace gerbil::jinja {

Body parse(const std::vector<Token>& tokens);

}  // namespace gerbil::jinja
