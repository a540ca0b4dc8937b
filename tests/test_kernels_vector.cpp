// The vectorised norm and element-wise kernels (kernels/vector.h) against the float64 references through
// their selftest checks, their grids, the seed fallback for shapes that are not whole vec4s, and the
// dispatchers' shape checks.
#include <algorithm>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "checks/selftest.h"
#include "support/kernel_checks.h"
#include "kernels/vector.h"
#include "support/device.h"

namespace gerbil::kernels {
namespace {

using ::testing::HasSubstr;

using test::device;

const std::vector<std::string> kVectorKernels = {"rmsnorm_vec4", "layernorm_welford", "silu_vec4",
                                                "gelu_vec4",    "add_vec4",          "mul_vec4"};

class VectorKernel : public ::testing::TestWithParam<std::string> {};

TEST_P(VectorKernel, MatchesFloat64Reference) {
  test::expect_check_passes(device(), kernel_checks(test::cpu_adapter(device())), GetParam());
}

INSTANTIATE_TEST_SUITE_P(All, VectorKernel, ::testing::ValuesIn(kVectorKernels));

// The kernels use no subgroup operations, so a device without the feature runs them the same way.
TEST(VectorKernels, PassWithoutSubgroups) {
  gpu::Device plain({.allow_subgroups = false});
  ASSERT_FALSE(plain.features().subgroups);
  uint64_t seed = std::random_device{}();
  const auto& names = kVectorKernels;
  for (const auto& check : kernel_checks(true)) {
    if (std::find(names.begin(), names.end(), check.kernel) == names.end()) continue;
    SCOPED_TRACE(check.kernel + ", seed " + std::to_string(seed));
    for (const auto& result : run_check(plain, check, seed))
      EXPECT_TRUE(result.passed()) << result.shape << ": relative error " << result.relative_error;
  }
}

TEST(VectorDispatch, GridsCoverOneVec4PerThreadAndOneRowPerWorkgroup) {
  EXPECT_EQ(elementwise_vec4_grid({4}), (Grid{1, 1, 1}));
  EXPECT_EQ(elementwise_vec4_grid({1024}), (Grid{1, 1, 1}));
  EXPECT_EQ(elementwise_vec4_grid({1028}), (Grid{2, 1, 1}));
  EXPECT_EQ(elementwise_vec4_grid({2048 * 4864}), (Grid{9728, 1, 1}));
  EXPECT_EQ(elementwise_vec4_grid({65536u * 1024u}), (Grid{65535, 2, 1}));  // folded
  EXPECT_EQ(rmsnorm_vec4_grid({2048, 896, 0}), (Grid{2048, 1, 1}));
  EXPECT_EQ(layernorm_welford_grid({70000, 896, 0}), (Grid{65535, 2, 1}));
}

TEST(VectorDispatch, ShapesThatAreNotWholeVec4sFallBackToTheSeedKernels) {
  auto buf = device().create_buffer("buf", 1 << 16);
  EXPECT_EQ(rmsnorm_vec4(device(), {&buf}, {&buf}, {&buf}, {3, 896, 0}).kernel, "rmsnorm_vec4");
  EXPECT_EQ(rmsnorm_vec4(device(), {&buf}, {&buf}, {&buf}, {3, 33, 0}).kernel, "rmsnorm");
  EXPECT_EQ(layernorm_welford(device(), {&buf}, {&buf}, {&buf}, {&buf}, {3, 36, 0}).kernel, "layernorm_welford");
  EXPECT_EQ(layernorm_welford(device(), {&buf}, {&buf}, {&buf}, {&buf}, {3, 35, 0}).kernel, "layernorm");
  auto add4 = add_vec4(device(), {&buf}, {&buf}, {&buf}, {100});
  EXPECT_EQ(add4.kernel, "elementwise_vec4");
  EXPECT_EQ(add4.shapes, "op=add count=100");
  EXPECT_EQ(gelu_vec4(device(), {&buf}, {&buf}, {100}).shapes, "op=gelu count=100");
  EXPECT_EQ(mul_vec4(device(), {&buf}, {&buf}, {&buf}, {101}).kernel, "mul");
  EXPECT_EQ(silu_vec4(device(), {&buf}, {&buf}, {7}).kernel, "silu");
}

TEST(VectorDispatch, TooSmallOperandNamesKernelOperandAndShapes) {
  auto x = device().create_buffer("x", 4 * 896 * 4), w = device().create_buffer("w", 896 * 4),
       out = device().create_buffer("out", 3 * 896 * 4);
  EXPECT_THAT([&] { rmsnorm_vec4(device(), {&x}, {&w}, {&out}, {4, 896, 0}); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'rmsnorm_vec4' (T=4 D=896)"),
                                                    HasSubstr("operand 'output' needs 3584 elements"))));
  EXPECT_THAT([&] { silu_vec4(device(), {&x}, {&out}, {4 * 896}); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'elementwise_vec4' (op=silu count=3584)"),
                                                    HasSubstr("operand 'output'"))));
}

TEST(VectorKernels, AreAllInTheSelftest) {
  std::vector<std::string> names;
  for (const auto& check : kernel_checks(true)) names.push_back(check.kernel);
  EXPECT_THAT(names, ::testing::IsSupersetOf(kVectorKernels));
}

}  // namespace
}  // namespace gerbil::kernels
