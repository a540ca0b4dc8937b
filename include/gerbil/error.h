// gerbil's one error type. Every failure the user can cause (a bad file, a wrong shape, a WebGPU
// validation error) is thrown as gerbil::Error with a message that names the culprit: the file,
// tensor, field, kernel or position involved.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace gerbil {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws gerbil::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace gerbil
