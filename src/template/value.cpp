#include "template/value.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "gerbil/error.h"
#include "template/text.h"

namespace gerbil::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries_)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

template <typename Json>
static Value value_from_json(const Json& json) {
  switch (json.type()) {
    case Json::value_t::null:
      return Value::none();
    case Json::value_t::boolean:
      return Value(json.template get<bool>());
    case Json::value_t::number_integer:
      return Value(json.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      auto u = json.template get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("integer {} is too large for a template value", u);
      return Value(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value(json.template get<double>());
    case Json::value_t::string:
      return Value(json.template get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_from_json(item));
      return Value(std::move(items));
    }
    case Json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) dict.set(key, value_from_json(item));
      return Value(std::move(dict));
    }
    default:
      fail("JSON value of type {} cannot be a template value", json.type_name());
  }
}

Value Value::from_json(const nlohmann::json& json) { return value_from_json(json); }
Value Value::from_json(const nlohmann::ordered_json& json) { return value_from_json(json); }

nlohmann::ordered_json Value::to_json() const {
  switch (kind()) {
    case Kind::None:
      return nullptr;
    case Kind::Bool:
      return as_bool();
    case Kind::Int:
      return as_int();
    case Kind::Float:
      return as_float();
    case Kind::String:
      return as_string();
    case Kind::List: {
      auto out = nlohmann::ordered_json::array();
      for (const auto& item : as_list()) out.push_back(item.to_json());
      return out;
    }
    case Kind::Dict: {
      auto out = nlohmann::ordered_json::object();
      for (const auto& [key, item] : as_dict().entries()) out[key] = item.to_json();
      return out;
    }
    default:
      fail("a template value of type {} has no JSON form", type_name());
  }
}

int64_t Value::as_int() const {
  return is_bool() ? static_cast<int64_t>(as_bool()) : std::get<int64_t>(data_);
}

double Value::as_float() const {
  return is_float() ? std::get<double>(data_) : static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return as_bool();
    case Kind::Int:
      return as_int() != 0;
    case Kind::Float:
      return as_float() != 0.0;
    case Kind::String:
      return !as_string().empty();
    case Kind::List:
      return !as_list().empty();
    case Kind::Dict:
      return as_dict().size() > 0;
    case Kind::Namespace:
    case Kind::Function:
      return true;
  }
  return false;
}

std::string Value::str() const {
  switch (kind()) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return as_bool() ? "True" : "False";
    case Kind::Int:
      return std::to_string(as_int());
    case Kind::Float:
      return text::float_repr(as_float());
    case Kind::String:
      return as_string();
    case Kind::Namespace:
      return "<Namespace " + Value(as_namespace().attributes).repr() + ">";
    case Kind::Function:
      return "<function " + as_function().name + ">";
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::String:
      return text::repr(as_string());
    case Kind::List: {
      const auto& items = as_list();
      std::string out = is_tuple() ? "(" : "[";
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i].repr();
      if (is_tuple() && items.size() == 1) out += ",";
      return out + (is_tuple() ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : as_dict().entries()) {
        out += (first ? "" : ", ") + text::repr(key) + ": " + item.repr();
        first = false;
      }
      return out + "}";
    }
    default:
      return str();
  }
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return is_tuple() ? "tuple" : "list";
    case Kind::Dict:
      return "dict";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Function:
      return "function";
  }
  return "?";
}

bool equal(const Value& a, const Value& b) {
  using Kind = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.as_string() == b.as_string();
    case Kind::List: {
      const auto &x = a.as_list(), &y = b.as_list();
      if (a.is_tuple() != b.is_tuple() || x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case Kind::Dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, item] : x.entries()) {
        const Value* other = y.find(key);
        if (!other || !equal(item, *other)) return false;
      }
      return true;
    }
    case Kind::Namespace:
      return &a.as_namespace() == &b.as_namespace();
    case Kind::Function:
      return &a.as_function() == &b.as_function();
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_undefined()) fail("{}", a.undefined_message());
  if (b.is_undefined()) fail("{}", b.undefined_message());
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string())
    return a.as_string() < b.as_string();  // UTF-8 order is code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

static void write_json(std::string& out, const Value& value, const JsonOptions& options, int depth) {
  using Kind = Value::Kind;
  const std::string& item_separator = *options.item_separator;
  auto newline = [&](int level) {
    if (!options.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *options.indent;
  };
  switch (value.kind()) {
    case Kind::None:
      out += "null";
      return;
    case Kind::Bool:
      out += value.as_bool() ? "true" : "false";
      return;
    case Kind::Int:
      out += std::to_string(value.as_int());
      return;
    case Kind::Float: {
      double x = value.as_float();
      out += std::isnan(x) ? "NaN" : std::isinf(x) ? (x < 0 ? "-Infinity" : "Infinity") : text::float_repr(x);
      return;
    }
    case Kind::String:
      out += text::json_quote(value.as_string(), options.ensure_ascii);
      return;
    case Kind::List: {
      const auto& items = value.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_separator;
        newline(depth + 1);
        write_json(out, items[i], options, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Kind::Dict: {
      auto entries = value.as_dict().entries();
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (options.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto& x, auto& y) { return x.first < y.first; });
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_separator;
        newline(depth + 1);
        out += text::json_quote(entries[i].first, options.ensure_ascii);
        out += options.key_separator;
        write_json(out, entries[i].second, options, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      fail("Object of type {} is not JSON serializable", value.type_name());
  }
}

std::string to_json_text(const Value& value, const JsonOptions& options) {
  JsonOptions resolved = options;
  if (!resolved.item_separator) resolved.item_separator = options.indent ? "," : ", ";
  std::string out;
  write_json(out, value, resolved, 0);
  return out;
}

}  // namespace gerbil::jinja
