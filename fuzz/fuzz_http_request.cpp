// fuzz-link: src/server/request.cpp
// Fuzzes the HTTP request parser (src/server/request.h): any body must parse or be refused with an ApiError
// (a 4xx naming the field); any other exception, a crash or a hang is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/request.h"

namespace {

template <typename Parse>
void refuse_or_parse(Parse parse) {
  try {
    parse();
  } catch (const gerbil::server::ApiError& error) {
    if (error.status < 400 || error.status >= 500) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gerbil::server;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  refuse_or_parse([&] { parse_completion_request(body, Endpoint::Chat); });
  refuse_or_parse([&] { parse_completion_request(body, Endpoint::Completion); });
  refuse_or_parse([&] { parse_tokenize_request(body); });
  refuse_or_parse([&] { parse_detokenize_request(body); });
  return 0;
}
