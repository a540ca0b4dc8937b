// The twelve seed kernels against their float64 references (src/reference/) on fresh random inputs,
// the reference's dispatch formulas, and the dispatchers' shape checks.
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "kernels/seed.h"
#include "checks/selftest.h"
#include "support/kernel_checks.h"
#include "support/device.h"

namespace gerbil::kernels {
namespace {

using ::testing::HasSubstr;

using test::device;

class SeedKernel : public ::testing::TestWithParam<std::string> {};

TEST_P(SeedKernel, MatchesFloat64Reference) {
  test::expect_check_passes(device(), kernels::kernel_checks(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(All, SeedKernel,
                         ::testing::Values("embedding", "matmul", "matmul_int4", "rmsnorm", "layernorm", "rope",
                                           "attention", "softmax", "silu", "gelu", "add", "mul"));

// The example tables of kernels.md.
TEST(DispatchFormula, MatchesTheReferenceTables) {
  EXPECT_EQ(embedding_grid({1, 896}), (Grid{4, 1, 1}));
  // kernels.md lists (176, 1, 1), (7169, 1, 1) and, for SiLU at T=50, (951, 1, 1): one more than its own
  // formula ceil(T * hidden / 256) gives for these exact multiples of 256 (44800, 1835008, 243200), while
  // its other rows (e.g. SiLU T=1: 4864 -> 19) follow the formula. The formula is the contract.
  EXPECT_EQ(embedding_grid({50, 896}), (Grid{175, 1, 1}));
  EXPECT_EQ(embedding_grid({2048, 896}), (Grid{7168, 1, 1}));
  EXPECT_EQ(matmul_grid({1, 896, 896}), (Grid{56, 1, 1}));
  EXPECT_EQ(matmul_grid({50, 896, 896}), (Grid{56, 4, 1}));
  EXPECT_EQ(matmul_grid({1, 896, 4864}), (Grid{304, 1, 1}));
  EXPECT_EQ(matmul_grid({1, 4864, 896}), (Grid{56, 1, 1}));
  EXPECT_EQ(matmul_grid({1, 896, 151936}), (Grid{9496, 1, 1}));
  EXPECT_EQ(rmsnorm_grid({1, 896, 0}), (Grid{1, 1, 1}));
  EXPECT_EQ(rmsnorm_grid({2048, 896, 0}), (Grid{2048, 1, 1}));
  EXPECT_EQ(rope_grid({1, 14, 2, 64, 0, 0}), (Grid{2, 1, 1}));
  EXPECT_EQ(rope_grid({50, 14, 2, 64, 0, 0}), (Grid{88, 1, 1}));
  EXPECT_EQ(attention_grid({1, 100, 14, 2, 64, 99}), (Grid{1, 14, 1}));
  EXPECT_EQ(attention_grid({50, 50, 14, 2, 64, 0}), (Grid{50, 14, 1}));
  EXPECT_EQ(elementwise_grid({4864}), (Grid{19, 1, 1}));
  EXPECT_EQ(elementwise_grid({243200}), (Grid{950, 1, 1}));
}

TEST(DispatchFormula, FoldsPastTheWorkgroupLimit) {
  EXPECT_EQ(fold(65535), (Grid{65535, 1, 1}));
  EXPECT_EQ(fold(65536), (Grid{65535, 2, 1}));
  EXPECT_EQ(elementwise_grid({65535u * 256u + 1}), (Grid{65535, 2, 1}));
  EXPECT_EQ(fold(0), (Grid{1, 1, 1}));
}

TEST(DispatchShapes, TooSmallOperandNamesKernelOperandAndShapes) {
  auto A = device().create_buffer("A", 4 * 8 * 4), B = device().create_buffer("B", 8 * 4 * 4),
       C = device().create_buffer("C", 4 * 5 * 4);
  EXPECT_THAT([&] { matmul(device(), {&A}, {&B}, {&C}, {4, 8, 5}); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'matmul' (M=4 K=8 N=5)"),
                                                    HasSubstr("operand 'B' needs 40 elements"),
                                                    HasSubstr("buffer 'B' provides 128 bytes"))));
}

TEST(DispatchShapes, AttentionRejectsQueriesPastTheKeysAndBadGqa) {
  auto buf = device().create_buffer("buf", 1 << 16);
  EXPECT_THAT([&] { attention(device(), {&buf}, {&buf}, {&buf}, {&buf}, {2, 4, 4, 4, 16, 3}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("only S=4 keys")));
  EXPECT_THAT([&] { attention(device(), {&buf}, {&buf}, {&buf}, {&buf}, {1, 4, 6, 4, 16, 0}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("multiple of kv_heads")));
}

TEST(DispatchShapes, UnknownKernelIsAnError) {
  EXPECT_THAT([] { wgsl("no_such_kernel"); }, ::testing::ThrowsMessage<Error>(HasSubstr("no_such_kernel")));
}

}  // namespace
}  // namespace gerbil::kernels
