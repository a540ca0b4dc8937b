#include "template/builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <ctime>
#include <map>

#include "template/errors.h"
#include "template/operations.h"
#include "template/text.h"

namespace gerbil::jinja {
namespace {

using FilterFn = Value (*)(Runtime&, const Value&, const Args&);
using TestFn = bool (*)(Runtime&, const Value&, const Args&);
using MethodFn = Value (*)(Runtime&, const Value&, const Args&);

// jinja2 filters that take text convert their input with str(); undefined becomes "".
std::string soft_str(const Value& value) { return value.str(); }

int64_t int_arg(const Value& value, std::string_view what) {
  if (!value.is_int() && !value.is_bool()) fail("{} must be an integer, not {}", what, value.type_name());
  return value.as_int();
}

// An indentation given as a width (spaces) or as the text itself, as tojson and indent accept.
std::string indentation(const Runtime& runtime, const Value& width) {
  if (width.is_string()) return width.as_string();
  int64_t n = std::max<int64_t>(0, int_arg(width, "indent width"));
  runtime.check_size(static_cast<size_t>(n));
  return std::string(n, ' ');
}

std::optional<std::string> optional_string(const BoundArgs& bound, size_t i) {
  if (!bound.has(i) || bound.required(i).is_none()) return std::nullopt;
  const Value& value = bound.required(i);
  if (!value.is_string()) fail("expected a string argument, not {}", value.type_name());
  return value.as_string();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items(parts.begin(), parts.end());
  return Value(std::move(items));
}

// For case-insensitive sorting and comparisons: strings compare lowercased.
Value sort_key(const Value& value, bool case_sensitive) {
  return !case_sensitive && value.is_string() ? Value(text::lower(value.as_string())) : value;
}

// --- filters ------------------------------------------------------------------------------------

Value filter_trim(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("trim", args, {"chars"});
  return Value(text::strip(soft_str(input), optional_string(bound, 0), text::Side::Both));
}

Value filter_length(Runtime&, const Value& input, const Args& args) {
  BoundArgs("length", args, {});
  return Value(static_cast<int64_t>(length(input)));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value filter_tojson(Runtime& runtime, const Value& input, const Args& args) {
  BoundArgs bound("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions options;
  options.ensure_ascii = bound.get(0, false).truthy();
  Value indent = bound.get(1, Value::none());
  if (!indent.is_none()) options.indent = indentation(runtime, indent);
  Value separators = bound.get(2, Value::none());
  if (!separators.is_none()) {
    if (!separators.is_list() || separators.as_list().size() != 2 || !separators.as_list()[0].is_string() ||
        !separators.as_list()[1].is_string())
      fail("tojson separators must be a pair of strings");
    options.item_separator = separators.as_list()[0].as_string();
    options.key_separator = separators.as_list()[1].as_string();
  }
  options.sort_keys = bound.get(3, false).truthy();
  return Value(to_json_text(input, options));
}

Value filter_join(Runtime& runtime, const Value& input, const Args& args) {
  BoundArgs bound("join", args, {"d", "attribute"});
  std::string separator = soft_str(bound.get(0, ""));
  Value attribute = bound.get(1, Value::none());
  std::string out;
  bool first = true;
  for (const Value& item : iterate(input)) {
    if (!first) out += separator;
    first = false;
    out += soft_str(attribute.is_none() ? item : get_path(item, attribute.str()));
    runtime.check_size(out.size());
  }
  return Value(std::move(out));
}

Value filter_default(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("default", args, {"default_value", "boolean"});
  bool use_default = input.is_undefined() || (bound.get(1, false).truthy() && !input.truthy());
  return use_default ? bound.get(0, "") : input;
}

// The filters that map the input's text and take no arguments.
Value text_filter(std::string_view name, std::string (*transform)(std::string_view), const Value& input,
                  const Args& args) {
  BoundArgs(name, args, {});
  return Value(transform(soft_str(input)));
}

Value filter_upper(Runtime&, const Value& in, const Args& a) {
  return text_filter("upper", text::upper, in, a);
}
Value filter_lower(Runtime&, const Value& in, const Args& a) {
  return text_filter("lower", text::lower, in, a);
}
Value filter_title(Runtime&, const Value& in, const Args& a) {
  return text_filter("title", text::title_filter, in, a);
}
Value filter_capitalize(Runtime&, const Value& in, const Args& a) {
  return text_filter("capitalize", text::capitalize, in, a);
}

Value filter_replace(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("replace", args, {"old", "new", "count"});
  int64_t count = bound.has(2) && !bound.required(2).is_none() ? int_arg(bound.required(2), "count") : -1;
  return Value(
      text::replace(soft_str(input), soft_str(bound.required(0)), soft_str(bound.required(1)), count));
}

Value filter_first(Runtime&, const Value& input, const Args& args) {
  BoundArgs("first", args, {});
  std::vector<Value> items = iterate(input);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(Runtime&, const Value& input, const Args& args) {
  BoundArgs("last", args, {});
  std::vector<Value> items = iterate(input);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value filter_list(Runtime&, const Value& input, const Args& args) {
  BoundArgs("list", args, {});
  return Value(iterate(input));
}

Value filter_string(Runtime&, const Value& input, const Args& args) {
  BoundArgs("string", args, {});
  return Value(soft_str(input));
}

// The text of a Python number literal without its digit-group underscores ("1_000"), or nullopt when an
// underscore is not between two digits.
std::optional<std::string> without_underscores(std::string_view s, bool (*digit)(char)) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '_') {
      out += s[i];
    } else if (i == 0 || i + 1 == s.size() || !digit(s[i - 1]) || !digit(s[i + 1])) {
      return std::nullopt;
    }
  }
  return out;
}

bool decimal_digit(char c) { return c >= '0' && c <= '9'; }
bool any_digit(char c) { return decimal_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }

// Python float(str): surrounding whitespace, digit underscores and inf/nan spellings are allowed.
std::optional<double> parse_float(std::string_view s) {
  auto digits = without_underscores(text::strip(s, std::nullopt, text::Side::Both), decimal_digit);
  if (!digits || digits->empty()) return std::nullopt;
  size_t sign = (*digits)[0] == '+' || (*digits)[0] == '-' ? 1 : 0;
  bool negative = (*digits)[0] == '-';
  std::string word = text::lower(digits->substr(sign));
  if (word == "inf" || word == "infinity" || word == "nan") {
    double x = word == "nan" ? NAN : INFINITY;
    return negative ? -x : x;
  }
  double x = 0;
  const char* first = digits->data() + (sign && !negative ? 1 : 0);
  const char* last = digits->data() + digits->size();
  auto result = std::from_chars(first, last, x);
  if (result.ec != std::errc() || result.ptr != last) return std::nullopt;
  return x;
}

// Python int(str, base): whitespace, a sign, a 0x/0o/0b prefix matching the base (any with base 0) and
// digit underscores are allowed.
std::optional<int64_t> parse_int(std::string_view s, int base) {
  std::string t = text::lower(text::strip(s, std::nullopt, text::Side::Both));
  size_t at = t.size() > 0 && (t[0] == '+' || t[0] == '-') ? 1 : 0;
  bool negative = at && t[0] == '-';
  if (t.size() > at + 2 && t[at] == '0') {
    int prefixed = t[at + 1] == 'x' ? 16 : t[at + 1] == 'o' ? 8 : t[at + 1] == 'b' ? 2 : 0;
    if (prefixed && (base == 0 || base == prefixed)) {
      base = prefixed;
      at += t[at + 2] == '_' ? 3 : 2;
    }
  }
  if (base == 0) base = 10;
  if (base < 2 || base > 36) fail("int() base must be >= 2 and <= 36, or 0");
  auto digits = without_underscores(std::string_view(t).substr(at), any_digit);
  if (!digits || digits->empty()) return std::nullopt;
  uint64_t magnitude = 0;
  auto result = std::from_chars(digits->data(), digits->data() + digits->size(), magnitude, base);
  if (result.ec != std::errc() || result.ptr != digits->data() + digits->size()) return std::nullopt;
  if (magnitude > static_cast<uint64_t>(INT64_MAX) + negative)
    fail("integer {} is out of the 64-bit range", s);
  return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
}

Value filter_int(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("int", args, {"default", "base"});
  require_defined(input);
  if (input.is_float()) {
    if (std::isnan(input.as_float()) || std::isinf(input.as_float())) return bound.get(0, 0);
    return Value(static_cast<int64_t>(std::trunc(input.as_float())));
  }
  if (input.is_number()) return Value(input.as_int());
  if (input.is_string()) {
    if (auto n = parse_int(input.as_string(), static_cast<int>(int_arg(bound.get(1, 10), "base"))))
      return Value(*n);
    if (auto x = parse_float(input.as_string()); x && std::isfinite(*x))  // "42.23"|int is 42
      return Value(static_cast<int64_t>(std::trunc(*x)));
  }
  return bound.get(0, 0);
}

Value filter_float(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("float", args, {"default"});
  require_defined(input);
  if (input.is_number()) return Value(input.as_float());
  if (input.is_string())
    if (auto x = parse_float(input.as_string())) return Value(*x);
  return bound.get(0, 0.0);
}

Value dict_items(const Value& dict) {
  std::vector<Value> pairs;
  for (const auto& [key, value] : dict.as_dict().entries())
    pairs.emplace_back(std::vector<Value>{key, value}, true);
  return Value(std::move(pairs));
}

Value filter_items(Runtime&, const Value& input, const Args& args) {
  BoundArgs("items", args, {});
  if (input.is_undefined()) return Value(std::vector<Value>{});
  if (!input.is_dict()) fail("Can only get item pairs from a mapping.");
  return dict_items(input);
}

// select / reject / selectattr / rejectattr: keep the items whose (attribute) passes the test.
Value select_items(Runtime& runtime, const Value& input, const Args& args, bool by_attribute, bool keep) {
  std::string name = std::string(keep ? "select" : "reject") + (by_attribute ? "attr" : "");
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) fail("{}() missing required argument 'attribute'", name);
    attribute = soft_str(args.positional[next++]);
  }
  std::string test;
  if (next < args.positional.size()) test = soft_str(args.positional[next++]);
  if (!test.empty() && !is_test(test)) fail("{}(): no test named '{}'", name, test);
  Args test_args{{args.positional.begin() + next, args.positional.end()}, args.keyword};
  std::vector<Value> out;
  if (!input.truthy()) return Value(std::move(out));  // jinja2 yields nothing for a falsy input, even none
  for (const Value& item : iterate(input)) {
    Value subject = by_attribute ? get_path(item, attribute) : item;
    bool passes = test.empty() ? subject.truthy() : apply_test(runtime, test, subject, test_args);
    if (passes == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value filter_select(Runtime& rt, const Value& in, const Args& a) {
  return select_items(rt, in, a, false, true);
}
Value filter_reject(Runtime& rt, const Value& in, const Args& a) {
  return select_items(rt, in, a, false, false);
}
Value filter_selectattr(Runtime& rt, const Value& in, const Args& a) {
  return select_items(rt, in, a, true, true);
}
Value filter_rejectattr(Runtime& rt, const Value& in, const Args& a) {
  return select_items(rt, in, a, true, false);
}

// map(attribute="x", default=...) or map("filter", args...).
Value filter_map(Runtime& runtime, const Value& input, const Args& args) {
  std::vector<Value> out;
  if (!input.truthy()) return Value(std::move(out));  // as select: nothing for a falsy input
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [key, value] : args.keyword) {
    if (key == "attribute")
      attribute = &value;
    else if (key == "default")
      fallback = &value;
  }
  if (attribute) {
    for (const Value& item : iterate(input)) {
      Value mapped = get_path(item, attribute->str());
      out.push_back(mapped.is_undefined() && fallback ? *fallback : mapped);
    }
    return Value(std::move(out));
  }
  if (args.positional.empty()) fail("map() needs a filter name or attribute=");
  std::string filter = soft_str(args.positional[0]);
  if (!is_filter(filter)) fail("map(): no filter named '{}'", filter);
  Args filter_args{{args.positional.begin() + 1, args.positional.end()}, args.keyword};
  for (const Value& item : iterate(input)) out.push_back(apply_filter(runtime, filter, item, filter_args));
  return Value(std::move(out));
}

Value filter_reverse(Runtime&, const Value& input, const Args& args) {
  BoundArgs("reverse", args, {});
  if (input.is_string()) {
    std::u32string chars = text::decode(input.as_string());
    std::reverse(chars.begin(), chars.end());
    return Value(text::encode(chars));
  }
  std::vector<Value> items = iterate(input);
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value filter_indent(Runtime& runtime, const Value& input, const Args& args) {
  BoundArgs bound("indent", args, {"width", "first", "blank"});
  require_defined(input);
  std::string prefix = indentation(runtime, bound.get(0, 4));
  std::vector<std::string> lines = text::splitlines(soft_str(input) + "\n");
  std::string out = bound.get(1, false).truthy() ? prefix : "";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (bound.get(2, false).truthy() || !lines[i].empty())) out += prefix;
    out += lines[i];
    runtime.check_size(out.size());
  }
  return Value(std::move(out));
}

Value filter_abs(Runtime&, const Value& input, const Args& args) {
  BoundArgs("abs", args, {});
  require_defined(input);
  if (!input.is_number()) fail("bad operand type for abs(): '{}'", input.type_name());
  if (input.is_float()) return Value(std::fabs(input.as_float()));
  return input.as_int() < 0 ? negate(input, true) : Value(input.as_int());
}

// Python's round(x, n): correctly rounded on the exact binary value, ties to even.
double python_round(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits == 0) return std::nearbyint(x);
  if (digits > 330) return x;  // past the last significant digit of any double
  if (digits < -330) return 0.0 * x;
  if (digits < 0) {
    double scale = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / scale) * scale;
  }
  int precision = static_cast<int>(digits);
  std::string text(std::snprintf(nullptr, 0, "%.*f", precision, x) + 1, '\0');
  std::snprintf(text.data(), text.size(), "%.*f", precision, x);
  text.pop_back();
  double out = 0;
  std::from_chars(text.data(), text.data() + text.size(), out);
  return out;
}

Value filter_round(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("round", args, {"precision", "method"});
  require_defined(input);
  if (!input.is_number()) fail("type {} doesn't define __round__ method", input.type_name());
  int64_t precision = int_arg(bound.get(0, 0), "precision");
  std::string method = soft_str(bound.get(1, "common"));
  if (method == "common") {
    if (!input.is_float()) return Value(input.as_int());  // round(int, n) stays an int
    return Value(python_round(input.as_float(), precision));
  }
  if (method != "floor" && method != "ceil") fail("method must be common, ceil or floor");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double scaled = input.as_float() * scale;
  return Value((method == "floor" ? std::floor(scaled) : std::ceil(scaled)) / scale);
}

Value filter_safe(Runtime&, const Value& input, const Args& args) {
  BoundArgs("safe", args, {});
  return input;
}

Value filter_escape(Runtime&, const Value& input, const Args& args) {
  BoundArgs("escape", args, {});
  std::string out;
  for (char c : soft_str(input)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value(std::move(out));
}

// Sort / unique / min / max take (case_sensitive=False, attribute=None); returns the key of an item.
struct ItemKey {
  bool case_sensitive = false;
  std::string attribute;
  Value operator()(const Value& item) const {
    return sort_key(attribute.empty() ? item : get_path(item, attribute), case_sensitive);
  }
};

Value filter_sort(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("sort", args, {"reverse", "case_sensitive", "attribute"});
  ItemKey key{bound.get(1, false).truthy(),
              bound.get(2, Value::none()).is_none() ? "" : bound.required(2).str()};
  bool reverse = bound.get(0, false).truthy();
  std::vector<Value> items = iterate(input);
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? less(key(b), key(a)) : less(key(a), key(b));
  });
  return Value(std::move(items));
}

Value filter_unique(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("unique", args, {"case_sensitive", "attribute"});
  ItemKey key{bound.get(0, false).truthy(),
              bound.get(1, Value::none()).is_none() ? "" : bound.required(1).str()};
  std::vector<Value> out, seen;
  for (const Value& item : iterate(input)) {
    Value k = key(item);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return Value(std::move(out));
}

Value extreme(const Value& input, const Args& args, bool want_max) {
  BoundArgs bound(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  ItemKey key{bound.get(0, false).truthy(),
              bound.get(1, Value::none()).is_none() ? "" : bound.required(1).str()};
  std::vector<Value> items = iterate(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const Value* best = &items[0];
  for (size_t i = 1; i < items.size(); ++i)
    if (want_max ? less(key(*best), key(items[i])) : less(key(items[i]), key(*best))) best = &items[i];
  return *best;
}

Value filter_min(Runtime&, const Value& input, const Args& args) { return extreme(input, args, false); }
Value filter_max(Runtime&, const Value& input, const Args& args) { return extreme(input, args, true); }

Value filter_sum(Runtime& runtime, const Value& input, const Args& args) {
  BoundArgs bound("sum", args, {"attribute", "start"});
  Value total = bound.get(1, 0);
  Value attribute = bound.get(0, Value::none());
  for (const Value& item : iterate(input))
    total = arithmetic("+", total, attribute.is_none() ? item : get_path(item, attribute.str()), runtime);
  return total;
}

Value filter_dictsort(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!input.is_dict()) fail("dictsort needs a mapping, not {}", input.type_name());
  bool case_sensitive = bound.get(0, false).truthy();
  std::string by = soft_str(bound.get(1, "key"));
  if (by != "key" && by != "value") fail("You can only sort by either 'key' or 'value'");
  size_t position = by == "key" ? 0 : 1;
  bool reverse = bound.get(2, false).truthy();
  std::vector<Value> pairs = dict_items(input).as_list();
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    Value x = sort_key(a.as_list()[position], case_sensitive),
          y = sort_key(b.as_list()[position], case_sensitive);
    return reverse ? less(y, x) : less(x, y);
  });
  return Value(std::move(pairs));
}

Value filter_format(Runtime&, const Value& input, const Args& args) {
  if (!args.keyword.empty()) fail("format(): keyword arguments are not supported");
  return Value(percent_format(soft_str(input), Value(args.positional, true)));
}

Value filter_attr(Runtime&, const Value& input, const Args& args) {
  BoundArgs bound("attr", args, {"name"});
  return get_attribute(input, soft_str(bound.required(0)));
}

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const std::map<std::string, FilterFn, std::less<>> table = {
      {"abs", filter_abs},
      {"attr", filter_attr},
      {"capitalize", filter_capitalize},
      {"count", filter_length},
      {"d", filter_default},
      {"default", filter_default},
      {"dictsort", filter_dictsort},
      {"e", filter_escape},
      {"escape", filter_escape},
      {"first", filter_first},
      {"float", filter_float},
      {"format", filter_format},
      {"indent", filter_indent},
      {"int", filter_int},
      {"items", filter_items},
      {"join", filter_join},
      {"last", filter_last},
      {"length", filter_length},
      {"list", filter_list},
      {"lower", filter_lower},
      {"map", filter_map},
      {"max", filter_max},
      {"min", filter_min},
      {"reject", filter_reject},
      {"rejectattr", filter_rejectattr},
      {"replace", filter_replace},
      {"reverse", filter_reverse},
      {"round", filter_round},
      {"safe", filter_safe},
      {"select", filter_select},
      {"selectattr", filter_selectattr},
      {"sort", filter_sort},
      {"string", filter_string},
      {"sum", filter_sum},
      {"title", filter_title},
      {"tojson", filter_tojson},
      {"trim", filter_trim},
      {"unique", filter_unique},
      {"upper", filter_upper},
  };
  return table;
}

// --- tests --------------------------------------------------------------------------------------

// The tests that take no arguments: checks there are none and returns the result.
bool no_argument_test(std::string_view name, const Args& args, bool result) {
  BoundArgs(name, args, {});
  return result;
}

bool test_divisibleby(Runtime&, const Value& value, const Args& args) {
  BoundArgs bound("divisibleby", args, {"num"});
  require_defined(value);
  Value num = bound.required(0);
  if (!value.is_number() || !num.is_number()) fail("divisibleby needs numbers");
  if (value.is_float() || num.is_float()) {
    if (num.as_float() == 0.0) fail("float modulo");
    return std::fmod(value.as_float(), num.as_float()) == 0.0;
  }
  if (num.as_int() == 0) fail("integer division or modulo by zero");
  return value.as_int() % num.as_int() == 0;
}

bool parity(const Value& value, bool want_even) {
  require_defined(value);
  if (!value.is_number()) fail("unsupported operand type(s) for %: '{}' and 'int'", value.type_name());
  if (value.is_float()) return (std::fmod(value.as_float(), 2.0) == 0.0) == want_even;
  return (value.as_int() % 2 == 0) == want_even;
}

bool test_even(Runtime&, const Value& value, const Args&) { return parity(value, true); }
bool test_odd(Runtime&, const Value& value, const Args&) { return parity(value, false); }

template <int Op>  // 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=
bool compare_test(Runtime&, const Value& value, const Args& args) {
  BoundArgs bound("comparison test", args, {"other"});
  const Value& other = bound.required(0);
  switch (Op) {
    case 0:
      return equal(value, other);
    case 1:
      return !equal(value, other);
    case 2:
      return less(value, other);
    case 3:
      return !less(other, value);
    case 4:
      return less(other, value);
    default:
      return !less(value, other);
  }
}

bool test_in(Runtime&, const Value& value, const Args& args) {
  BoundArgs bound("in", args, {"seq"});
  return contains(bound.required(0), value);
}

bool test_sameas(Runtime&, const Value& value, const Args& args) {
  BoundArgs bound("sameas", args, {"other"});
  const Value& other = bound.required(0);
  // Python identity: None, True and False are singletons; other values compare by identity only when
  // they share storage, which equal() approximates for the immutable ones.
  if (value.kind() != other.kind()) return false;
  return equal(value, other);
}

bool test_filter(Runtime&, const Value& value, const Args&) {
  return value.is_string() && is_filter(value.as_string());
}
bool test_test(Runtime&, const Value& value, const Args&) {
  return value.is_string() && is_test(value.as_string());
}

// Undefined counts as iterable and as a sequence, as in jinja2 (it iterates as empty).
bool iterable_value(const Value& v) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}

bool test_boolean(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("boolean", a, v.is_bool());
}
bool test_callable(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("callable", a, v.is_function());
}
bool test_defined(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("defined", a, !v.is_undefined());
}
bool test_escaped(Runtime&, const Value&, const Args& a) { return no_argument_test("escaped", a, false); }
bool test_false(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("false", a, v.is_bool() && !v.as_bool());
}
bool test_float(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("float", a, v.is_float());
}
bool test_integer(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("integer", a, v.is_int());
}
bool test_iterable(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("iterable", a, iterable_value(v));
}
bool test_lower(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("lower", a, text::is_lower(v.str()));
}
bool test_mapping(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("mapping", a, v.is_dict());
}
bool test_none(Runtime&, const Value& v, const Args& a) { return no_argument_test("none", a, v.is_none()); }
bool test_number(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("number", a, v.is_number());
}
bool test_string(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("string", a, v.is_string());
}
bool test_true(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("true", a, v.is_bool() && v.as_bool());
}
bool test_undefined(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("undefined", a, v.is_undefined());
}
bool test_upper(Runtime&, const Value& v, const Args& a) {
  return no_argument_test("upper", a, text::is_upper(v.str()));
}

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"!=", compare_test<1>},
      {"<", compare_test<2>},
      {"<=", compare_test<3>},
      {"==", compare_test<0>},
      {">", compare_test<4>},
      {">=", compare_test<5>},
      {"boolean", test_boolean},
      {"callable", test_callable},
      {"defined", test_defined},
      {"divisibleby", test_divisibleby},
      {"eq", compare_test<0>},
      {"equalto", compare_test<0>},
      {"escaped", test_escaped},
      {"even", test_even},
      {"false", test_false},
      {"filter", test_filter},
      {"float", test_float},
      {"ge", compare_test<5>},
      {"greaterthan", compare_test<4>},
      {"gt", compare_test<4>},
      {"in", test_in},
      {"integer", test_integer},
      {"iterable", test_iterable},
      {"le", compare_test<3>},
      {"lessthan", compare_test<2>},
      {"lower", test_lower},
      {"lt", compare_test<2>},
      {"mapping", test_mapping},
      {"ne", compare_test<1>},
      {"none", test_none},
      {"number", test_number},
      {"odd", test_odd},
      {"sameas", test_sameas},
      {"sequence", test_iterable},
      {"string", test_string},
      {"test", test_test},
      {"true", test_true},
      {"undefined", test_undefined},
      {"upper", test_upper},
  };
  return table;
}

// --- globals ------------------------------------------------------------------------------------

constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox refuses larger ranges

Value global_range(Runtime& runtime, const Args& args) {
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) fail("range expected 1 to 3 arguments, got {}", p.size());
  int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    stop = int_arg(p[0], "range() argument");
  } else {
    start = int_arg(p[0], "range() argument");
    stop = int_arg(p[1], "range() argument");
    if (p.size() == 3) step = int_arg(p[2], "range() argument");
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange)
      fail("range too big: the sandbox blocks ranges larger than {}", kMaxRange);
    items.emplace_back(i);
  }
  runtime.check_size(items.size());
  return Value(std::move(items));
}

// namespace(...) and dict(...): a mapping argument and/or keyword arguments.
Dict mapping_from_args(std::string_view function, const Args& args) {
  if (args.positional.size() > 1) fail("{}() takes at most 1 positional argument", function);
  Dict out;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (!source.is_dict())
      fail("{}() needs a mapping as its positional argument, not {}", function, source.type_name());
    out = source.as_dict();
  }
  for (const auto& [key, value] : args.keyword) out.set(key, value);
  return out;
}

Value global_namespace(Runtime&, const Args& args) {
  auto ns = std::make_shared<Namespace>();
  ns->attributes = mapping_from_args("namespace", args);
  return Value(std::move(ns));
}

Value global_dict(Runtime&, const Args& args) { return Value(mapping_from_args("dict", args)); }

Value global_raise_exception(Runtime&, const Args& args) {
  BoundArgs bound("raise_exception", args, {"message"});
  throw RaisedException(bound.required(0).str());
}

Value global_strftime_now(Runtime&, const Args& args) {
  BoundArgs bound("strftime_now", args, {"format"});
  const Value& format = bound.required(0);
  if (!format.is_string()) fail("strftime_now() format must be a string");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(256 + format.as_string().size() * 8, '\0');
  size_t n = std::strftime(out.data(), out.size(), format.as_string().c_str(), &local);
  if (n == 0 && !format.as_string().empty()) fail("strftime_now() could not format '{}'", format.as_string());
  out.resize(n);
  return Value(std::move(out));
}

// --- methods ------------------------------------------------------------------------------------

std::vector<std::string> prefixes(const Value& arg, std::string_view method) {
  if (arg.is_string()) return {arg.as_string()};
  if (arg.is_tuple()) {
    std::vector<std::string> out;
    for (const Value& item : arg.as_list()) {
      if (!item.is_string()) fail("{} first arg must be str or a tuple of str", method);
      out.push_back(item.as_string());
    }
    return out;
  }
  fail("{} first arg must be str or a tuple of str, not {}", method, arg.type_name());
}

Value str_startswith(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound("startswith", args, {"prefix"});
  const std::string& s = self.as_string();
  for (const auto& p : prefixes(bound.required(0), "startswith"))
    if (s.compare(0, p.size(), p) == 0) return Value(true);
  return Value(false);
}

Value str_endswith(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound("endswith", args, {"suffix"});
  const std::string& s = self.as_string();
  for (const auto& p : prefixes(bound.required(0), "endswith"))
    if (s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0) return Value(true);
  return Value(false);
}

template <bool FromRight>
Value str_split(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound(FromRight ? "rsplit" : "split", args, {"sep", "maxsplit"});
  int64_t maxsplit = int_arg(bound.get(1, -1), "maxsplit");
  return string_list(text::split(self.as_string(), optional_string(bound, 0), maxsplit, FromRight));
}

template <text::Side side>
Value str_strip(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound("strip", args, {"chars"});
  return Value(text::strip(self.as_string(), optional_string(bound, 0), side));
}

Value str_replace(Runtime& runtime, const Value& self, const Args& args) {
  BoundArgs bound("replace", args, {"old", "new", "count"});
  const Value &old = bound.required(0), &replacement = bound.required(1);
  if (!old.is_string() || !replacement.is_string()) fail("replace() arguments must be str");
  std::string out = text::replace(self.as_string(), old.as_string(), replacement.as_string(),
                                  int_arg(bound.get(2, -1), "count"));
  runtime.check_size(out.size());
  return Value(std::move(out));
}

// The str methods that map the text and take no arguments.
Value text_method(std::string_view name, std::string (*transform)(std::string_view), const Value& self,
                  const Args& args) {
  BoundArgs(name, args, {});
  return Value(transform(self.as_string()));
}

std::string substring_arg(const BoundArgs& bound, std::string_view method) {
  const Value& sub = bound.required(0);
  if (!sub.is_string()) fail("{}() argument must be str, not {}", method, sub.type_name());
  return sub.as_string();
}

template <bool FromRight>
Value str_find(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound(FromRight ? "rfind" : "find", args, {"sub"});
  return Value(text::find(self.as_string(), substring_arg(bound, "find"), FromRight));
}

Value str_index(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound("index", args, {"sub"});
  int64_t at = text::find(self.as_string(), substring_arg(bound, "index"), false);
  if (at < 0) fail("substring not found");
  return Value(at);
}

Value str_count(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound("count", args, {"sub"});
  return Value(text::count(self.as_string(), substring_arg(bound, "count")));
}

Value str_format(Runtime&, const Value& self, const Args& args) {
  return Value(brace_format(self.as_string(), args));
}

Value str_join(Runtime& runtime, const Value& self, const Args& args) {
  BoundArgs bound("join", args, {"iterable"});
  std::string out;
  bool first = true;
  for (const Value& item : iterate(bound.required(0))) {
    if (!item.is_string()) fail("sequence item: expected str instance, {} found", item.type_name());
    if (!first) out += self.as_string();
    first = false;
    out += item.as_string();
    runtime.check_size(out.size());
  }
  return Value(std::move(out));
}

// str.isdigit and friends: true when the text is non-empty and every character passes.
Value character_test(std::string_view name, bool (*predicate)(char32_t), const Value& self,
                     const Args& args) {
  BoundArgs(name, args, {});
  std::u32string chars = text::decode(self.as_string());
  return Value(!chars.empty() && std::all_of(chars.begin(), chars.end(), predicate));
}

bool ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool ascii_alpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool ascii_alnum(char32_t c) { return ascii_digit(c) || ascii_alpha(c); }

Value str_upper(Runtime&, const Value& self, const Args& a) {
  return text_method("upper", text::upper, self, a);
}
Value str_lower(Runtime&, const Value& self, const Args& a) {
  return text_method("lower", text::lower, self, a);
}
Value str_title(Runtime&, const Value& self, const Args& a) {
  return text_method("title", text::title_words, self, a);
}
Value str_capitalize(Runtime&, const Value& self, const Args& a) {
  return text_method("capitalize", text::capitalize, self, a);
}
Value str_isalnum(Runtime&, const Value& self, const Args& a) {
  return character_test("isalnum", ascii_alnum, self, a);
}
Value str_isalpha(Runtime&, const Value& self, const Args& a) {
  return character_test("isalpha", ascii_alpha, self, a);
}
Value str_isdigit(Runtime&, const Value& self, const Args& a) {
  return character_test("isdigit", ascii_digit, self, a);
}
Value str_isspace(Runtime&, const Value& self, const Args& a) {
  return character_test("isspace", text::is_space, self, a);
}

Value str_islower(Runtime&, const Value& self, const Args&) {
  return Value(text::is_lower(self.as_string()));
}
Value str_isupper(Runtime&, const Value& self, const Args&) {
  return Value(text::is_upper(self.as_string()));
}

Value str_splitlines(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound("splitlines", args, {"keepends"});
  return string_list(text::splitlines(self.as_string(), bound.get(0, false).truthy()));
}

template <bool Prefix>
Value str_remove(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound(Prefix ? "removeprefix" : "removesuffix", args, {"affix"});
  std::string affix = substring_arg(bound, Prefix ? "removeprefix" : "removesuffix");
  const std::string& s = self.as_string();
  if (Prefix && s.compare(0, affix.size(), affix) == 0) return Value(s.substr(affix.size()));
  if (!Prefix && s.size() >= affix.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0)
    return Value(s.substr(0, s.size() - affix.size()));
  return self;
}

Value list_index(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound("index", args, {"value"});
  const auto& items = self.as_list();
  for (size_t i = 0; i < items.size(); ++i)
    if (equal(items[i], bound.required(0))) return Value(static_cast<int64_t>(i));
  fail("{} is not in list", bound.required(0).repr());
}

Value list_count(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound("count", args, {"value"});
  const auto& items = self.as_list();
  return Value(static_cast<int64_t>(std::count_if(
      items.begin(), items.end(), [&](const Value& v) { return equal(v, bound.required(0)); })));
}

Value same_object(Runtime&, const Value& self, const Args& args) {
  BoundArgs("copy", args, {});
  return self;
}

Value dict_items_method(Runtime&, const Value& self, const Args& args) {
  BoundArgs("items", args, {});
  return dict_items(self);
}

Value dict_keys(Runtime&, const Value& self, const Args& args) {
  BoundArgs("keys", args, {});
  return Value(iterate(self));
}

Value dict_values(Runtime&, const Value& self, const Args& args) {
  BoundArgs("values", args, {});
  std::vector<Value> values;
  for (const auto& entry : self.as_dict().entries()) values.push_back(entry.second);
  return Value(std::move(values));
}

Value dict_get(Runtime&, const Value& self, const Args& args) {
  BoundArgs bound("get", args, {"key", "default"});
  const Value& key = bound.required(0);
  const Value* found = key.is_string() ? self.as_dict().find(key.as_string()) : nullptr;
  return found ? *found : bound.get(1, Value::none());
}

using MethodTable = std::map<std::string, MethodFn, std::less<>>;

const MethodTable& string_methods() {
  static const MethodTable table = {
      {"capitalize", str_capitalize},
      {"count", str_count},
      {"endswith", str_endswith},
      {"find", str_find<false>},
      {"format", str_format},
      {"index", str_index},
      {"isalnum", str_isalnum},
      {"isalpha", str_isalpha},
      {"isdigit", str_isdigit},
      {"islower", str_islower},
      {"isspace", str_isspace},
      {"isupper", str_isupper},
      {"join", str_join},
      {"lower", str_lower},
      {"lstrip", str_strip<text::Side::Left>},
      {"removeprefix", str_remove<true>},
      {"removesuffix", str_remove<false>},
      {"replace", str_replace},
      {"rfind", str_find<true>},
      {"rsplit", str_split<true>},
      {"rstrip", str_strip<text::Side::Right>},
      {"split", str_split<false>},
      {"splitlines", str_splitlines},
      {"startswith", str_startswith},
      {"strip", str_strip<text::Side::Both>},
      {"title", str_title},
      {"upper", str_upper},
  };
  return table;
}

const MethodTable& list_methods() {
  static const MethodTable table = {{"copy", same_object}, {"count", list_count}, {"index", list_index}};
  return table;
}

const MethodTable& dict_methods() {
  static const MethodTable table = {{"copy", same_object},
                                    {"get", dict_get},
                                    {"items", dict_items_method},
                                    {"keys", dict_keys},
                                    {"values", dict_values}};
  return table;
}

// Methods that exist in Python but mutate; the sandbox refuses to call them.
bool is_mutating_method(const Value& self, std::string_view name) {
  static const std::string_view list_names[] = {"append", "clear",  "extend",  "insert",
                                                "pop",    "remove", "reverse", "sort"};
  static const std::string_view dict_names[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (self.is_list())
    return std::find(std::begin(list_names), std::end(list_names), name) != std::end(list_names);
  if (self.is_dict())
    return std::find(std::begin(dict_names), std::end(dict_names), name) != std::end(dict_names);
  return false;
}

}  // namespace

bool is_filter(std::string_view name) { return filters().count(name) > 0; }
bool is_test(std::string_view name) { return tests().count(name) > 0; }

Value apply_filter(Runtime& runtime, std::string_view name, const Value& input, const Args& args) {
  auto it = filters().find(name);
  if (it == filters().end()) fail("no filter named '{}'", name);
  return it->second(runtime, input, args);
}

bool apply_test(Runtime& runtime, std::string_view name, const Value& input, const Args& args) {
  auto it = tests().find(name);
  if (it == tests().end()) fail("no test named '{}'", name);
  return it->second(runtime, input, args);
}

Dict global_functions() {
  Dict globals;
  globals.set("range", make_function("range", global_range));
  globals.set("namespace", make_function("namespace", global_namespace));
  globals.set("dict", make_function("dict", global_dict));
  globals.set("raise_exception", make_function("raise_exception", global_raise_exception));
  globals.set("strftime_now", make_function("strftime_now", global_strftime_now));
  return globals;
}

std::optional<Value> find_method(const Value& self, std::string_view name) {
  const MethodTable* table = self.is_string() ? &string_methods()
                             : self.is_list() ? &list_methods()
                             : self.is_dict() ? &dict_methods()
                                              : nullptr;
  if (!table) return std::nullopt;
  if (auto it = table->find(name); it != table->end()) {
    MethodFn method = it->second;
    return make_function(std::string(name),
                         [self, method](Runtime& rt, const Args& args) { return method(rt, self, args); });
  }
  if (is_mutating_method(self, name)) {
    std::string message =
        fmt::format("access to attribute '{}' of '{}' object is unsafe", name, self.type_name());
    return make_function(std::string(name),
                         [message](Runtime&, const Args&) -> Value { fail("{}", message); });
  }
  return std::nullopt;
}

}  // namespace gerbil::jinja
