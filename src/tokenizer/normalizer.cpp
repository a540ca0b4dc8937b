#include "tokenizer/normalizer.h"

#include <cstdlib>
#include <vector>

#include <utf8proc.h>

#include "gerbil/error.h"
#include "tokenizer/json_field.h"
#include "tokenizer/pattern.h"
#include "tokenizer/utf8.h"

namespace gerbil::tok {

namespace {

// A character normalization leaves alone and that never combines with a neighbour: no
// decomposition, combining class 0, in no composition pair. Hangul composes algorithmically (not
// through utf8proc's tables), so it is never inert.
bool inert(char32_t cp) {
  if ((cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0xAC00 && cp <= 0xD7A3)) return false;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  return p->combining_class == 0 && p->decomp_seqindex == UINT16_MAX && p->comb_index == UINT16_MAX;
}

void normalize_with_utf8proc(std::string_view text, UnicodeForm form, std::string& out) {
  int options = UTF8PROC_STABLE;
  if (form == UnicodeForm::NFC || form == UnicodeForm::NFKC) options |= UTF8PROC_COMPOSE;
  if (form == UnicodeForm::NFD || form == UnicodeForm::NFKD) options |= UTF8PROC_DECOMPOSE;
  if (form == UnicodeForm::NFKC || form == UnicodeForm::NFKD) options |= UTF8PROC_COMPAT;
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                         static_cast<utf8proc_ssize_t>(text.size()), &result,
                                         static_cast<utf8proc_option_t>(options));
  if (length < 0) fail("Unicode normalization failed: {}", utf8proc_errmsg(length));
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
  std::free(result);
}

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(UnicodeForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = unicode_normalize(text, form_); }

 private:
  UnicodeForm form_;
};

// Adds `prepend` in front of any non-empty text (SentencePiece's leading '▁').
class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prepend) : prepend_(std::move(prepend)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

class Replace final : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

// Removes leading and/or trailing White_Space.
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      size_t pos = 0;
      while (pos < end) {
        size_t next = pos;
        if (!is_white_space(next_code_point(text, next))) break;
        pos = next;
      }
      begin = pos;
    }
    if (right_) {
      // Step back over whole characters: find each one's lead byte.
      while (end > begin) {
        size_t lead = end - 1;
        while (lead > begin && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
        size_t pos = lead;
        if (!is_white_space(next_code_point(text, pos))) break;
        end = lead;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::string unicode_normalize(std::string_view text, UnicodeForm form) {
  // Cut the text into blocks that normalize independently: a block starts before every ASCII or
  // inert character (neither can combine with what precedes it) and after every inert one. Only
  // blocks holding some other character go through utf8proc.
  std::string out;
  out.reserve(text.size());
  size_t block = 0, copied = 0;  // start of the current block; end of what is already in `out`
  bool block_needs_work = false;
  auto close_block = [&](size_t end) {
    if (!block_needs_work) return;
    out.append(text.substr(copied, block - copied));
    normalize_with_utf8proc(text.substr(block, end - block), form, out);
    copied = end;
    block_needs_work = false;
  };
  size_t pos = 0;
  bool after_inert = false;
  while (pos < text.size()) {
    size_t start = pos;
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      close_block(start);
      block = start;
      ++pos;
      after_inert = false;
      continue;
    }
    char32_t cp = next_code_point(text, pos);
    bool is_inert = inert(cp);
    if (is_inert || after_inert) {
      close_block(start);
      block = start;
    }
    block_needs_work |= !is_inert;
    after_inert = is_inert;
  }
  close_block(text.size());
  out.append(text.substr(copied));
  return out;
}

std::unique_ptr<Normalizer> make_normalizer(const JsonField& field) {
  if (field.is_null()) return nullptr;
  std::string type = field.type();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::NFKD);
  if (type == "Prepend") return std::make_unique<Prepend>(field["prepend"].string());
  if (type == "Replace")
    return std::make_unique<Replace>(Pattern::from_json(field["pattern"]), field["content"].string());
  if (type == "Strip")
    return std::make_unique<Strip>(field.boolean_or("strip_left", true),
                                   field.boolean_or("strip_right", true));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const JsonField& step : field["normalizers"].elements())
      if (auto normalizer = make_normalizer(step)) steps.push_back(std::move(normalizer));
    return std::make_unique<Sequence>(std::move(steps));
  }
  field["type"].fail(fmt::format("unsupported normalizer type '{}'", type));
}

}  // namespace gerbil::tok
