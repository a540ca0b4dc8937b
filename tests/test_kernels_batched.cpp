// The batched-step kernels (kernels/batched.h) against their float64 references (reference/batched.h) on fresh
// random inputs: sequences of different lengths in one pool of blocks through scrambled, interleaved block tables
// (check::scrambled_blocks), table entries in shuffled order over activation rows that include rows no entry
// names, odd head counts and dims, f32 and f16 caches, outputs and the cache rows being written poisoned with NaN
// (and, for attention, every pool row outside the tables); and the shape and table checks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checks/check_support.h"
#include "gerbil/error.h"
#include "kernels/batched.h"
#include "kernels/seed.h"
#include "model/dtype.h"
#include "reference/batched.h"
#include "support/device.h"

namespace gerbil::kernels {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Shape {
  uint32_t Hq, Hkv, D, rotary_dim;
  bool qk_norm;
  uint32_t window;
  KvType kv;
  std::vector<uint32_t> positions;  // one entry per slot used, in slot order; the slots' capacity is `capacity`
  uint32_t capacity;
};

std::string describe(const Shape& s) {
  return fmt::format("heads={}/{} D={} rotary={} qk_norm={} window={} kv={} entries={}", s.Hq, s.Hkv, s.D,
                     s.rotary_dim, s.qk_norm, s.window, kv_type_name(s.kv), s.positions.size());
}

// One sequence per entry, `capacity` rows each: the reference sees them one after another in a logical pool
// (TableRow::cache_base), the kernels in a pool of blocks of `block_tokens` through scrambled block tables; the
// table that puts one entry per sequence on shuffled activation rows.
struct Batch {
  std::vector<kernels::RowEntry> entries;
  std::vector<reference::TableRow> rows;
  RowSpace space;
  uint32_t activation_rows;
  check::ScrambledBlocks blocks;
  uint64_t logical_elements, pool_elements;
};

Batch make_batch(const Shape& s, Rng& rng, uint32_t block_tokens) {
  Batch b;
  b.space.kv_width = uint64_t(s.Hkv) * s.D;
  b.space.kv = s.kv;
  b.blocks = check::scrambled_blocks(rng, std::vector<size_t>(s.positions.size(), s.capacity), block_tokens);
  b.space.table_entries = uint32_t(b.blocks.table.size());
  uint64_t stride = s.capacity * b.space.kv_width;
  b.logical_elements = stride * s.positions.size();
  b.pool_elements = b.blocks.pool_rows() * b.space.kv_width;
  b.activation_rows = uint32_t(s.positions.size()) + 2;  // two rows no entry names
  b.space.activation_rows = b.activation_rows;
  std::vector<uint32_t> row_of(b.activation_rows);
  std::iota(row_of.begin(), row_of.end(), 0u);
  std::shuffle(row_of.begin(), row_of.end(), rng);
  for (size_t i = 0; i < s.positions.size(); ++i) {
    b.entries.push_back({row_of[i], b.blocks.table_base[i], s.positions[i], 0});
    b.rows.push_back({row_of[i], stride * i, s.positions[i]});
  }
  check_row_table(b.entries, b.space, block_tokens);
  return b;
}

KvBlocks kv_blocks(check::Buffers& b, const Batch& batch) {
  return {{&b.input("kv_table", batch.blocks.table)}, batch.blocks.pool_blocks, batch.blocks.block_tokens};
}

// A pool's values as the reference sees them and as the kernel's buffer holds them (f16: packed in pairs).
struct Pool {
  std::vector<double> values;
  std::vector<uint32_t> words;
};

Pool make_pool(Rng& rng, uint64_t n, KvType kv) {
  auto floats = check::random_floats(rng, n);
  Pool pool;
  if (kv == KvType::F32) {
    pool.values = check::widen(floats);
    for (float f : floats) pool.words.push_back(std::bit_cast<uint32_t>(f));
    return pool;
  }
  for (uint64_t i = 0; i < n; i += 2) {
    uint16_t lo = f32_to_f16(floats[i]), hi = f32_to_f16(floats[i + 1]);
    pool.values.push_back(f16_to_f32(lo));
    pool.values.push_back(f16_to_f32(hi));
    pool.words.push_back(uint32_t(lo) | uint32_t(hi) << 16);
  }
  return pool;
}

const uint32_t kNaNWord = std::bit_cast<uint32_t>(std::numeric_limits<float>::quiet_NaN());
const uint32_t kNaNHalves = 0x7E007E00u;  // two f16 quiet NaNs

// Poisons the cache row each entry stores into (in the logical pool): NaN for the reference's prior values and
// in the words.
void poison_rows(Pool& pool, const Batch& b) {
  uint32_t per_word = 4 / kv_bytes(b.space.kv);
  for (const auto& e : b.rows) {
    uint64_t first = e.cache_base + uint64_t(e.position) * b.space.kv_width;
    std::fill_n(pool.values.begin() + std::ptrdiff_t(first), b.space.kv_width, kNaN);
    std::fill_n(pool.words.begin() + std::ptrdiff_t(first / per_word), b.space.kv_width / per_word,
                b.space.kv == KvType::F32 ? kNaNWord : kNaNHalves);
  }
}

// The kernels' pool: each sequence's logical rows through its block table, the rows outside the tables random
// (which a store must leave alone) or NaN (which attention must never read).
void scatter_sequences(const Pool& logical, const Batch& b, Pool& pool) {
  size_t width = b.space.kv_width, per_word = 4 / kv_bytes(b.space.kv), rows = b.logical_elements / width / b.rows.size();
  for (size_t seq = 0; seq < b.rows.size(); ++seq) {
    size_t first = b.rows[seq].cache_base;
    std::vector<double> values(logical.values.begin() + std::ptrdiff_t(first),
                               logical.values.begin() + std::ptrdiff_t(first + rows * width));
    std::vector<uint32_t> words(logical.words.begin() + std::ptrdiff_t(first / per_word),
                                logical.words.begin() + std::ptrdiff_t((first + rows * width) / per_word));
    b.blocks.scatter(seq, values, rows, width, pool.values);
    b.blocks.scatter(seq, words, rows, width / per_word, pool.words);
  }
}

Pool paged_pool(Rng& rng, const Pool& logical, const Batch& b, bool nan_others) {
  Pool pool = make_pool(rng, b.pool_elements, b.space.kv);
  if (nan_others) {
    std::fill(pool.values.begin(), pool.values.end(), kNaN);
    std::fill(pool.words.begin(), pool.words.end(), b.space.kv == KvType::F32 ? kNaNWord : kNaNHalves);
  }
  scatter_sequences(logical, b, pool);
  return pool;
}

std::vector<float> read_pool(gpu::Device& device, const gpu::Buffer& buffer, uint64_t n, KvType kv) {
  if (kv == KvType::F32) return device.read_as<float>(buffer, 0, n);
  auto words = device.read_as<uint32_t>(buffer, 0, n / 2);
  std::vector<float> values(n);
  for (uint64_t i = 0; i < n; ++i) values[i] = f16_to_f32(uint16_t(words[i / 2] >> (16 * (i % 2))));
  return values;
}

// The rows of `buffer` [*, width] that the entries name, in table order.
std::vector<float> entry_rows(const std::vector<float>& all, const Batch& b, size_t width) {
  std::vector<float> out;
  for (const auto& e : b.entries)
    out.insert(out.end(), all.begin() + std::ptrdiff_t(e.row * width), all.begin() + std::ptrdiff_t((e.row + 1) * width));
  return out;
}

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {
      {2, 1, 16, 16, false, 0, KvType::F32, {0, 5, 2}, 9},
      {7, 1, 24, 12, true, 0, KvType::F32, {3, 0, 17, 8, 1}, 21},
      {4, 2, 8, 0, false, 3, KvType::F32, {6, 2}, 11},
      {14, 2, 64, 64, false, 0, KvType::F32, {300, 1, 45, 260}, 301},   // more keys than one 256-key tile
      {6, 3, 12, 8, true, 5, KvType::F32, {4, 13, 0, 7, 9, 2, 11}, 14},
      {4, 2, 16, 16, false, 0, KvType::F16, {0, 5, 2}, 9},
      {8, 2, 40, 24, true, 0, KvType::F16, {3, 19, 30}, 31},
      {3, 1, 96, 64, false, 0, KvType::F32, {2, 270, 5}, 271},          // head_dim not dividing 1024
      {4, 1, 256, 128, false, 0, KvType::F32, {4, 1}, 6},               // the largest head
      {4, 2, 16, 16, false, 40, KvType::F32, {280, 3, 300}, 301},       // a window's tile across a block edge
  };
  return all;
}

class RowKernels : public ::testing::TestWithParam<size_t> {};

TEST_P(RowKernels, RopeStoreRowsMatchesFloat64Reference) {
  const Shape& s = shapes()[GetParam()];
  gpu::Device& device = test::device();
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE(describe(s) + ", seed " + std::to_string(seed));
  Rng rng(seed);
  Batch batch = make_batch(s, rng, 3);  // the stores take blocks of any size: small ones, many edges
  size_t width = size_t(s.Hq + 2 * s.Hkv) * s.D, q_width = size_t(s.Hq) * s.D;
  auto qkv = check::random_floats(rng, batch.activation_rows * width);
  auto q_norm = check::random_floats(rng, s.D, 0.5f, 1.5f), k_norm = check::random_floats(rng, s.D, 0.5f, 1.5f);
  auto rope_table = check::rope_table(s.rotary_dim);
  Pool k = make_pool(rng, batch.logical_elements, s.kv), v = make_pool(rng, batch.logical_elements, s.kv);
  poison_rows(k, batch);
  poison_rows(v, batch);
  Pool k_paged = paged_pool(rng, k, batch, false), v_paged = paged_pool(rng, v, batch, false);
  const float eps = 1e-6f;

  check::Buffers b{device};
  auto& q_out = b.poisoned("q_out", batch.activation_rows * q_width);
  auto& k_pool = b.input("k_pool", k_paged.words);
  auto& v_pool = b.input("v_pool", v_paged.words);
  QkvRopeParams p{uint32_t(batch.entries.size()), s.Hq, s.Hkv, s.D, s.rotary_dim, 0, s.qk_norm, float_bits(eps)};
  run(device, rope_store_rows(device, {&b.input("qkv", qkv)}, {&b.input("q_norm", q_norm)}, {&b.input("k_norm", k_norm)},
                              {&b.input("rope_table", rope_table)}, {&q_out},
                              {&k_pool}, {&v_pool}, {&b.input("table", batch.entries)}, kv_blocks(b, batch), p,
                              batch.space));

  auto ref = reference::rope_store_rows(check::widen(qkv), s.qk_norm ? check::widen(q_norm) : std::vector<double>{},
                                        s.qk_norm ? check::widen(k_norm) : std::vector<double>{}, check::widen(rope_table),
                                        batch.rows, {1, s.Hq, s.Hkv, s.D, s.rotary_dim, 0, s.kv == KvType::F16}, eps,
                                        k.values, v.values);
  auto gpu = entry_rows(b.read(q_out, batch.activation_rows * q_width), batch, q_width);
  EXPECT_LT(check::relative_error(gpu, ref.q), 1e-5);
  // An f16 store may round the other way where the f32 value lies on a rounding boundary: 2^-10 at most.
  double cache_bound = s.kv == KvType::F16 ? 1e-3 : 1e-5;
  // The whole pools: the logical reference through the tables, and the rows outside them unchanged.
  Pool k_expected = k_paged, v_expected = v_paged;
  scatter_sequences({ref.k_cache, k.words}, batch, k_expected);
  scatter_sequences({ref.v_cache, v.words}, batch, v_expected);
  EXPECT_LT(check::relative_error(read_pool(device, k_pool, batch.pool_elements, s.kv), k_expected.values), cache_bound);
  EXPECT_LT(check::relative_error(read_pool(device, v_pool, batch.pool_elements, s.kv), v_expected.values), cache_bound);
}

TEST_P(RowKernels, AttentionRowsMatchesFloat64Reference) {
  const Shape& s = shapes()[GetParam()];
  gpu::Device& device = test::device();
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE(describe(s) + ", seed " + std::to_string(seed));
  Rng rng(seed);
  Batch batch = make_batch(s, rng, kKvBlockTokens);  // attention_rows' smallest blocks: its 256-key tiles
  size_t q_width = size_t(s.Hq) * s.D;
  auto Q = check::random_floats(rng, batch.activation_rows * q_width);
  Pool k = make_pool(rng, batch.logical_elements, s.kv), v = make_pool(rng, batch.logical_elements, s.kv);
  Pool k_paged = paged_pool(rng, k, batch, true), v_paged = paged_pool(rng, v, batch, true);
  float scale = 1.f / std::sqrt(float(s.D));

  check::Buffers b{device};
  auto& out = b.poisoned("out", batch.activation_rows * q_width);
  FlashAttentionParams p{uint32_t(batch.entries.size()), 0, s.Hq, s.Hkv, s.D, 0, s.window, float_bits(scale)};
  run(device, attention_rows(device, {&b.input("Q", Q)}, {&b.input("k_pool", k_paged.words)},
                             {&b.input("v_pool", v_paged.words)}, {&out}, {&b.input("table", batch.entries)},
                             kv_blocks(b, batch), p, batch.space));

  auto ref = reference::attention_rows(check::widen(Q), k.values, v.values, batch.rows, s.Hq, s.Hkv, s.D, s.window, scale);
  auto gpu = entry_rows(b.read(out, batch.activation_rows * q_width), batch, q_width);
  EXPECT_LT(check::relative_error(gpu, ref), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RowKernels, ::testing::Range<size_t>(0, 10));

TEST(RowKernels, CoverEveryShape) { EXPECT_EQ(shapes().size(), 10u); }

TEST(RowTable, RefusesEntriesOutsideTheBuffers) {
  RowSpace space{4, 8, 16, KvType::F32};  // 8 table entries, blocks of 4 tokens below
  std::vector<RowEntry> fine = {{3, 6, 7, 0}};  // entry 6 + 7 / 4 = 7: the last
  EXPECT_NO_THROW(check_row_table(fine, space, 4));
  std::vector<RowEntry> row = {{0, 0, 0, 0}, {4, 0, 0, 0}};
  EXPECT_THAT([&] { check_row_table(row, space, 4); }, ThrowsMessage<Error>(HasSubstr("entry 1: activation row 4")));
  std::vector<RowEntry> position = {{0, 6, 8, 0}};  // entry 6 + 8 / 4 = 8: past the table
  EXPECT_THAT([&] { check_row_table(position, space, 4); }, ThrowsMessage<Error>(HasSubstr("position 8")));
}

TEST(RowKernels, RefuseShapesTheyCannotRun) {
  gpu::Device& device = test::device();
  check::Buffers b{device};
  auto& any = b.input("any", std::vector<float>(4096, 0.f));
  RowSpace space{4, 4, 2 * 6, KvType::F32};
  KvBlocks blocks{{&any}, 1, 256};
  FlashAttentionParams p{2, 0, 4, 2, 6, 0, 0, float_bits(1.f)};  // head_dim 6: not whole 16-byte words
  EXPECT_THAT([&] { attention_rows(device, {&any}, {&any}, {&any}, {&any}, {&any}, blocks, p, space); },
              ThrowsMessage<Error>(HasSubstr("16-byte words")));
  QkvRopeParams odd{2, 3, 2, 8, 8, 0, 0, 0};  // 3 q heads over 2 kv heads
  EXPECT_THAT([&] { rope_store_rows(device, {&any}, {&any}, {&any}, {&any}, {&any}, {&any}, {&any}, {&any}, blocks,
                                    odd, {4, 4, 16, KvType::F32}); },
              ThrowsMessage<Error>(HasSubstr("multiple of kv_heads")));
  // attention_rows reads the table once per 256-key tile: blocks must hold whole tiles.
  FlashAttentionParams fine{2, 0, 4, 2, 8, 0, 0, float_bits(1.f)};
  RowSpace eight{4, 4, 2 * 8, KvType::F32};
  EXPECT_THAT([&] { attention_rows(device, {&any}, {&any}, {&any}, {&any}, {&any}, {{&any}, 1, 128}, fine, eight); },
              ThrowsMessage<Error>(HasSubstr("not a positive multiple of its key tile of 256")));
  EXPECT_FALSE(attention_rows_fits(12, KvType::F16));
  EXPECT_TRUE(attention_rows_fits(16, KvType::F16));
}

}  // namespace
}  // namespace gerbil::kernels
