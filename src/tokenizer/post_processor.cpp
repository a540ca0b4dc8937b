#include "tokenizer/post_processor.h"

#include "gerbil/error.h"
#include "tokenizer/json_field.h"

namespace gerbil::tok {

namespace {

// The "single" template: special-token ids around the encoded sequence. One element per template
// item; an empty `ids` vector marks the place of the sequence itself.
class TemplateProcessing final : public PostProcessor {
 public:
  explicit TemplateProcessing(std::vector<std::vector<int32_t>> items) : items_(std::move(items)) {}
  void process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 8);
    for (const std::vector<int32_t>& item : items_)
      out.insert(out.end(), item.empty() ? ids.begin() : item.begin(), item.empty() ? ids.end() : item.end());
    ids = std::move(out);
  }

 private:
  std::vector<std::vector<int32_t>> items_;
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& step : steps_) step->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::vector<int32_t> special_token_ids(const JsonField& special_tokens, const std::string& name,
                                       const JsonField& item, size_t vocab_size) {
  std::optional<JsonField> entry = special_tokens.find(name);
  if (!entry) item.fail(fmt::format("special token '{}' is not in post_processor.special_tokens", name));
  std::vector<int32_t> ids;
  for (const JsonField& id : (*entry)["ids"].elements()) {
    int64_t value = id.integer();
    if (value < 0 || static_cast<size_t>(value) >= vocab_size)
      id.fail(fmt::format("token id {} is outside the vocabulary (size {})", value, vocab_size));
    ids.push_back(static_cast<int32_t>(value));
  }
  if (ids.empty()) (*entry)["ids"].fail("expected at least one id");
  return ids;
}

std::unique_ptr<PostProcessor> make_template(const JsonField& field, size_t vocab_size) {
  JsonField single = field["single"];
  if (single.is_string()) single.fail("the string form of a template is not supported; expected a list");
  JsonField special_tokens = field["special_tokens"];
  std::vector<std::vector<int32_t>> items;
  for (const JsonField& item : single.elements()) {
    if (auto special = item.find("SpecialToken")) {
      items.push_back(special_token_ids(special_tokens, (*special)["id"].string(), *special, vocab_size));
    } else if (auto sequence = item.find("Sequence")) {
      if ((*sequence)["id"].string() != "A")
        (*sequence)["id"].fail("a single-sequence template can only hold A");
      items.emplace_back();
    } else {
      item.fail("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  return std::make_unique<TemplateProcessing>(std::move(items));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const JsonField& field, size_t vocab_size) {
  if (field.is_null()) return nullptr;
  std::string type = field.type();
  if (type == "TemplateProcessing") return make_template(field, vocab_size);
  if (type == "ByteLevel") return nullptr;
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (const JsonField& step : field["processors"].elements())
      if (auto processor = make_post_processor(step, vocab_size)) steps.push_back(std::move(processor));
    return std::make_unique<Sequence>(std::move(steps));
  }
  field["type"].fail(fmt::format("unsupported post_processor type '{}'", type));
}

}  // namespace gerbil::tok
