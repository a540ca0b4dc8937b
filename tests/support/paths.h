// Where tests find their data: the reference fixtures in ../shared/fixtures (relative to the project
// root) and the tokenizer files scripts/setup.sh unpacked into .deps/tokenizers. A test that needs data
// that is absent skips with a message saying what is missing, never passes silently; under CI (CI=true in
// the environment) it fails instead, so that a CI run without its data cannot pass by skipping.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace gerbil::test {

std::filesystem::path project_root();
std::filesystem::path fixtures_dir();           // ../shared/fixtures, or $GERBIL_FIXTURES
std::filesystem::path tokenizer_dir(const std::string& name);  // .deps/tokenizers/<name>, or $GERBIL_TOKENIZERS/<name>
std::string read_text(const std::filesystem::path& path);

// Whether missing test data fails the test instead of skipping it: CI is set and not "false" or "0".
bool missing_data_fails();

// The exit code of a test executable whose tests were all skipped (tests/support/gtest_main.cpp), which
// CTest reports as skipped (SKIP_RETURN_CODE); 77 as in automake.
inline constexpr int kAllSkippedExitCode = 77;

}  // namespace gerbil::test

// Skips the current test unless PATH exists, naming what is missing and how to get it; fails it instead
// under CI (missing_data_fails()).
#define GERBIL_REQUIRE_PATH(path, how)                                                                 \
  do {                                                                                                 \
    if (!std::filesystem::exists(path)) {                                                              \
      if (::gerbil::test::missing_data_fails())                                                        \
        GTEST_FAIL() << "missing " << (path).string() << " (" << (how) << "); CI is set, so missing "  \
                     << "test data fails the run";                                                     \
      GTEST_SKIP() << "missing " << (path).string() << " (" << (how) << ")";                           \
    }                                                                                                  \
  } while (0)

#define GERBIL_REQUIRE_FIXTURES() \
  GERBIL_REQUIRE_PATH(::gerbil::test::fixtures_dir(), "the reference fixtures live in ../shared/fixtures")
