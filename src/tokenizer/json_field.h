// A JSON value together with the file and field path it came from, so that every complaint about
// a tokenizer file names both: "/m/tokenizer.json: field 'model.merges[7]': names unknown token 'xy'".
// The path is only spelled out when needed, which keeps walking half a million merges cheap.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gerbil::tok {

class JsonField {
 public:
  // The root of a parsed file.
  JsonField(const nlohmann::json& value, const std::string& file) : value_(&value), file_(&file) {}

  const nlohmann::json& json() const { return *value_; }
  const std::string& file() const { return *file_; }
  std::string path() const;
  bool is_null() const { return value_->is_null(); }
  bool is_string() const { return value_->is_string(); }

  // The member `key`; fails when absent or null.
  JsonField operator[](std::string_view key) const;
  // The member `key`, or nothing when absent or null.
  std::optional<JsonField> find(std::string_view key) const;
  // The elements of an array; fails for anything else.
  std::vector<JsonField> elements() const;
  // The members of an object as (name, value); fails for anything else.
  std::vector<std::pair<std::string_view, JsonField>> members() const;

  std::string string() const;
  bool boolean() const;
  int64_t integer() const;

  // Optional members with a default when absent or null.
  std::string string_or(std::string_view key, std::string_view fallback) const;
  bool boolean_or(std::string_view key, bool fallback) const;

  // The "type" member of a component object (normalizer, decoder, ...).
  std::string type() const { return (*this)["type"].string(); }

  [[noreturn]] void fail(std::string_view message) const;

 private:
  JsonField(const nlohmann::json& value, const JsonField& parent,
            std::shared_ptr<const std::string> parent_path, std::string_view key, size_t index)
      : value_(&value), file_(parent.file_), parent_path_(std::move(parent_path)), key_(key), index_(index) {}

  const nlohmann::json* value_;
  const std::string* file_;
  std::shared_ptr<const std::string> parent_path_;  // null at the root
  std::string_view key_;                            // member name, or empty for an array element
  size_t index_ = 0;                                // array index when key_ is empty
};

}  // namespace gerbil::tok
