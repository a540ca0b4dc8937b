// The main() of every test executable. It differs from gtest_main in one way: when every test that ran
// was skipped (e.g. no fixtures on this machine), it exits with kAllSkippedExitCode, which
// tests/CMakeLists.txt declares as CTest's SKIP_RETURN_CODE, so CTest reports the executable as skipped
// instead of passed. An executable that ran at least one test to success passes (its skipped tests are
// listed in its output); any failure fails it.
#include <gtest/gtest.h>

#include "support/paths.h"

// GCC says __SANITIZE_ADDRESS__ under -fsanitize=address; clang (before 16) only __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define GERBIL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GERBIL_TEST_ASAN 1
#endif
#endif

#if defined(GERBIL_TEST_ASAN)
#include <dlfcn.h>

namespace {

// Under LeakSanitizer: loads Mesa's lavapipe Vulkan driver for the whole process (RTLD_NODELETE); where it
// is absent nothing happens. The Vulkan loader dlcloses drivers when Dawn destroys its instance; a block the
// driver allocated once and still points to from its globals then has no pointer left (its data pages are
// gone), and LeakSanitizer reports it at exit from a nameless module that lsan_suppressions.txt cannot name
// (128 bytes from realloc in lavapipe 25.0.7, on every GPU test). Kept loaded, the block stays reachable.
void keep_the_vulkan_driver_loaded() {
  dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
}

}  // namespace
#endif

int main(int argc, char** argv) {
#if defined(GERBIL_TEST_ASAN)
  keep_the_vulkan_driver_loaded();
#endif
  ::testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  const ::testing::UnitTest& run = *::testing::UnitTest::GetInstance();
  if (result == 0 && run.test_to_run_count() > 0 && run.skipped_test_count() == run.test_to_run_count())
    return gerbil::test::kAllSkippedExitCode;
  return result;
}
