// fuzz-link: gerbil_template
// A Jinja chat template, then the messages JSON after the part separator, rendered as apply_chat_template
// does. Messages that are not JSON are replaced by a fixed conversation, so that every mutation of the
// template still renders.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "template/chat_template.h"

namespace {

const nlohmann::ordered_json& fallback_messages() {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": [{"type": "text", "text": "Why?"}]}
  ])");
  return messages;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gerbil::fuzz::TwoParts parts = gerbil::fuzz::split_parts(gerbil::fuzz::as_text(data, size));
  nlohmann::ordered_json messages =
      nlohmann::ordered_json::parse(parts.second, nullptr, /*allow_exceptions=*/false);
  if (messages.is_discarded()) messages = fallback_messages();
  return gerbil::fuzz::expect_clean_rejection([&] {
    gerbil::ChatTemplate chat(std::string(parts.first), "<s>", "</s>");
    (void)chat.render(messages, /*add_generation_prompt=*/true);
  });
}
