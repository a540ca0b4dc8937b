#include "template/operations.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "template/builtins.h"
#include "template/text.h"

namespace gerbil::jinja {

BoundArgs::BoundArgs(std::string_view function, const Args& args,
                     std::initializer_list<std::string_view> params, bool extra_positional)
    : function_(function), names_(params), values_(params.size()) {
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < values_.size()) {
      values_[i] = args.positional[i];
    } else if (extra_positional) {
      extra_.push_back(args.positional[i]);
    } else {
      fail("{}() takes at most {} argument(s) ({} given)", function, values_.size(), args.positional.size());
    }
  }
  for (const auto& [name, value] : args.keyword) {
    auto it = std::find(names_.begin(), names_.end(), name);
    if (it == names_.end()) fail("{}() got an unexpected keyword argument '{}'", function, name);
    auto& slot = values_[it - names_.begin()];
    if (slot) fail("{}() got multiple values for argument '{}'", function, name);
    slot = value;
  }
}

const Value& BoundArgs::required(size_t i) const {
  if (!has(i)) fail("{}() missing required argument '{}'", function_, names_[i]);
  return *values_[i];
}

void require_defined(const Value& value) {
  if (value.is_undefined()) fail("{}", value.undefined_message());
}

Value make_function(std::string name, std::function<Value(Runtime&, const Args&)> call) {
  return Value(std::make_shared<const Function>(Function{std::move(name), std::move(call)}));
}

// jinja2 names objects in undefined messages by their type: 'dict object', 'str object', 'None'.
static std::string object_name(const Value& object) {
  return object.is_none() ? "None" : object.type_name() + " object";
}

static Value missing_attribute(const Value& object, std::string_view name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_name(object), name));
}

static Value missing_element(const Value& object, const Value& key) {
  return Value::undefined(fmt::format("{} has no element {}", object_name(object), key.repr()));
}

Value get_attribute(const Value& object, std::string_view name) {
  require_defined(object);
  if (auto method = find_method(object, name)) return *method;
  if (object.is_dict()) {
    if (const Value* found = object.as_dict().find(name)) return *found;
  } else if (object.is_namespace()) {
    if (const Value* found = object.as_namespace().attributes.find(name)) return *found;
  }
  return missing_attribute(object, name);
}

// Python's index normalisation: negative counts from the end; nullopt when out of range.
static std::optional<size_t> normalize_index(int64_t index, size_t size) {
  if (index < 0) index += static_cast<int64_t>(size);
  if (index < 0 || index >= static_cast<int64_t>(size)) return std::nullopt;
  return static_cast<size_t>(index);
}

Value get_item(const Value& object, const Value& key) {
  require_defined(object);
  bool integer_key = key.is_int() || key.is_bool();
  if (object.is_dict() && key.is_string()) {
    if (const Value* found = object.as_dict().find(key.as_string())) return *found;
  } else if (object.is_list() && integer_key) {
    const auto& items = object.as_list();
    if (auto i = normalize_index(key.as_int(), items.size())) return items[*i];
  } else if (object.is_string() && integer_key) {
    std::u32string chars = text::decode(object.as_string());
    if (auto i = normalize_index(key.as_int(), chars.size())) return Value(text::encode(chars.substr(*i, 1)));
  } else if (object.is_namespace() && key.is_string()) {
    if (const Value* found = object.as_namespace().attributes.find(key.as_string())) return *found;
  }
  if (!key.is_string()) return missing_element(object, key);
  if (auto method = find_method(object, key.as_string())) return *method;
  return missing_attribute(object, key.as_string());
}

static std::optional<int64_t> slice_bound(const Value& bound) {
  if (bound.is_none()) return std::nullopt;
  if (!bound.is_int() && !bound.is_bool()) {
    require_defined(bound);
    fail("slice indices must be integers or None, not {}", bound.type_name());
  }
  return bound.as_int();
}

// The positions a Python slice visits in a sequence of `size` elements.
static std::vector<size_t> slice_positions(size_t size, const Value& start_v, const Value& stop_v,
                                           const Value& step_v) {
  int64_t n = static_cast<int64_t>(size);
  int64_t step = slice_bound(step_v).value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> bound, int64_t fallback) {
    if (!bound) return fallback;
    int64_t i = *bound < 0 ? *bound + n : *bound;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t start = clamp(slice_bound(start_v), step > 0 ? 0 : n - 1);
  int64_t stop = clamp(slice_bound(stop_v), step > 0 ? n : -1);
  std::vector<size_t> positions;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    positions.push_back(static_cast<size_t>(i));
  return positions;
}

Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  require_defined(object);
  if (object.is_list()) {
    const auto& items = object.as_list();
    std::vector<Value> out;
    for (size_t i : slice_positions(items.size(), start, stop, step)) out.push_back(items[i]);
    return Value(std::move(out), object.is_tuple());
  }
  if (object.is_string()) {
    std::u32string chars = text::decode(object.as_string());
    std::u32string out;
    for (size_t i : slice_positions(chars.size(), start, stop, step)) out.push_back(chars[i]);
    return Value(text::encode(out));
  }
  fail("'{}' object is not subscriptable", object.type_name());
}

// The value of a string of decimal digits ("0", "12"); nullopt for anything else or out of range.
static std::optional<int64_t> digits_value(std::string_view s) {
  int64_t value = 0;
  auto result = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || s[0] == '-' || result.ec != std::errc() || result.ptr != s.data() + s.size()) return std::nullopt;
  return value;
}

Value get_path(const Value& object, std::string_view path) {
  Value current = object;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string_view part =
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    auto index = digits_value(part);
    current = index ? get_item(current, Value(*index)) : get_item(current, Value(part));
    if (dot == std::string_view::npos) return current;
    start = dot + 1;
  }
}

std::vector<Value> iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return value.as_list();
    case Value::Kind::String: {
      std::vector<Value> chars;
      for (char32_t c : text::decode(value.as_string()))
        chars.emplace_back(text::encode(std::u32string(1, c)));
      return chars;
    }
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& entry : value.as_dict().entries()) keys.emplace_back(entry.first);
      return keys;
    }
    default:
      fail("'{}' object is not iterable", value.type_name());
  }
}

size_t length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Undefined:
      return 0;
    case Value::Kind::String:
      return text::length(value.as_string());
    case Value::Kind::List:
      return value.as_list().size();
    case Value::Kind::Dict:
      return value.as_dict().size();
    default:
      fail("object of type '{}' has no len()", value.type_name());
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined:
      return false;
    case Value::Kind::String:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not {}", item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
      return std::any_of(container.as_list().begin(), container.as_list().end(),
                         [&](const Value& v) { return equal(v, item); });
    case Value::Kind::Dict:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default:
      fail("argument of type '{}' is not iterable", container.type_name());
  }
}

// --- arithmetic ---------------------------------------------------------------------------------

[[noreturn]] static void unsupported(std::string_view op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
}

// Python integers are unbounded; the sandbox's are 64-bit and fail instead of wrapping.
template <typename Op>
static int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t result = 0;
  if (op(a, b, &result)) fail("integer overflow (the template sandbox uses 64-bit integers)");
  return result;
}
static bool add(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
static bool sub(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
static bool mul(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

static int64_t integer_power(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = checked(mul, result, base);
    exponent >>= 1;
    if (exponent) base = checked(mul, base, base);
  }
  return result;
}

// Python's float floor division and modulo (the result of % takes the divisor's sign).
static std::pair<double, double> float_divmod(double a, double b) {
  if (b == 0.0) fail("float division by zero");
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floor_div = div != 0.0 ? std::floor(div) : std::copysign(0.0, a / b);
  if (div != 0.0 && div - floor_div > 0.5) floor_div += 1.0;
  return {floor_div, mod};
}

static Value numeric(std::string_view op, const Value& a, const Value& b) {
  bool floats = a.is_float() || b.is_float();
  if (op == "/") {
    if (b.as_float() == 0.0) fail("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "**") {
    if (!floats && b.as_int() >= 0) return Value(integer_power(a.as_int(), b.as_int()));
    if (a.as_float() == 0.0 && b.as_float() < 0) fail("0.0 cannot be raised to a negative power");
    return Value(std::pow(a.as_float(), b.as_float()));
  }
  if (floats) {
    double x = a.as_float(), y = b.as_float();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    auto [div, mod] = float_divmod(x, y);
    return Value(op == "//" ? div : mod);
  }
  int64_t x = a.as_int(), y = b.as_int();
  if (op == "+") return Value(checked(add, x, y));
  if (op == "-") return Value(checked(sub, x, y));
  if (op == "*") return Value(checked(mul, x, y));
  if (y == 0) fail("integer division or modulo by zero");
  int64_t quotient = x / y, remainder = x % y;
  if (remainder != 0 && ((remainder < 0) != (y < 0))) {
    quotient -= 1;
    remainder += y;
  }
  return Value(op == "//" ? quotient : remainder);
}

static Value repeat(const Value& sequence, int64_t times, const Runtime& runtime) {
  size_t unit = sequence.is_string() ? sequence.as_string().size() : sequence.as_list().size();
  size_t count = times > 0 && unit > 0 ? static_cast<size_t>(times) : 0;
  // unit * count, saturated so that a huge count fails the size check instead of wrapping around.
  bool too_big = count > 0 && unit > runtime.limits.max_output_bytes / count;
  runtime.check_size(too_big ? SIZE_MAX : unit * count);
  if (sequence.is_string()) {
    std::string out;
    out.reserve(unit * count);
    for (size_t i = 0; i < count; ++i) out += sequence.as_string();
    return Value(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(unit * count);
  for (size_t i = 0; i < count; ++i) out.insert(out.end(), sequence.as_list().begin(), sequence.as_list().end());
  return Value(std::move(out), sequence.is_tuple());
}

Value arithmetic(std::string_view op, const Value& a, const Value& b, const Runtime& runtime) {
  require_defined(a);
  require_defined(b);
  if (a.is_number() && b.is_number()) return numeric(op, a, b);
  bool a_int = a.is_int() || a.is_bool(), b_int = b.is_int() || b.is_bool();
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      runtime.check_size(a.as_string().size() + b.as_string().size());
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_string()) fail("can only concatenate str (not \"{}\") to str", b.type_name());
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      std::vector<Value> items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(items), a.is_tuple());
    }
  } else if (op == "*") {
    if ((a.is_string() || a.is_list()) && b_int) return repeat(a, b.as_int(), runtime);
    if ((b.is_string() || b.is_list()) && a_int) return repeat(b, a.as_int(), runtime);
  } else if (op == "%" && a.is_string()) {
    return Value(percent_format(a.as_string(), b));
  }
  unsupported(op, a, b);
}

Value negate(const Value& value, bool minus) {
  require_defined(value);
  if (!value.is_number()) fail("bad operand type for unary {}: '{}'", minus ? '-' : '+', value.type_name());
  if (value.is_float()) return Value(minus ? -value.as_float() : value.as_float());
  return Value(minus ? checked(sub, 0, value.as_int()) : value.as_int());
}

// --- string formatting --------------------------------------------------------------------------

// Pads `body` to `width` code points: on the right with '-', with zeros after the sign with '0'.
static std::string pad(std::string body, int width, bool left_align, bool zero_fill) {
  int missing = width - static_cast<int>(text::length(body));
  if (missing <= 0) return body;
  if (left_align) return body + std::string(missing, ' ');
  if (zero_fill) {
    size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
    return body.insert(sign, std::string(missing, '0'));
  }
  return std::string(missing, ' ') + body;
}

static std::string format_number(char conversion, const Value& value, int precision, char sign_flag) {
  require_defined(value);
  if (!value.is_number())
    fail("%{} format: a real number is required, not {}", conversion, value.type_name());
  std::string sign = sign_flag ? std::string(1, sign_flag) : "";
  if (conversion == 'd' || conversion == 'i' || conversion == 'x' || conversion == 'X' || conversion == 'o') {
    int64_t n = value.is_float() ? static_cast<int64_t>(std::trunc(value.as_float())) : value.as_int();
    if (value.is_float() && conversion != 'd' && conversion != 'i')
      fail("%{} format: an integer is required, not float", conversion);
    std::string digits = conversion == 'x'   ? fmt::format("{:x}", n < 0 ? -n : n)
                         : conversion == 'X' ? fmt::format("{:X}", n < 0 ? -n : n)
                         : conversion == 'o' ? fmt::format("{:o}", n < 0 ? -n : n)
                                             : std::to_string(n < 0 ? -n : n);
    return (n < 0 ? "-" : sign) + digits;
  }
  double x = value.as_float();
  if (std::isnan(x) || std::isinf(x)) {
    std::string word = std::isnan(x) ? "nan" : "inf";
    if (conversion >= 'A' && conversion <= 'Z') word = text::upper(word);
    return (std::signbit(x) && !std::isnan(x) ? "-" : sign) + word;
  }
  std::string spec = fmt::format("%{}.{}{}", sign, precision < 0 ? 6 : precision, conversion);
  std::string out(std::snprintf(nullptr, 0, spec.c_str(), x) + 1, '\0');
  std::snprintf(out.data(), out.size(), spec.c_str(), x);
  out.pop_back();
  return out;
}

// A width or precision in a % format, advancing `i` past its digits; large ones would only exhaust memory.
static int read_count(std::string_view format, size_t& i) {
  int n = 0;
  for (; i < format.size() && format[i] >= '0' && format[i] <= '9'; ++i) {
    n = n * 10 + (format[i] - '0');
    if (n > 100000) fail("width or precision too large in format string");
  }
  return n;
}

std::string percent_format(std::string_view format, const Value& args) {
  std::vector<Value> values = args.is_tuple() ? args.as_list() : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) fail("incomplete format");
    bool left = false, zero = false;
    char sign = 0;
    for (; i < format.size() && std::string_view("-0+ #").find(format[i]) != std::string_view::npos; ++i) {
      if (format[i] == '-') left = true;
      if (format[i] == '0') zero = true;
      if (format[i] == '+' || (format[i] == ' ' && sign != '+')) sign = format[i];
    }
    int width = read_count(format, i);
    int precision = -1;
    if (i < format.size() && format[i] == '.') precision = read_count(format, ++i);
    if (i >= format.size()) fail("incomplete format");
    char conversion = format[i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) fail("not enough arguments for format string");
    const Value& value = values[next++];
    std::string body;
    if (conversion == 's' || conversion == 'r') {
      body = conversion == 's' ? value.str() : value.repr();
      if (precision >= 0) body = text::encode(text::decode(body).substr(0, precision));
      zero = false;
    } else if (conversion == 'c') {
      body =
          value.is_string() ? value.as_string() : text::encode(std::u32string(1, char32_t(value.as_int())));
      zero = false;
    } else if (std::string_view("diouxXeEfFgG").find(conversion) != std::string_view::npos) {
      body = format_number(conversion == 'u' ? 'd' : conversion, value, precision, sign);
    } else {
      fail("unsupported format character '{}'", conversion);
    }
    out += pad(std::move(body), width, left, zero);
  }
  if (next < values.size()) fail("not all arguments converted during string formatting");
  return out;
}

std::string brace_format(std::string_view format, const Args& args) {
  std::string out;
  int64_t automatic = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') fail("single '}}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string_view::npos) fail("single '{{' encountered in format string");
    std::string_view field = format.substr(i + 1, close - i - 1);
    char conversion = 's';
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r'))
        fail("unsupported conversion in format field '{}'", field);
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    if (field.find(':') != std::string_view::npos) fail("format specs ('{}') are not supported", field);
    const Value* value = nullptr;
    if (auto number = field.empty() ? std::optional<int64_t>(automatic++) : digits_value(field)) {
      if (*number >= static_cast<int64_t>(args.positional.size()))
        fail("replacement index {} out of range for format", *number);
      value = &args.positional[*number];
    } else {
      for (const auto& [name, v] : args.keyword)
        if (name == field) value = &v;
      if (!value) fail("format field '{}' was not given", field);
    }
    out += conversion == 'r' ? value->repr() : value->str();
    i = close;
  }
  return out;
}

}  // namespace gerbil::jinja
