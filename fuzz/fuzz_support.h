// Helpers shared by the fuzz targets (fuzz/fuzz_<name>.cpp). Each target defines LLVMFuzzerTestOneInput
// and is built twice: with libFuzzer (clang, scripts/fuzz.sh) and with fuzz/replay_main.cpp (any compiler,
// a CTest test replaying the seeds and regression inputs). See fuzz/README.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <utility>

#include "gerbil/error.h"

namespace gerbil::fuzz {

// The input as text.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Inputs that hold two files (config.json and generation_config.json, a template and its messages)
// separate them with this line; the second part is empty when the separator is absent.
inline constexpr std::string_view kPartSeparator = "\n#---#\n";
struct TwoParts {
  std::string_view first, second;
};
TwoParts split_parts(std::string_view input);

// Writes BYTES to NAME in a folder private to this process (in /dev/shm when there is one: the
// parsers under test read files) and returns its path. The folder is removed at exit.
std::filesystem::path write_temp_file(std::string_view name, std::string_view bytes);

// Runs PARSE; a gerbil::Error is the parser rejecting a bad input, which is what it should do. Anything
// else escaping (another exception type, a crash, a sanitizer report) is a bug the fuzzer reports.
template <typename Parse>
int expect_clean_rejection(Parse&& parse) {
  try {
    std::forward<Parse>(parse)();
  } catch (const gerbil::Error&) {
  }
  return 0;
}

}  // namespace gerbil::fuzz
