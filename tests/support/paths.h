// Where tests find their data: the reference fixtures in ../shared/fixtures (relative to the project
// root) and the tokenizer files scripts/setup.sh unpacked into .deps/tokenizers. A test that needs data
// that is absent skips with a message saying what is missing, never passes silently.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace gerbil::test {

std::filesystem::path project_root();
std::filesystem::path fixtures_dir();           // ../shared/fixtures, or $GERBIL_FIXTURES
std::filesystem::path tokenizer_dir(const std::string& name);  // .deps/tokenizers/<name>
std::string read_text(const std::filesystem::path& path);

}  // namespace gerbil::test

// Skips the current test unless PATH exists, naming what is missing and how to get it.
#define GERBIL_REQUIRE_PATH(path, how)                                                       \
  do {                                                                                       \
    if (!std::filesystem::exists(path))                                                      \
      GTEST_SKIP() << "missing " << (path).string() << " (" << (how) << ")";                 \
  } while (0)

#define GERBIL_REQUIRE_FIXTURES() \
  GERBIL_REQUIRE_PATH(::gerbil::test::fixtures_dir(), "the reference fixtures live in ../shared/fixtures")
