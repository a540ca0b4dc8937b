// jinja2's built-in filters, tests and global functions (with transformers' additions: tojson as
// json.dumps, raise_exception, strftime_now), and the Python methods of str, list and dict.
#pragma once

#include <optional>
#include <string_view>

#include "template/runtime.h"
#include "template/value.h"

namespace gerbil::jinja {

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
Value apply_filter(Runtime& runtime, std::string_view name, const Value& input, const Args& args);
bool apply_test(Runtime& runtime, std::string_view name, const Value& input, const Args& args);

// range, namespace, dict, raise_exception, strftime_now.
Dict global_functions();

// `self.name` as a bound method when `self` is a str, list or dict with such a method. Methods that
// would mutate (list.append, dict.update, ...) exist but fail when called, as in jinja2's sandbox.
std::optional<Value> find_method(const Value& self, std::string_view name);

}  // namespace gerbil::jinja
