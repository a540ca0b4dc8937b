// The float64 references are what every GPU kernel is judged against, so they are checked here against
// cases small enough to work out by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "gerbil/error.h"
#include "reference/model.h"
#include "reference/reference.h"

namespace gerbil::reference {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using ::testing::ThrowsMessage;

constexpr double kTol = 1e-12;

// Matches a vector of doubles element-wise within kTol.
auto Near(const std::vector<double>& expected) { return Pointwise(DoubleNear(kTol), expected); }

TEST(Reference, EmbeddingGathersRows) {
  std::vector<double> weight = {0, 1, 10, 11, 20, 21};  // vocab 3, D 2
  std::vector<uint32_t> ids = {2, 0, 2};
  EXPECT_THAT(embedding(ids, weight, 3, 2), ElementsAre(20, 21, 0, 1, 20, 21));
}

TEST(Reference, EmbeddingRejectsIdOutsideVocabulary) {
  std::vector<double> weight = {0, 1, 10, 11};
  std::vector<uint32_t> ids = {1, 2};
  EXPECT_THAT([&] { embedding(ids, weight, 2, 2); },
              ThrowsMessage<Error>(HasSubstr("ids[1] = 2 is outside the vocabulary of 2 rows")));
}

TEST(Reference, MatmulTwoByTwo) {
  std::vector<double> A = {1, 2, 3, 4}, B = {5, 6, 7, 8};
  EXPECT_THAT(matmul(A, B, 2, 2, 2), ElementsAre(19, 22, 43, 50));
}

TEST(Reference, MatmulRectangular) {
  std::vector<double> A = {1, 2, 3};                    // [1, 3]
  std::vector<double> B = {1, 0, 2, 0, 1, 3, 1, 1, 4};  // [3, 3]
  EXPECT_THAT(matmul(A, B, 1, 3, 3), ElementsAre(4, 5, 20));
}

TEST(Reference, MatmulRejectsWrongShape) {
  std::vector<double> A = {1, 2, 3}, B = {1, 2};
  EXPECT_THAT([&] { matmul(A, B, 1, 3, 1); },
              ThrowsMessage<Error>(HasSubstr("reference::matmul: B has 2 elements, expected 3")));
}

TEST(Reference, PackInt4PutsLowestIndexInLowestBits) {
  std::vector<uint8_t> nibbles = {1, 2, 3, 4, 5, 6, 7, 8, 0xF, 0xA};
  EXPECT_THAT(pack_int4(nibbles), ElementsAre(0x87654321u, 0xAFu));
}

TEST(Reference, PackInt4RejectsWideValues) {
  std::vector<uint8_t> nibbles = {3, 16};
  EXPECT_THAT([&] { pack_int4(nibbles); },
              ThrowsMessage<Error>(HasSubstr("nibbles[1] = 16 does not fit in 4 bits")));
}

TEST(Reference, DequantizeInt4UsesFlatGroups) {
  // K = 2, N = 4, group_size 4: row k = 0 is group 0, row k = 1 is group 1.
  std::vector<uint32_t> packed = {0x87654321u};
  std::vector<double> scales = {0.5, 2.0}, zeros = {1.0, 8.0};
  EXPECT_THAT(dequantize_int4(packed, scales, zeros, 2, 4, 4),
              Near({0.0, 0.5, 1.0, 1.5, -6.0, -4.0, -2.0, 0.0}));
}

TEST(Reference, MatmulInt4MatchesDequantizedMatmul) {
  // K = 3, N = 2, group_size 2: groups cover flat indices {0,1}, {2,3}, {4,5}.
  std::vector<uint8_t> nibbles = {0, 15, 8, 9, 3, 12};
  std::vector<double> scales = {1.0, 0.25, -2.0}, zeros = {0.0, 8.0, 4.0};
  std::vector<double> A = {1, 2, 3, -1, 0, 1};  // [2, 3]
  // B = [[0, 15], [0, 0.25], [2, -16]]
  std::vector<double> C = matmul_int4(A, pack_int4(nibbles), scales, zeros, 2, 3, 2, 2);
  EXPECT_THAT(C, Near({6.0, -32.5, 2.0, -31.0}));
}

TEST(Reference, MatmulInt4RejectsMissingScales) {
  std::vector<uint32_t> packed = {0};
  std::vector<double> A = {1, 1}, scales = {1.0}, zeros = {0.0, 0.0};
  EXPECT_THAT([&] { matmul_int4(A, packed, scales, zeros, 1, 2, 2, 2); },
              ThrowsMessage<Error>(HasSubstr("dequantize_int4: scales has 1 elements, expected 2")));
}

TEST(Reference, RmsnormScalesByRootMeanSquare) {
  // Row [3, 4]: mean square 12.5, so the row is divided by sqrt(12.5 + eps).
  std::vector<double> x = {3, 4, 0, 2}, w = {1, 2};
  double eps = 0.5, r0 = std::sqrt(12.5 + eps), r1 = std::sqrt(2.0 + eps);
  EXPECT_THAT(rmsnorm(x, w, 2, 2, eps), Near({3 / r0, 8 / r0, 0.0, 4 / r1}));
}

TEST(Reference, LayernormCentresAndScales) {
  // Row [1, 3]: mean 2, variance 1, so normalised to [-1, 1] before weight and bias.
  std::vector<double> x = {1, 3}, w = {2, 3}, b = {0.5, -0.5};
  double inv_std = 1.0 / std::sqrt(1.0 + 1e-5);
  EXPECT_THAT(layernorm(x, w, b, 1, 2, 1e-5), Near({-2 * inv_std + 0.5, 3 * inv_std - 0.5}));
}

TEST(Reference, RopeIsIdentityAtPositionZero) {
  std::vector<double> q = {1, 2, 3, 4, 5, 6, 7, 8}, k = {-1, -2, -3, -4};  // 2 q heads, 1 kv head, dim 4
  RopeOutput out = rope(q, k, 1, 2, 1, 4, 10000.0, 0);
  EXPECT_THAT(out.q, Near(q));
  EXPECT_THAT(out.k, Near(k));
}

TEST(Reference, RopeRotatesInterleavedPairs) {
  // head_dim 4, base 100: pair 0 turns by position * 1, pair 1 by position * 100^(-1/2) = position / 10.
  std::vector<double> q = {1, 0, 0, 1}, k = {2, 0, 0, 0};
  RopeOutput out = rope(q, k, 1, 1, 1, 4, 100.0, 3);
  EXPECT_THAT(out.q, Near({std::cos(3.0), std::sin(3.0), -std::sin(0.3), std::cos(0.3)}));
  EXPECT_THAT(out.k, Near({2 * std::cos(3.0), 2 * std::sin(3.0), 0.0, 0.0}));
}

TEST(Reference, RopeUsesPositionOffsetPlusToken) {
  std::vector<double> q = {1, 0, 1, 0}, k = {};  // T 2, one q head of dim 2, no kv heads
  RopeOutput out = rope(q, k, 2, 1, 0, 2, 10000.0, 5);
  EXPECT_THAT(out.q, Near({std::cos(5.0), std::sin(5.0), std::cos(6.0), std::sin(6.0)}));
}

TEST(Reference, RopeRejectsOddHeadDim) {
  std::vector<double> q(3), k(3);
  EXPECT_THAT([&] { rope(q, k, 1, 1, 1, 3, 10000.0, 0); },
              ThrowsMessage<Error>(HasSubstr("head_dim = 3 is odd")));
}

TEST(Reference, AttentionOverOneKeyReturnsItsValue) {
  std::vector<double> Q = {0.3, -1, 2, 5}, K = {7, 1}, V = {4, -2};  // 2 q heads, 1 kv head, dim 2
  EXPECT_THAT(attention(Q, K, V, 1, 1, 2, 1, 2, 0), Near({4, -2, 4, -2}));
}

TEST(Reference, AttentionIsCausal) {
  // Two queries, two keys: query 0 sees only key 0, query 1 averages by softmax of the scaled scores.
  std::vector<double> Q = {1, 0, 0, 2}, K = {1, 0, 0, 1}, V = {10, 20, 30, 40};
  double s = 1.0 / std::sqrt(2.0);
  double w0 = 1.0 / (1.0 + std::exp(2 * s));  // query 1 scores: 0 and 2s
  EXPECT_THAT(attention(Q, K, V, 2, 2, 1, 1, 2, 0),
              Near({10, 20, w0 * 10 + (1 - w0) * 30, w0 * 20 + (1 - w0) * 40}));
}

TEST(Reference, AttentionDecodeStepSeesTheWholeCache) {
  // One query at position 2 of a 3-entry cache, equal scores: the mean of the values.
  std::vector<double> Q = {0, 0}, K = {1, 2, 3, 4, 5, 6}, V = {3, 0, 6, 3, 0, 9};
  EXPECT_THAT(attention(Q, K, V, 1, 3, 1, 1, 2, 2), Near({3, 4}));
}

TEST(Reference, AttentionMapsQueryHeadsToKvGroups) {
  // 4 q heads, 2 kv heads, one key: q heads 0 and 1 read kv head 0, q heads 2 and 3 read kv head 1.
  std::vector<double> Q(4, 1.0), K = {0, 0}, V = {7, 9};
  EXPECT_THAT(attention(Q, K, V, 1, 1, 4, 2, 1, 0), Near({7, 7, 9, 9}));
}

TEST(Reference, AttentionRejectsUnevenGroups) {
  std::vector<double> Q(3), K(2), V(2);
  EXPECT_THAT([&] { attention(Q, K, V, 1, 1, 3, 2, 1, 0); },
              ThrowsMessage<Error>(HasSubstr("num_q_heads = 3 is not a multiple of num_kv_heads = 2")));
}

TEST(Reference, SoftmaxRowsSumToOne) {
  std::vector<double> x = {1, 2, 3, 1000, 1000, 1000};
  std::vector<double> y = softmax(x, 2, 3);
  double e = std::exp(1.0);
  double z = 1 + e + e * e;
  EXPECT_THAT(y, Near({1 / z, e / z, e * e / z, 1.0 / 3, 1.0 / 3, 1.0 / 3}));
  EXPECT_NEAR(y[0] + y[1] + y[2], 1.0, kTol);
}

TEST(Reference, SiluValues) {
  std::vector<double> x = {0, 1, -1, -1000};
  double s = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_THAT(silu(x), Near({0.0, s, -(1 - s), 0.0}));
}

TEST(Reference, GeluTanhValues) {
  std::vector<double> x = {0, 1, -1, 10};
  double inner = std::sqrt(2.0 / std::numbers::pi) * 1.044715;
  double g1 = 0.5 * (1 + std::tanh(inner));
  // GELU(x) - GELU(-x) = x for an odd tanh, and GELU(10) is 10 to double precision.
  EXPECT_THAT(gelu_tanh(x), Near({0.0, g1, g1 - 1, 10.0}));
  EXPECT_NEAR(g1, 0.8411919906082768, 1e-15);  // the well-known value of tanh-approximated GELU(1)
}

TEST(Reference, AddAndMul) {
  std::vector<double> a = {1, -2, 3}, b = {4, 5, -6};
  EXPECT_THAT(add(a, b), ElementsAre(5, 3, -3));
  EXPECT_THAT(mul(a, b), ElementsAre(4, -10, -18));
}

TEST(Reference, ElementwiseRejectsMismatchedSizes) {
  std::vector<double> a = {1, 2}, b = {1};
  EXPECT_THAT([&] { add(a, b); },
              ThrowsMessage<Error>(HasSubstr("reference::add: b has 1 elements, expected 2")));
}

// An f16 KV cache's rounding: 11 significant bits, ties to even, subnormal steps of 2^-24, overflow at 65520.
TEST(Reference, RoundToF16KeepsElevenBitsTiesToEven) {
  EXPECT_EQ(round_to_f16(1.0), 1.0);
  EXPECT_EQ(round_to_f16(1.0 + 0x1p-11), 1.0);                  // a tie: down to the even 1.0
  EXPECT_EQ(round_to_f16(1.0 + 3 * 0x1p-11), 1.0 + 0x1p-9);     // a tie: up to the even neighbour
  EXPECT_EQ(round_to_f16(1.0 + 0x1p-11 + 0x1p-20), 1.0 + 0x1p-10);
  EXPECT_EQ(round_to_f16(-3.14159), -3.140625);
  EXPECT_EQ(round_to_f16(0x1p-20 + 0x1p-26), 0x1p-20);          // subnormal: steps of 2^-24
  EXPECT_EQ(round_to_f16(0x1p-25 + 0x1p-30), 0x1p-24);
  EXPECT_EQ(round_to_f16(65519.0), 65504.0);
  EXPECT_EQ(round_to_f16(-65520.0), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(round_to_f16(std::nan(""))));
}

TEST(Reference, QkvRopeStoreRoundsAnF16CacheOnly) {
  // One token, one q and one kv head of 2 dims, no rotary: q keeps its value, k and v are rounded.
  std::vector<double> qkv = {0.1, 0.2, 1.0 + 0x1p-12, -2.0 - 0x1p-9, 3.0 + 0x1p-14, 5e-8};
  QkvShape shape{1, 1, 1, 2, 0, 0, true};
  auto out = qkv_rope_store(qkv, {}, {}, std::vector<double>{1.0}, shape, 1e-6, std::vector<double>(2, 0.0), std::vector<double>(2, 0.0));
  EXPECT_THAT(out.q, Near({0.1, 0.2}));
  EXPECT_EQ(out.k_cache, (std::vector<double>{1.0, -2.0 - 0x1p-9}));
  EXPECT_EQ(out.v_cache, (std::vector<double>{3.0, 0x1p-24}));
}

TEST(Reference, QkvRopeStoreScalesTheRotatedDimsByTheAttentionFactor) {
  // One token at position 1, a q and a kv head of 4 dims, the first 2 rotating at pi/2 per position; the table's
  // attention factor 1.5 scales the rotated pair (YaRN / LongRoPE), the other dims pass unscaled.
  std::vector<double> qkv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  QkvShape shape{1, 1, 1, 4, 2, 1, false};
  std::vector<double> table = {std::numbers::pi / 2, 1.5};
  auto out = qkv_rope_store(qkv, {}, {}, table, shape, 1e-6, std::vector<double>(8, 0.0), std::vector<double>(8, 0.0));
  EXPECT_THAT(out.q, Near({-3.0, 1.5, 3.0, 4.0}));
  EXPECT_THAT(std::vector<double>(out.k_cache.begin() + 4, out.k_cache.end()), Near({-9.0, 7.5, 7.0, 8.0}));
  EXPECT_THAT(std::vector<double>(out.v_cache.begin() + 4, out.v_cache.end()), Near({9.0, 10.0, 11.0, 12.0}));
}

}  // namespace
}  // namespace gerbil::reference
