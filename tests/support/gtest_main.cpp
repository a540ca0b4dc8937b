// The main() of every test executable. It differs from gtest_main in one way: when every test that ran
// was skipped (e.g. no fixtures on this machine), it exits with kAllSkippedExitCode, which
// tests/CMakeLists.txt declares as CTest's SKIP_RETURN_CODE, so CTest reports the executable as skipped
// instead of passed. An executable that ran at least one test to success passes (its skipped tests are
// listed in its output); any failure fails it.
#include <gtest/gtest.h>

#include "support/paths.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  const ::testing::UnitTest& run = *::testing::UnitTest::GetInstance();
  if (result == 0 && run.test_to_run_count() > 0 && run.skipped_test_count() == run.test_to_run_count())
    return gerbil::test::kAllSkippedExitCode;
  return result;
}
