// fuzz-link: src/generate/json_constraint.cpp src/generate/regex_automaton.cpp gerbil_tokenizer
// A request's JSON schema (response_format, a tool's parameters) through the structured-output compiler
// (src/generate/json_constraint.h), then the constraint it builds walked over a byte-level vocabulary: the input
// is the schema, the part separator, and the bytes the walk prefers (each step takes the preferred byte's token
// when the mask allows it, else the first allowed one). Any schema must compile or be refused with
// gerbil::Error; a compiled constraint must never leave no token allowed, never refuse a token its mask allowed,
// and allow the end of sequence exactly when its text is complete.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "generate/json_constraint.h"

namespace {

using nlohmann::json;

void check(bool condition) {
  if (!condition) __builtin_trap();
}

// GPT-2's byte-level alphabet: byte b is the character byte_char(b) of a vocabulary entry.
std::string byte_char(int b) {
  bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int offset = 0;
  if (!printable)
    for (int c = 0; c < b; ++c) offset += !((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF));
  unsigned code = printable ? unsigned(b) : 256u + unsigned(offset);
  std::string utf8;
  if (code < 0x80) {
    utf8 += char(code);
  } else {
    utf8 += char(0xC0 | (code >> 6));
    utf8 += char(0x80 | (code & 0x3F));
  }
  return utf8;
}

// Every byte, a few JSON pieces of several bytes, and an end-of-sequence token (the last id).
const gerbil::Tokenizer& vocabulary() {
  static const gerbil::Tokenizer tokenizer = [] {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
    int id = 256;
    for (const char* piece : {"{\"", "\":", "\",", "\"}", "true", "false", "null", "12", ".5", "e-", "[]", "{}", "\\u00"})
      vocab[piece] = id++;
    json added = json::array({{{"id", id}, {"content", "<eos>"}, {"special", true}, {"single_word", false},
                               {"lstrip", false}, {"rstrip", false}, {"normalized", false}}});
    json tokenizer_json = {{"version", "1.0"}, {"added_tokens", added}, {"normalizer", nullptr},
                           {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
                           {"post_processor", nullptr}, {"decoder", {{"type", "ByteLevel"}}},
                           {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
    return gerbil::Tokenizer::from_json(tokenizer_json, "fuzz-json-schema-vocabulary.json");
  }();
  return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const gerbil::fuzz::TwoParts parts = gerbil::fuzz::split_parts(gerbil::fuzz::as_text(data, size));
  const std::string_view preferred = parts.second;
  json schema = json::parse(parts.first, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  const gerbil::Tokenizer& tokenizer = vocabulary();
  const int32_t eos = int32_t(tokenizer.vocab_size()) - 1;
  return gerbil::fuzz::expect_clean_rejection([&] {
    auto constraint = gerbil::make_json_constraint(gerbil::JsonGrammar::from_schema(schema, "schema"),
                                                   gerbil::TokenTrie::of(tokenizer), {eos});
    std::vector<uint8_t> allowed(tokenizer.vocab_size());
    for (size_t step = 0; step < 256; ++step) {
      std::fill(allowed.begin(), allowed.end(), 1);
      constraint->mask(allowed);
      check(bool(allowed[size_t(eos)]) == constraint->complete());
      int32_t id = -1;
      if (step < preferred.size() && allowed[uint8_t(preferred[step])]) id = uint8_t(preferred[step]);
      for (size_t i = 0; id < 0 && i < allowed.size(); ++i)
        if (allowed[i]) id = int32_t(i);
      check(id >= 0);
      if (id == eos) return;
      constraint->accept(id);
    }
  });
}
