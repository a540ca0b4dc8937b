#include "tokenizer/json_field.h"

#include "gerbil/error.h"

namespace gerbil::tok {

std::string JsonField::path() const {
  if (!parent_path_) return "";
  if (key_.empty()) return fmt::format("{}[{}]", *parent_path_, index_);
  return parent_path_->empty() ? std::string(key_) : fmt::format("{}.{}", *parent_path_, key_);
}

JsonField JsonField::operator[](std::string_view key) const {
  std::optional<JsonField> member = find(key);
  if (!member) fail(fmt::format("missing field '{}'", key));
  return *member;
}

std::optional<JsonField> JsonField::find(std::string_view key) const {
  if (!value_->is_object()) fail(fmt::format("expected an object with field '{}'", key));
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonField(*it, *this, std::make_shared<const std::string>(path()), it.key(), 0);
}

std::vector<JsonField> JsonField::elements() const {
  if (!value_->is_array()) fail("expected an array");
  auto parent_path = std::make_shared<const std::string>(path());
  std::vector<JsonField> out;
  out.reserve(value_->size());
  for (size_t i = 0; i < value_->size(); ++i)
    out.push_back(JsonField((*value_)[i], *this, parent_path, {}, i));
  return out;
}

std::vector<std::pair<std::string_view, JsonField>> JsonField::members() const {
  if (!value_->is_object()) fail("expected an object");
  auto parent_path = std::make_shared<const std::string>(path());
  std::vector<std::pair<std::string_view, JsonField>> out;
  out.reserve(value_->size());
  for (auto it = value_->begin(); it != value_->end(); ++it)
    out.emplace_back(it.key(), JsonField(*it, *this, parent_path, it.key(), 0));
  return out;
}

std::string JsonField::string() const {
  if (!value_->is_string()) fail("expected a string");
  return value_->get<std::string>();
}

bool JsonField::boolean() const {
  if (!value_->is_boolean()) fail("expected true or false");
  return value_->get<bool>();
}

int64_t JsonField::integer() const {
  if (!value_->is_number_integer()) fail("expected an integer");
  return value_->get<int64_t>();
}

std::string JsonField::string_or(std::string_view key, std::string_view fallback) const {
  std::optional<JsonField> member = find(key);
  return member ? member->string() : std::string(fallback);
}

bool JsonField::boolean_or(std::string_view key, bool fallback) const {
  std::optional<JsonField> member = find(key);
  return member ? member->boolean() : fallback;
}

void JsonField::fail(std::string_view message) const {
  std::string where = path();
  gerbil::fail("{}: field '{}': {}", *file_, where.empty() ? "(root)" : where, message);
}

}  // namespace gerbil::tok
