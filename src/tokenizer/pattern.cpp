#include "tokenizer/pattern.h"

#include <pcre2.h>

#include "gerbil/error.h"
#include "tokenizer/json_field.h"
#include "tokenizer/utf8.h"

namespace gerbil::tok {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Match data and a JIT stack per thread: shared by every regex, so matching allocates nothing and
// one Tokenizer can encode on many threads at once.
class MatchScratch {
 public:
  MatchScratch()
      : data_(pcre2_match_data_create(1, nullptr)),
        stack_(pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr)),
        context_(pcre2_match_context_create(nullptr)) {
    if (stack_) pcre2_jit_stack_assign(context_, nullptr, stack_);
  }
  ~MatchScratch() {
    pcre2_match_context_free(context_);
    pcre2_jit_stack_free(stack_);
    pcre2_match_data_free(data_);
  }
  pcre2_match_data* data() const { return data_; }
  pcre2_match_context* context() const { return context_; }

 private:
  pcre2_match_data* data_;
  pcre2_jit_stack* stack_;
  pcre2_match_context* context_;
};

MatchScratch& scratch() {
  thread_local MatchScratch instance;
  return instance;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

std::string translate_oniguruma(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out.push_back(pattern[i]);
      continue;
    }
    char escaped = pattern[++i];
    if (escaped == 's')
      out += "\\p{White_Space}";
    else if (escaped == 'S')
      out += "\\P{White_Space}";
    else
      out += {'\\', escaped};
  }
  return out;
}

Regex::Regex(std::string_view pattern) {
  auto compile = [](std::string_view text, int& error, PCRE2_SIZE& offset) {
    return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), PCRE2_UTF | PCRE2_UCP,
                         &error, &offset, nullptr);
  };
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto code = std::make_shared<Code>();
  code->code = compile(translate_oniguruma(pattern), error, offset);
  if (!code->code) {
    // The translation only swaps escapes, so the pattern as written has the same error: report
    // that one, whose offset the user can find.
    pcre2_code_free(compile(pattern, error, offset));
    fail("bad regex '{}': {} (at offset {})", pattern, pcre2_message(error), offset);
  }
  code->jit = pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE) == 0;
  code_ = std::move(code);
}

bool Regex::find(std::string_view text, size_t from, size_t& begin, size_t& end) const {
  MatchScratch& s = scratch();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // Our texts are validated once up front, so PCRE2 need not re-check UTF-8 on every call.
  int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), from, 0, s.data(), s.context())
                      : pcre2_match(code_->code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, s.data(),
                                    s.context());
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) fail("regex match failed at offset {}: {}", from, pcre2_message(rc));
  PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data());
  begin = ovector[0];
  end = ovector[1];
  return true;
}

Pattern Pattern::literal(std::string text) {
  Pattern pattern;
  pattern.literal_ = std::move(text);
  return pattern;
}

Pattern Pattern::regex(std::string_view text) {
  Pattern pattern;
  pattern.regex_ = std::make_shared<const Regex>(text);
  return pattern;
}

Pattern Pattern::from_json(const JsonField& field) {
  if (auto text = field.find("String")) return literal(text->string());
  if (auto regex_text = field.find("Regex")) {
    try {
      return regex(regex_text->string());
    } catch (const Error& e) {
      regex_text->fail(e.what());
    }
  }
  field.fail("expected {\"String\": ...} or {\"Regex\": ...}");
}

bool Pattern::find(std::string_view text, size_t from, size_t& begin, size_t& end) const {
  if (regex_) return regex_->find(text, from, begin, end);
  if (literal_.empty()) return false;
  begin = text.find(literal_, from);
  if (begin == std::string_view::npos) return false;
  end = begin + literal_.size();
  return true;
}

void Pattern::cut(std::string_view text, std::vector<PatternPiece>& pieces) const {
  pieces.clear();
  size_t previous = 0, from = 0, begin = 0, end = 0;
  while (from <= text.size() && find(text, from, begin, end)) {
    if (previous != begin) pieces.push_back({previous, begin, false});
    pieces.push_back({begin, end, true});
    previous = end;
    // After an empty match, step over one character so the search moves on.
    from = end > begin ? end : end + (end < text.size() ? utf8_sequence(text, end) : 1);
  }
  if (previous != text.size()) pieces.push_back({previous, text.size(), false});
}

std::string Pattern::replace(std::string_view text, std::string_view content) const {
  std::string out;
  out.reserve(text.size());
  std::vector<PatternPiece> pieces;
  cut(text, pieces);
  for (const PatternPiece& piece : pieces)
    if (piece.is_match)
      out += content;
    else
      out += text.substr(piece.begin, piece.end - piece.begin);
  return out;
}

}  // namespace gerbil::tok
