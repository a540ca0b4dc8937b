// The Python operations jinja2 performs on values, with the sandbox's rules: attribute and item lookup
// that yield undefined instead of failing, slicing, iteration, `in`, and arithmetic. Errors are thrown
// as gerbil::Error without a line; the interpreter adds it.
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "template/runtime.h"
#include "template/value.h"

namespace gerbil::jinja {

// A function's arguments matched to its parameter names the way Python does: positional arguments first,
// then keywords. Unknown keywords, duplicates and (unless `extra_positional`) surplus arguments fail.
class BoundArgs {
 public:
  BoundArgs(std::string_view function, const Args& args, std::initializer_list<std::string_view> params,
            bool extra_positional = false);
  bool has(size_t i) const { return values_[i].has_value(); }
  const Value& required(size_t i) const;
  Value get(size_t i, Value fallback) const { return has(i) ? *values_[i] : std::move(fallback); }
  const std::vector<Value>& extra() const { return extra_; }  // surplus positional arguments

 private:
  std::string function_;
  std::vector<std::string_view> names_;
  std::vector<std::optional<Value>> values_;
  std::vector<Value> extra_;
};

// `object.name`: methods first (dict.items, str.split, ...), then items; undefined when absent.
Value get_attribute(const Value& object, std::string_view name);
// `object[key]`: items first, then methods when key is a string; undefined when absent.
Value get_item(const Value& object, const Value& key);
// `object[start:stop:step]` on lists, tuples and strings (by code point); absent bounds are none.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);
// Follows a dotted path as jinja2's attribute filters do ("a.b", "items.0").
Value get_path(const Value& object, std::string_view path);

// What `for x in value` visits: items, characters, dict keys; nothing for undefined.
std::vector<Value> iterate(const Value& value);
// Python len(); undefined has length 0.
size_t length(const Value& value);
// `item in container`.
bool contains(const Value& container, const Value& item);

// + - * / // % ** on Python semantics (bool is an int; str and list concatenate and repeat).
Value arithmetic(std::string_view op, const Value& a, const Value& b, const Runtime& runtime);
Value negate(const Value& value, bool minus);
// Python's `format % args` for str (%s %r %d %i %f %e %g %x %o %c %%).
std::string percent_format(std::string_view format, const Value& args);
// Python's str.format with automatic, numbered and named fields (no format specs).
std::string brace_format(std::string_view format, const Args& args);

// Fails with the message an undefined value carries when used where a value is needed.
void require_defined(const Value& value);
Value make_function(std::string name, std::function<Value(Runtime&, const Args&)> call);

}  // namespace gerbil::jinja
