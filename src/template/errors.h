// Template errors. Every error names the template line: syntax errors when the template is parsed,
// runtime errors (undefined values, type errors, limits, raise_exception) when it is rendered.
#pragma once

#include <string>
#include <string_view>

#include "gerbil/error.h"

namespace gerbil::jinja {

// An error that already carries its template line; the interpreter passes it through unchanged.
class TemplateError : public Error {
 public:
  TemplateError(std::string message, int line) : Error(std::move(message)), line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

[[noreturn]] inline void syntax_error(int line, std::string_view message) {
  throw TemplateError(fmt::format("template syntax error at line {}: {}", line, message), line);
}

[[noreturn]] inline void runtime_error(int line, std::string_view message) {
  throw TemplateError(fmt::format("template error at line {}: {}", line, message), line);
}

// Thrown by the template's raise_exception(message); the interpreter adds the line.
class RaisedException : public Error {
 public:
  using Error::Error;
};

}  // namespace gerbil::jinja
