// Block-quantized weights on the GPU (kernels::WeightType Q8_0 ... Q6_K, Q4_G, Q4_G128, Q3_K, Q2_K, IQ4_NL,
// IQ4_XS, IQ3_XXS and IQ3_S; pack_rows, include/blocks.wgsl): the embedding gather bit for bit against
// model/quant.h's dequantize() (Q4_G, Q4_G128: the float64 reference), and the products (decode M = 1..4 in
// linear_q_matvec.wgsl, batched decode steps in linear_rows.wgsl and linear_tiled_rows.wgsl, prompts in
// linear_tiled.wgsl, whole and shared out) against a float64 product over the dequantized weights, on random blocks
// with extreme scales (zero, f16 subnormal, tiny, huge, negative): every type at each kernel, the sweeps of shapes and
// blockings on one type of each kind (sweeps()). Every output buffer is filled with NaN first, so an output the
// kernel fails to write shows.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "graph/gpu_weights.h"
#include "kernels/model.h"
#include "kernels/seed.h"
#include "kernels/tuning.h"
#include "model/dtype.h"
#include "model/quant.h"
#include "reference/quant.h"
#include "reference/reference.h"
#include "support/device.h"

namespace gerbil::kernels {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using test::device;

struct TypeCase {
  WeightType type;
  std::optional<GgmlType> ggml;  // none for Q4_G and Q4_G128, gerbil's own blocks of GPTQ / AWQ groups
};

const TypeCase kTypes[] = {
    {WeightType::Q8_0, GgmlType::Q8_0}, {WeightType::Q4_0, GgmlType::Q4_0}, {WeightType::Q4_1, GgmlType::Q4_1},
    {WeightType::Q5_0, GgmlType::Q5_0}, {WeightType::Q5_1, GgmlType::Q5_1}, {WeightType::Q4_K, GgmlType::Q4_K},
    {WeightType::Q5_K, GgmlType::Q5_K}, {WeightType::Q6_K, GgmlType::Q6_K}, {WeightType::Q4_G, std::nullopt},
    {WeightType::Q4_G128, std::nullopt}, {WeightType::Q3_K, GgmlType::Q3_K},
    {WeightType::Q2_K, GgmlType::Q2_K}, {WeightType::IQ4_NL, GgmlType::IQ4_NL}, {WeightType::IQ4_XS, GgmlType::IQ4_XS},
    {WeightType::IQ3_XXS, GgmlType::IQ3_XXS}, {WeightType::IQ3_S, GgmlType::IQ3_S},
};

std::string type_label(const ::testing::TestParamInfo<TypeCase>& info) {
  return weight_type_name(info.param.type);
}

// Where each format keeps its f16 scales (byte offsets in ggml's block): d first, then the minimum.
std::vector<uint32_t> scale_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q6_K:
      return {208};
    case GgmlType::Q3_K:
      return {108};
    case GgmlType::Q2_K:
      return {80, 82};
    default:
      return {0};
  }
}

// f16 scales that exercise the decode: ordinary, zero, the smallest subnormal, a larger subnormal, tiny,
// huge, negative.
constexpr uint16_t kScales[] = {0x2E66 /* 0.1 */, 0x0000, 0x0001, 0x03FF, 0x0C00 /* 2^-12 */,
                                0x7BFF /* 65504 */, 0xB800 /* -0.5 */, 0x3C00 /* 1 */};

// `blocks` random blocks of the type as a file holds them (Q4_G, Q4_G128: as gptq_group_blocks makes them, with
// zero points of 1 to 16): random quant bytes, scales cycling through kScales, or all ordinary (`extreme` false:
// magnitudes alike, so a product's relative error speaks for every block).
std::vector<std::byte> random_blocks(const TypeCase& c, uint64_t blocks, std::mt19937& rng, bool extreme) {
  uint32_t block_bytes = block_layout(c.type).ggml_bytes;
  std::vector<std::byte> bytes(blocks * block_bytes);
  for (auto& b : bytes) b = std::byte(rng() & 0xFF);
  for (uint64_t b = 0; b < blocks; ++b) {
    for (uint32_t offset : c.ggml ? scale_offsets(*c.ggml) : std::vector<uint32_t>{0}) {
      uint16_t scale = extreme ? kScales[(b + offset) % std::size(kScales)] : f32_to_f16(0.05f + 0.01f * float(rng() % 8));
      std::memcpy(&bytes[b * block_bytes + offset], &scale, 2);
    }
    if (!c.ggml) {
      uint16_t zero = f32_to_f16(float(1 + rng() % 16));
      std::memcpy(&bytes[b * block_bytes + 2], &zero, 2);
    }
  }
  return bytes;
}

// Their values: model/quant.h's dequantize() for ggml's types, the float64 reference for Q4_G and Q4_G128 (exact
// in f32).
std::vector<float> dequantized(const TypeCase& c, std::span<const std::byte> bytes, uint64_t count) {
  std::vector<float> values(count);
  if (c.ggml) {
    dequantize(*c.ggml, bytes, values, "test weights");
    return values;
  }
  std::vector<uint8_t> block_bytes(bytes.size());
  std::memcpy(block_bytes.data(), bytes.data(), bytes.size());
  auto exact = reference::dequantize_blocks(weight_type_name(c.type), block_bytes);
  std::copy(exact.begin(), exact.end(), values.begin());
  return values;
}

// A buffer of `bytes` (rounded up to 16, as graph::upload_weights binds weights) holding `data`.
gpu::Buffer upload_padded(std::string label, std::span<const std::byte> data) {
  std::vector<std::byte> padded(data.begin(), data.end());
  padded.resize((padded.size() + 15) / 16 * 16);
  return device().upload(std::move(label), std::span<const std::byte>(padded));
}

gpu::Buffer nan_buffer(std::string label, uint64_t floats) {
  std::vector<float> nan(floats, std::numeric_limits<float>::quiet_NaN());
  return device().upload(std::move(label), std::span<const float>(nan));
}

class QuantKernel : public ::testing::TestWithParam<TypeCase> {};

// The types the products' sweeps of shapes and blockings run on: one for each way a kernel walks a row, 32-element
// blocks whose nibbles are decoded in place (Q4_0), as bytes with high bits and an offset (Q5_1) or as 8 words of
// bytes, two 16-byte loads a chunk and two pieces of linear_rows (Q8_0), 128-element groups (Q4_G128), 256-element
// blocks of nibbles with 6-bit scales (Q4_K) or of two high-bit words (Q6_K), and the level types' lookups (IQ3_S).
// The other types take each kernel at a few shapes with extreme scales and odd N, where what sets them apart, how a
// chunk decodes, is covered whole. On lavapipe each case compiles pipelines of its own (an IQ type's decode products
// took 225 s of a cold 2-core machine at 15 cases), and compiling is nearly all of these tests' time.
bool sweeps(WeightType type) {
  for (WeightType swept : {WeightType::Q4_0, WeightType::Q5_1, WeightType::Q8_0, WeightType::Q4_G128,
                           WeightType::Q4_K, WeightType::Q6_K, WeightType::IQ3_S})
    if (type == swept) return true;
  return false;
}

// The gather decodes every element exactly as ggml does, extreme scales included.
TEST_P(QuantKernel, EmbedGathersDequantizedValuesExactly) {
  const TypeCase& c = GetParam();
  WeightType type = c.type;
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  uint32_t block = block_layout(type).elements, vocab = 9, D = 2 * block;
  auto ggml_bytes = random_blocks(c, uint64_t(vocab) * D / block, rng, true);
  auto expected_table = dequantized(c, ggml_bytes, uint64_t(vocab) * D);
  auto table = upload_padded("table", pack_rows(type, ggml_bytes, vocab, D, "table"));
  std::vector<uint32_t> ids = {3, 0, 8, 3, 5, 1, 7, 2, 6, 4};
  auto ids_buffer = device().upload("ids", std::span<const uint32_t>(ids));
  uint32_t T = uint32_t(ids.size());
  auto out = nan_buffer("out", uint64_t(T) * D);
  EmbedParams p{T, D, 0, vocab, float_bits(1.0f), 0, 0};
  run(device(), embed(device(), {&ids_buffer}, {&table}, device().placeholder(0), {&out}, p, type, 0));
  auto got = device().read_as<float>(out);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t d = 0; d < D; ++d) {
      // Equal values, a zero of either sign equal to the other: drivers need not keep a zero's sign (SPIR-V keeps
      // it only under SignedZeroInfNanPreserve), and NVIDIA's gave d q - d z = -0 where q = z.
      float want = expected_table[uint64_t(ids[t]) * D + d];
      ASSERT_EQ(got[uint64_t(t) * D + d], want)
          << "token " << t << " (id " << ids[t] << ") element " << d << ": got " << got[uint64_t(t) * D + d]
          << ", want " << want;
    }
}

struct ProductCase {
  uint32_t M, N, blocks_per_row;
  bool extreme, bias, residual;
  uint32_t workers = 0;  // prompts: shared out over this many workgroups (0: the dispatcher's choice)
  MatvecBlocking blocking{};  // decoding: columns per team and team size (0: the dispatcher's choice)
  const char* kernel = nullptr;  // the kernel the product must run on (nullptr: any)
  uint32_t gate = 0;  // 1 SiLU, 2 GELU-tanh: a gate|up projection (N / 2 gate rows, then N / 2 up rows)
};

// out = x W^T (+ bias, + residual) against float64 over the dequantized W, or for a gate|up projection
// act(x gate^T + bias) * (x up^T + bias); outputs [M, outputs + 3] with the product at column 1 (out_col), so
// columns the product must not touch stay NaN.
void check_product(const TypeCase& c, const ProductCase& s, std::mt19937& rng) {
  uint32_t outputs = s.gate ? s.N / 2 : s.N;
  uint32_t K = s.blocks_per_row * block_layout(c.type).elements, out_stride = outputs + 3, out_col = 1;
  auto ggml_bytes = random_blocks(c, uint64_t(s.N) * s.blocks_per_row, rng, s.extreme);
  auto w = dequantized(c, ggml_bytes, uint64_t(s.N) * K);
  auto weight = upload_padded("W", pack_rows(c.type, ggml_bytes, s.N, K, "W"));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(uint64_t(s.M) * K), bias(s.N), residual(uint64_t(s.M) * out_stride);
  for (float& v : x) v = uniform(rng);
  for (float& v : bias) v = uniform(rng);
  for (float& v : residual) v = uniform(rng);
  auto x_buffer = device().upload("x", std::span<const float>(x));
  auto bias_buffer = device().upload("bias", std::span<const float>(bias));
  auto residual_buffer = device().upload("residual", std::span<const float>(residual));
  auto out = nan_buffer("out", uint64_t(s.M) * out_stride);
  uint64_t scratch_floats = linear_split_scratch_floats(device(), {s.M, K, s.N, out_stride, out_col}, s.workers);
  auto scratch = nan_buffer("scratch", std::max<uint64_t>(1, scratch_floats));
  LinearParams p{s.M, K, s.N, out_stride, out_col, s.bias ? 1u : 0u, s.residual ? 1u : 0u, s.gate};
  std::vector<Dispatch> dispatches;
  if (s.blocking.columns || s.blocking.split)
    dispatches.push_back(linear(device(), {&x_buffer}, {&weight}, {&bias_buffer}, {&residual_buffer}, {&out}, p,
                                c.type, {}, s.blocking));
  else
    dispatches = linear_split_k(device(), {&x_buffer}, {&weight}, {&bias_buffer}, {&residual_buffer}, {&out}, p,
                                c.type, {&scratch}, s.workers);
  SCOPED_TRACE(fmt::format("{} M={} N={} K={} extreme={} workers={} columns={} team={} unroll={} teams={} gate={}",
                           weight_type_name(c.type), s.M, s.N, K, s.extreme, s.workers, s.blocking.columns,
                           s.blocking.split, s.blocking.unroll, s.blocking.workgroups, s.gate));
  if (s.kernel) {
    ASSERT_EQ(dispatches.front().kernel, s.kernel);
  }
  run(device(), dispatches);
  auto got = device().read_as<float>(out);
  double diff = 0, norm = 0;
  for (uint32_t m = 0; m < s.M; ++m)
    for (uint32_t col = 0; col < out_stride; ++col) {
      float value = got[uint64_t(m) * out_stride + col];
      if (col < out_col || col >= out_col + outputs) {
        ASSERT_TRUE(std::isnan(value)) << "row " << m << " column " << col << " lies outside the product";
        continue;
      }
      uint32_t n = col - out_col;
      // Row `row` of W's sum for row m (with its bias), and the sum of its terms' magnitudes.
      auto sum = [&](uint32_t row) {
        double total = s.bias ? bias[row] : 0.0, magnitude = 0;
        for (uint32_t k = 0; k < K; ++k) {
          double term = double(x[uint64_t(m) * K + k]) * double(w[uint64_t(row) * K + k]);
          total += term;
          magnitude += std::abs(term);
        }
        return std::pair{total, magnitude};
      };
      auto [want, magnitude] = sum(n);
      // f32 sums of K terms: each within a few K ulps of the sum of magnitudes (a gated output: through the
      // activation, whose slope is under 1.2, and the product with up).
      double bound = 1e-6 * K * (magnitude + 1.0);
      if (s.gate) {
        auto [up, up_magnitude] = sum(outputs + n);
        std::span<const double> gate(&want, 1);
        double act = (s.gate == 1 ? reference::silu(gate) : reference::gelu_tanh(gate))[0];
        bound = 1e-6 * K *
                (1.2 * (magnitude + 1.0) * (std::abs(up) + 1.0) + (up_magnitude + 1.0) * (std::abs(act) + 1.0));
        want = act * up;
      }
      if (s.residual) want += residual[uint64_t(m) * out_stride + col];
      ASSERT_NEAR(value, want, bound) << "row " << m << " column " << n;
      // An output whose terms cancel to under 1 % of their magnitudes is held to the bound above alone: there the
      // rounding of the terms in f32, not the kernel, sets its relative error (extreme scales reached 2.2e-4).
      if (s.gate || s.residual || std::abs(want) >= 1e-2 * magnitude) {
        diff += (value - want) * (value - want);
        norm += want * want;
      }
    }
  EXPECT_LE(std::sqrt(diff / std::max(norm, 1e-300)), s.extreme ? 1e-4 : 1e-5);
}

TEST_P(QuantKernel, DecodeProductsMatchFloat64) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  // These are linear_q_matvec's cases: on an H200's tuning their few weights stay off linear_rows at 2-4 rows
  // (use_linear_rows wants 24 KiB a resident workgroup), where lavapipe's measured tuning (1 or 2 resident
  // workgroups, as the host is busy) would send some of them there.
  gpu::Tuning measured = tuning(device());
  device().set_tuning(test::kH200);
  const TypeCase& c = GetParam();
  for (uint32_t M = 1; M <= kMatvecRows; ++M) {
    if (!sweeps(c.type) && M != 1 && M != kMatvecRows) continue;  // the fewest and the most rows
    check_product(c, {M, 37, 3, false, true, M % 2 == 0}, rng);
    check_product(c, {M, 5, 2, true, false, false}, rng);
  }
  // x staged in several segments (1,344 elements for 3 rows: 70 blocks make 2 of a 32-element type, 14 of a
  // K-quant), each taking a team of 16 lanes several passes of two chunks a lane and a tail chunk.
  check_product(c, {3, 5, 70, true, true, true, 0, MatvecBlocking{2, 16, 2}}, rng);
  if (sweeps(c.type)) {
    // Teams of every size and column count the rule may pick on some adapter (teams of 16 lanes: 3 chunks a lane;
    // of 256: the whole workgroup, lanes past the row's chunks idle), with a last team's columns past N, and 1 or 2
    // chunks a lane in flight.
    for (MatvecBlocking blocking : {MatvecBlocking{2, 16, 2}, MatvecBlocking{4, 32, 1}, MatvecBlocking{3, 64, 2},
                                    MatvecBlocking{1, 256, 1}})
      check_product(c, {2, 37, 5, false, true, true, 0, blocking}, rng);
    // One row's x staged in segments of 4,096 elements (140 blocks of a 32-element type, 70 of a K-quant), at the
    // dispatcher's blocking and at one chunk a lane in flight.
    check_product(c, {1, 9, 70, false, false, false}, rng);
    check_product(c, {1, 9, 140, false, false, false, 0, MatvecBlocking{1, 32, 1}}, rng);
  }
  device().set_tuning(measured);
}

// Batched decode steps take linear_rows.wgsl: every block piece's quads dequantized in registers and summed for
// every row. From kMatvecRows + 1 rows: 4 columns a thread (M = 5) and 2 (M = 16), odd N (threads' columns past
// it), a few blocks a row (pieces fewer than a workgroup's slices); gate|up projections with the activation applied
// in the store; for the sweep types, blockings of its own too (1 to 4 columns, slices of 8 to 32, 1 to 4 pieces a
// step with the last step's pieces past the row, 4 and 8 teams a workgroup). At kMatvecRows rows, K-quants whose
// weights come to 24 KiB per resident workgroup (use_linear_rows; its fewest odd N on this adapter).
TEST_P(QuantKernel, BatchedDecodeProductsMatchFloat64) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const TypeCase& c = GetParam();
  const bool sweep = sweeps(c.type);
  check_product(c, {kMatvecRows + 1, 37, 3, true, true, true, 0, {}, "linear_rows"}, rng);
  // gate|up projections (the activation applied in the store): 1 output a thread at 16 rows (for the sweep types
  // 2 at 6 too), odd pairs
  check_product(c, {kLinearRowsMax, 38, 2, false, true, false, 0, {}, "linear_rows", 1}, rng);
  if (sweep) {
    check_product(c, {6, 22, 3, true, false, false, 0, {4, 8, 1}, "linear_rows", 2}, rng);
    check_product(c, {kLinearRowsMax, 34, 2, false, true, false, 0, {2, 8, 1, 8}, "linear_rows", 1}, rng);
    check_product(c, {kLinearRowsMax, 21, 2, true, true, false, 0, {}, "linear_rows"}, rng);
    check_product(c, {kLinearRowsMax, 9, 5, false, false, true, 0, {}, "linear_rows"}, rng);
    check_product(c, {7, 45, 3, false, true, true, 0, {1, 8, 4}, "linear_rows"}, rng);
    check_product(c, {13, 33, 5, true, false, true, 0, {4, 16, 2}, "linear_rows"}, rng);
    check_product(c, {kLinearRowsMax, 19, 3, false, true, true, 0, {2, 32, 1}, "linear_rows"}, rng);
    // teams of a workgroup, each its own columns: 4 teams of 8-column slices with N past the second team's
    check_product(c, {kLinearRowsMax, 21, 3, true, true, true, 0, {2, 8, 1, 4}, "linear_rows"}, rng);
  }
  // Steps of 17 to 64 rows: linear_tiled_rows.wgsl's 64 x 256 tiles (the sweep types' 32 x 256 as well), whose
  // iterations here (2 tiles of 32 slabs: 256 k) make two waves of shares under a tuning of one resident tile, on any
  // adapter; N ending inside the second tile's first column group, M inside the second row group, and 3 shares asked
  // for (cut tiles summed after).
  gpu::Tuning measured = tuning(device()), one_tile = measured;
  one_tile.resident_tiles = 1;
  device().set_tuning(one_tile);
  uint32_t slab_blocks = std::max<uint32_t>(1, 256 / block_layout(c.type).elements);
  check_product(c, {37, 257, slab_blocks, true, false, true, 3, {}, "linear_tiled_rows"}, rng);
  if (sweep) {
    check_product(c, {32, 300, slab_blocks, true, true, true, 0, {}, "linear_tiled_rows"}, rng);
    check_product(c, {kLinearRowsMax + 3, 257, slab_blocks, false, false, true, 3, {}, "linear_tiled_rows"}, rng);
    check_product(c, {kBatchTileRows, 300, slab_blocks, false, true, false, 0, {}, "linear_tiled_rows"}, rng);
  }
  device().set_tuning(measured);
  if (block_layout(c.type).elements < 256) return;  // 32-element blocks keep linear_q_matvec up to kMatvecRows
  uint32_t blocks = 2;
  uint64_t row_bytes = weight_row_bytes(c.type, uint64_t(blocks) * block_layout(c.type).elements);
  uint64_t min_bytes = uint64_t(24 << 10) * tuning(device()).resident_workgroups;
  uint32_t N = uint32_t((min_bytes + row_bytes - 1) / row_bytes) | 1;
  check_product(c, {kMatvecRows, N, blocks, true, false, true, 0, {}, "linear_rows"}, rng);
}

TEST_P(QuantKernel, PromptProductsMatchFloat64) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const TypeCase& c = GetParam();
  check_product(c, {37, 70, 3, false, true, true}, rng);
  check_product(c, {70, 33, 2, true, false, true, 3}, rng);  // shared out, cut tiles summed after
  if (sweeps(c.type)) check_product(c, {kLinearRowsMax + 1, 9, 2, true, false, false}, rng);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantKernel, ::testing::ValuesIn(kTypes), type_label);

// The level types' table takes workgroup memory in their pipelines only: the other types' product kernels fill
// WebGPU's guaranteed 16 KiB with their own arrays, and Dawn counts a workgroup variable even where no branch left
// by the overrides touches it.
TEST(QuantKernels, OnlyLevelTypePipelinesHoldTheLevelTableInWorkgroupMemory) {
  for (std::string_view kernel :
       {"embed_vec4", "linear_q_matvec", "linear_rows", "linear_tiled", "linear_tiled_f16", "linear_tiled_rows"})
    for (WeightType type : {WeightType::F16, WeightType::Q4_0, WeightType::Q2_K, WeightType::IQ4_NL, WeightType::IQ4_XS,
                            WeightType::IQ3_XXS, WeightType::IQ3_S}) {
      bool levels = type >= WeightType::IQ4_NL;
      std::string_view source = wgsl_for(kernel, {{"ROWS", 4}, {"WEIGHT_TYPE", double(type)}});
      EXPECT_EQ(source.find("var<workgroup> level_table") != std::string_view::npos, levels)
          << kernel << " " << weight_type_name(type);
      EXPECT_EQ(source.find("var<private> level_table") != std::string_view::npos, !levels)
          << kernel << " " << weight_type_name(type);
    }
}

// Packing into a mapped buffer's bytes, which start undefined, gives the same bytes as packing into a fresh
// vector: the padding after a block's scale (Q4_0) or at its end (Q6_K) is zeroed.
TEST(QuantKernels, PackingInPlaceZeroesThePadding) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (WeightType type : {WeightType::Q4_0, WeightType::Q6_K, WeightType::Q4_K}) {
    BlockLayout layout = block_layout(type);
    uint64_t rows = 3, K = 2 * layout.elements;
    std::vector<std::byte> ggml(rows * 2 * layout.ggml_bytes);
    for (std::byte& b : ggml) b = std::byte(rng());
    std::vector<std::byte> in_place(rows * weight_row_bytes(type, K), std::byte{0xff});
    pack_rows(type, ggml, rows, K, "t", in_place);
    EXPECT_EQ(in_place, pack_rows(type, ggml, rows, K, "t")) << weight_type_name(type);
  }
  std::vector<std::byte> ggml(18), small(19);
  EXPECT_THAT([&] { pack_rows(WeightType::Q4_0, ggml, 1, 32, "blk.1.ffn_up.weight", small); },
              ThrowsMessage<Error>(HasSubstr("tensor 'blk.1.ffn_up.weight' (Q4_0): packing 1 rows into 19 bytes, expected 32")));
}

TEST(QuantKernels, BadShapesAndTypesAreNamed) {
  std::vector<std::byte> bytes(18 * 3);
  EXPECT_THAT([&] { pack_rows(WeightType::Q4_0, bytes, 2, 32, "blk.0.attn_q.weight"); },
              ThrowsMessage<Error>(HasSubstr("tensor 'blk.0.attn_q.weight' (Q4_0 [2, 32]): 54 bytes, expected 36")));
  EXPECT_THAT([&] { pack_rows(WeightType::Q4_K, bytes, 1, 96, "t"); },
              ThrowsMessage<Error>(HasSubstr("not whole blocks of 256")));
  EXPECT_THAT([&] { graph::block_weight_type(GgmlType::IQ2_XXS, "blk.3.ffn_down.weight"); },
              ThrowsMessage<Error>(HasSubstr("tensor 'blk.3.ffn_down.weight' is quantized as IQ2_XXS")));
  auto w = device().create_buffer("W", 4096);
  auto x = device().create_buffer("x", 4096);
  LinearParams p{1, 48, 2, 2, 0, 0, 0};
  EXPECT_THAT([&] { linear(device(), {&x}, {&w}, {&x}, {&x}, {&x}, p, WeightType::Q8_0); },
              ThrowsMessage<Error>(HasSubstr("rows of Q8_0 hold whole blocks of 32 elements, not 48")));
  EXPECT_FALSE(linear_can_fuse(device(), 1, 256, WeightType::Q4_K));
}

}  // namespace
}  // namespace gerbil::kernels
