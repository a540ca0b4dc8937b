// The values a template computes with, modelled on the Python objects jinja2 sees: undefined, None,
// bool, int, float, str, list/tuple, dict (insertion ordered, string keys), namespace and callables.
// Strings, lists and dicts are immutable once built (the sandbox allows no mutation), so copies share
// storage; a namespace is the one mutable object and has reference semantics, as in Python.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gerbil::jinja {

class Value;
struct Runtime;

// Call arguments: positional, then keyword (in call order).
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Something callable from a template: a global function, a bound method, a macro.
struct Function {
  std::string name;
  std::function<Value(Runtime&, const Args&)> call;
};

// An insertion-ordered dict with string keys; lookups are linear, dicts in templates are small.
class Dict {
 public:
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key in place
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const;  // defined below Value: clang needs the entry type complete to instantiate size()

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;  // only changes how it prints: (1, 2) instead of [1, 2]
};

// jinja2's namespace(): attributes assignable with {% set ns.attr = ... %}.
struct Namespace {
  Dict attributes;
};

// jinja2's Undefined: carries the message to report when it is used in a way that needs a value.
struct Undefined {
  std::string message;
};

struct None {};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

  Value() : data_(Undefined{}) {}
  static Value undefined(std::string message) { return Value(Undefined{std::move(message)}); }
  static Value none() { return Value(None{}); }
  Value(bool b) : data_(b) {}
  Value(int64_t i) : data_(i) {}
  Value(int i) : data_(static_cast<int64_t>(i)) {}
  Value(double f) : data_(f) {}
  Value(std::string s) : data_(std::make_shared<const std::string>(std::move(s))) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::vector<Value> items, bool tuple = false)
      : data_(std::make_shared<const ListData>(ListData{std::move(items), tuple})) {}
  Value(Dict dict) : data_(std::make_shared<const Dict>(std::move(dict))) {}
  Value(std::shared_ptr<Namespace> ns) : data_(std::move(ns)) {}
  Value(std::shared_ptr<const Function> fn) : data_(std::move(fn)) {}

  static Value from_json(const nlohmann::json& json);
  static Value from_json(const nlohmann::ordered_json& json);
  // Fails for undefined, namespaces and functions, which have no JSON form.
  nlohmann::ordered_json to_json() const;

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python bool is an int
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_namespace() const { return kind() == Kind::Namespace; }
  bool is_function() const { return kind() == Kind::Function; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;   // int or bool
  double as_float() const;  // any number
  const std::string& as_string() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  const std::vector<Value>& as_list() const {
    return std::get<std::shared_ptr<const ListData>>(data_)->items;
  }
  bool is_tuple() const { return is_list() && std::get<std::shared_ptr<const ListData>>(data_)->tuple; }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(data_); }
  const std::string& undefined_message() const { return std::get<Undefined>(data_).message; }

  // Python truthiness; undefined is false.
  bool truthy() const;
  // Python str(): what {{ value }} prints. Undefined prints as "".
  std::string str() const;
  // Python repr(), used for items inside printed lists and dicts.
  std::string repr() const;
  // Python's name for the type, for error messages ("str", "int", "NoneType", ...).
  std::string type_name() const;

 private:
  using Data = std::variant<Undefined, None, bool, int64_t, double, std::shared_ptr<const std::string>,
                            std::shared_ptr<const ListData>, std::shared_ptr<const Dict>,
                            std::shared_ptr<Namespace>, std::shared_ptr<const Function>>;
  explicit Value(Data data) : data_(std::move(data)) {}
  Data data_;
};

inline size_t Dict::size() const { return entries_.size(); }

// Python ==. Undefined equals only undefined.
bool equal(const Value& a, const Value& b);
// Python <, defined between numbers, between strings and between lists; anything else fails.
bool less(const Value& a, const Value& b);

// json.dumps as transformers' tojson filter calls it.
struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // per-level indent text; absent for a one-line dump
  std::optional<std::string> item_separator;  // absent: ", " on one line, "," when indenting
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string to_json_text(const Value& value, const JsonOptions& options);

}  // namespace gerbil::jinja
