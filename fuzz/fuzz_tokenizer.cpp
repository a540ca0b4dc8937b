// fuzz-link: gerbil_tokenizer
// tokenizer.json: the loader, then the tokenizer it built (normalizer, pre-tokenizer regexes, BPE,
// added tokens, post-processor, decoder) on a few texts, decoded back whole and one id at a time.
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

namespace {

// ASCII with spaces and digits, accents and CJK, an emoji, a chat marker and stray whitespace.
constexpr std::string_view kTexts[] = {
    "Hello, world! 123 4567",
    "  caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80\n\n\ttab",
    "<|im_start|>user\n<s>[INST] hi</s><bos><start_of_turn>",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gerbil::fuzz::write_temp_file("tokenizer.json", gerbil::fuzz::as_text(data, size));
  return gerbil::fuzz::expect_clean_rejection([&] {
    gerbil::Tokenizer tokenizer = gerbil::Tokenizer::load(file);
    for (std::string_view text : kTexts) {
      std::vector<int32_t> ids = tokenizer.encode(text, /*add_special_tokens=*/true);
      (void)tokenizer.decode(ids);
      (void)tokenizer.decode(ids, /*skip_special_tokens=*/true);
      gerbil::StreamDecoder stream(tokenizer);
      for (int32_t id : ids) (void)stream.step(id);
      (void)stream.finish();
    }
  });
}
