// The q8 KV cache (KvType::Q8, kv_cache.wgsl): every kernel that writes the cache stores rows that decode, by the
// format as this file reads it, to the float64 reference's values within the format's bound (half a row's scale),
// with the scale absmax / 127, no code past +-127 and zero rows all zero, on inputs of extreme magnitudes; every
// reader matches a float64 attention over the dequantized cache tightly and over the unquantized one within the
// bound quantization allows; both at positions past 1,000 through scrambled block tables, the pool's other rows
// left alone (writers) or poisoned with NaN scales (readers). And the dispatch rules: no fused writer, no subgroup
// reader, head_dim a multiple of 4.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checks/check_support.h"
#include "gerbil/error.h"
#include "kernels/batched.h"
#include "kernels/model.h"
#include "kernels/seed.h"
#include "reference/batched.h"
#include "reference/model.h"
#include "support/device.h"

namespace gerbil::kernels {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr uint32_t kNaNWord = 0x7FC00000u;

// The q8 layout of a pool of `rows` rows of `width` elements (kv heads of head_dim each): four codes a word, the
// lowest-indexed element in the lowest byte, then one f32 scale word per (row, kv head) in row order.
struct Q8Layout {
  uint64_t rows, width;
  uint32_t head_dim;

  uint64_t elements() const { return rows * width; }
  uint64_t data_words() const { return elements() / 4; }
  uint64_t words() const { return data_words() + elements() / head_dim; }
  uint64_t scale_word(uint64_t e) const { return data_words() + e / head_dim; }
};

int code_of(const std::vector<uint32_t>& words, uint64_t e) {
  return int(int8_t(uint8_t(words[e / 4] >> (8 * (e % 4)))));
}

float scale_of(const std::vector<uint32_t>& words, const Q8Layout& l, uint64_t e) {
  return std::bit_cast<float>(words[l.scale_word(e)]);
}

// Stores head_dim values from element `first` (a row's start) as the format says: scale absmax / 127 in f32,
// codes round(x / scale) clamped to +-127 (0 for a zero row).
void quantize_row(std::vector<uint32_t>& words, const Q8Layout& l, uint64_t first, std::span<const double> x) {
  double absmax = 0;
  for (double v : x) absmax = std::max(absmax, std::abs(v));
  float scale = float(absmax) / 127.f;
  words[l.scale_word(first)] = std::bit_cast<uint32_t>(scale);
  for (uint64_t d = 0; d < x.size(); ++d) {
    int code = scale > 0 ? int(std::clamp(std::nearbyint(x[d] / scale), -127.0, 127.0)) : 0;
    uint64_t e = first + d;
    uint32_t& word = words[e / 4];
    word = (word & ~(0xFFu << (8 * (e % 4)))) | (uint32_t(uint8_t(int8_t(code))) << (8 * (e % 4)));
  }
}

// Random values in [-1, 1] whose rows of head_dim are scaled by 10^u, u uniform in [lo, hi]: every row has its
// own magnitude, as the scale is per row.
std::vector<double> random_rows(Rng& rng, uint64_t n, uint32_t head_dim, double lo, double hi) {
  std::uniform_real_distribution<double> value(-1, 1), exponent(lo, hi);
  std::vector<double> x(n);
  for (uint64_t r = 0; r < n / head_dim; ++r) {
    double magnitude = std::pow(10.0, exponent(rng));
    for (uint32_t d = 0; d < head_dim; ++d) x[r * head_dim + d] = value(rng) * magnitude;
  }
  return x;
}

// A stored q8 row against the float64 values x it should hold. The kernels compute x in f32 (rotations at
// positions past 1,000 put angles off by up to ~1e-4 rad), so the values they quantize may differ from x by
// `slack` = 2e-4 of the row's absmax; a step of the format is 1/127 ~ 7.9e-3 of it, so a code rounded the wrong
// way, a wrong scale or byte order, or a missing clamp is still far outside.
void expect_row_holds(const std::vector<uint32_t>& words, const Q8Layout& l, uint64_t first,
                      std::span<const double> x, const std::string& what) {
  double absmax = 0;
  for (double v : x) absmax = std::max(absmax, std::abs(v));
  double scale = scale_of(words, l, first);
  if (absmax == 0) {
    EXPECT_EQ(scale, 0.0) << what << ": a zero row's scale";
    for (uint64_t d = 0; d < x.size(); ++d) EXPECT_EQ(code_of(words, first + d), 0) << what << ", dim " << d;
    return;
  }
  double slack = 2e-4 * absmax;
  EXPECT_NEAR(scale, absmax / 127, slack / 127) << what << ": the scale is absmax / 127";
  for (uint64_t d = 0; d < x.size(); ++d) {
    int code = code_of(words, first + d);
    EXPECT_LE(std::abs(code), 127) << what << ", dim " << d;
    EXPECT_LE(std::abs(code * scale - x[d]), scale / 2 + slack) << what << ", dim " << d << ": code " << code;
  }
}

// The words of a pool at random, scales included (finite), for a writer's check that untouched rows stay so.
std::vector<uint32_t> random_words(Rng& rng, const Q8Layout& l) {
  std::uniform_int_distribution<uint32_t> word;
  std::uniform_real_distribution<float> scale(0.f, 1.f);
  std::vector<uint32_t> words(l.words());
  for (uint64_t i = 0; i < l.data_words(); ++i) words[i] = word(rng);
  for (uint64_t i = l.data_words(); i < words.size(); ++i) words[i] = std::bit_cast<uint32_t>(scale(rng));
  return words;
}

// q|k|v rows for the writers: heads of magnitudes 10^-12 .. 10^12, in row 0 one k head and one v head all zeros,
// in row 1 a v head with an outlier 10^4 times its others (its other codes round to zero or +-1).
std::vector<float> writer_qkv(Rng& rng, uint32_t rows, uint32_t Hq, uint32_t Hkv, uint32_t D) {
  uint32_t heads = Hq + 2 * Hkv;
  auto x = random_rows(rng, uint64_t(rows) * heads * D, D, -12, 12);
  for (uint32_t r = 0; r < rows; ++r) {
    double* row = x.data() + uint64_t(r) * heads * D;
    if (r == 0) {
      std::fill_n(row + uint64_t(Hq) * D, D, 0.0);              // k head 0
      std::fill_n(row + uint64_t(Hq + Hkv + 1 % Hkv) * D, D, 0.0);  // a v head
    }
    if (r == 1) row[uint64_t(Hq + Hkv) * D + 3] *= 1e4;  // v head 0's dim 3
  }
  return {x.begin(), x.end()};
}

// The rows a writer stored (pool row, logical row of ref) match ref's values, and every other word is unchanged.
void expect_pool_written(const std::vector<uint32_t>& got, const std::vector<uint32_t>& before, const Q8Layout& l,
                         const std::vector<std::pair<uint64_t, uint64_t>>& rows, const std::vector<double>& ref,
                         const std::string& what) {
  std::vector<uint32_t> expected_untouched = before;
  std::vector<uint32_t> got_untouched = got;
  for (auto [pool_row, logical] : rows) {
    for (uint64_t head = 0; head < l.width / l.head_dim; ++head) {
      uint64_t first = pool_row * l.width + head * l.head_dim;
      std::span<const double> x(ref.data() + logical * l.width + head * l.head_dim, l.head_dim);
      expect_row_holds(got, l, first, x, fmt::format("{}: logical row {} kv head {}", what, logical, head));
      for (uint64_t w = first / 4; w < (first + l.head_dim) / 4; ++w) expected_untouched[w] = got_untouched[w] = 0;
      expected_untouched[l.scale_word(first)] = got_untouched[l.scale_word(first)] = 0;
    }
  }
  EXPECT_TRUE(got_untouched == expected_untouched) << what << ": words outside the stored rows changed";
}

// One entry per sequence: activation row row_of[i], the sequence's block table, position positions[i]; the
// reference's table sees the sequences one after another, `capacity` rows of `width` each.
struct RowTables {
  std::vector<RowEntry> entries;
  std::vector<reference::TableRow> table;
};
RowTables row_tables(const check::ScrambledBlocks& blocks, const std::vector<uint32_t>& row_of,
                     const std::vector<uint32_t>& positions, uint32_t capacity, uint64_t width) {
  RowTables t;
  for (size_t i = 0; i < positions.size(); ++i) {
    t.entries.push_back({row_of[i], blocks.table_base[i], positions[i], 0});
    t.table.push_back({row_of[i], capacity * width * i, positions[i]});
  }
  return t;
}

struct WriterShape {
  uint32_t T, Hq, Hkv, D, rotary_dim;
  bool qk_norm;
  uint32_t position;
};

class Q8Writers : public ::testing::TestWithParam<WriterShape> {};

TEST_P(Q8Writers, QkvRopeStoreRowsDecodeToTheReference) {
  const WriterShape s = GetParam();
  gpu::Device& device = test::device();
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE(fmt::format("T={} heads={}/{} D={} rotary={} qk_norm={} position={}, seed {}", s.T, s.Hq, s.Hkv, s.D,
                           s.rotary_dim, s.qk_norm, s.position, seed));
  Rng rng(seed);
  uint32_t capacity = s.position + s.T + 3;
  auto blocks = check::scrambled_blocks(rng, {capacity}, kKvBlockTokens);
  uint64_t width = uint64_t(s.Hkv) * s.D;
  Q8Layout layout{blocks.pool_rows(), width, s.D};
  auto qkv = writer_qkv(rng, s.T, s.Hq, s.Hkv, s.D);
  auto q_norm = check::random_floats(rng, s.D, 0.5f, 1.5f), k_norm = check::random_floats(rng, s.D, 0.5f, 1.5f);
  auto rope_table = check::rope_table(s.rotary_dim);
  auto k_before = random_words(rng, layout), v_before = random_words(rng, layout);
  const float eps = 1e-6f;

  check::Buffers b{device};
  auto& q_out = b.poisoned("q_out", uint64_t(s.T) * s.Hq * s.D);
  auto& k_pool = b.input("k_pool", k_before);
  auto& v_pool = b.input("v_pool", v_before);
  QkvRopeParams p{s.T, s.Hq, s.Hkv, s.D, s.rotary_dim, s.position, s.qk_norm, float_bits(eps)};
  run(device, qkv_rope_store(device, {&b.input("qkv", qkv)}, {&b.input("q_norm", q_norm)}, {&b.input("k_norm", k_norm)},
                             {&b.input("rope_table", rope_table)}, {&q_out},
                             {&k_pool}, {&v_pool}, {{&b.input("kv_table", blocks.table)}, blocks.pool_blocks}, p,
                             capacity, KvType::Q8));

  std::vector<double> zeros(capacity * width, 0.0);
  auto ref = reference::qkv_rope_store(check::widen(qkv), s.qk_norm ? check::widen(q_norm) : std::vector<double>{},
                                       s.qk_norm ? check::widen(k_norm) : std::vector<double>{},
                                       check::widen(rope_table), {s.T, s.Hq, s.Hkv, s.D, s.rotary_dim, s.position},
                                       eps, zeros, zeros);
  // q is f32 as with every cache; its magnitudes span 24 decades, so each row against its own.
  auto q = b.read(q_out, ref.q.size());
  for (uint64_t h = 0; h < ref.q.size() / s.D; ++h) {
    std::vector<float> got(q.begin() + std::ptrdiff_t(h * s.D), q.begin() + std::ptrdiff_t((h + 1) * s.D));
    std::vector<double> want(ref.q.begin() + std::ptrdiff_t(h * s.D), ref.q.begin() + std::ptrdiff_t((h + 1) * s.D));
    EXPECT_LT(check::relative_error(got, want), 2e-4) << "q head " << h;
  }
  std::vector<std::pair<uint64_t, uint64_t>> rows;
  for (uint32_t t = 0; t < s.T; ++t) rows.push_back({blocks.row_of(0, s.position + t), s.position + t});
  expect_pool_written(device.read_as<uint32_t>(k_pool, 0, layout.words()), k_before, layout, rows, ref.k_cache, "k");
  expect_pool_written(device.read_as<uint32_t>(v_pool, 0, layout.words()), v_before, layout, rows, ref.v_cache, "v");
}

// Three sequences' rows in one dispatch, at positions past 1,000 and short ones, in shuffled activation rows.
TEST_P(Q8Writers, RopeStoreRowsDecodeToTheReference) {
  const WriterShape s = GetParam();
  gpu::Device& device = test::device();
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE(fmt::format("heads={}/{} D={} rotary={} qk_norm={}, seed {}", s.Hq, s.Hkv, s.D, s.rotary_dim,
                           s.qk_norm, seed));
  Rng rng(seed);
  const std::vector<uint32_t> positions = {s.position, 17, s.position + 300};
  uint32_t capacity = s.position + 301;
  auto blocks = check::scrambled_blocks(rng, std::vector<size_t>(positions.size(), capacity), kKvBlockTokens);
  uint64_t width = uint64_t(s.Hkv) * s.D;
  Q8Layout layout{blocks.pool_rows(), width, s.D};
  uint32_t activation_rows = uint32_t(positions.size()) + 1;  // one row no entry names
  auto [entries, table] = row_tables(blocks, {2, 0, 3}, positions, capacity, width);
  RowSpace space{activation_rows, uint32_t(blocks.table.size()), width, KvType::Q8};
  auto qkv = writer_qkv(rng, activation_rows, s.Hq, s.Hkv, s.D);
  auto q_norm = check::random_floats(rng, s.D, 0.5f, 1.5f), k_norm = check::random_floats(rng, s.D, 0.5f, 1.5f);
  auto rope_table = check::rope_table(s.rotary_dim);
  auto k_before = random_words(rng, layout), v_before = random_words(rng, layout);
  const float eps = 1e-6f;

  check::Buffers b{device};
  auto& q_out = b.poisoned("q_out", uint64_t(activation_rows) * s.Hq * s.D);
  auto& k_pool = b.input("k_pool", k_before);
  auto& v_pool = b.input("v_pool", v_before);
  QkvRopeParams p{uint32_t(entries.size()), s.Hq, s.Hkv, s.D, s.rotary_dim, 0, s.qk_norm, float_bits(eps)};
  run(device, rope_store_rows(device, {&b.input("qkv", qkv)}, {&b.input("q_norm", q_norm)}, {&b.input("k_norm", k_norm)},
                              {&b.input("rope_table", rope_table)}, {&q_out},
                              {&k_pool}, {&v_pool}, {&b.input("table", entries)},
                              {{&b.input("kv_table", blocks.table)}, blocks.pool_blocks}, p, space));

  std::vector<double> zeros(capacity * width * positions.size(), 0.0);
  auto ref = reference::rope_store_rows(check::widen(qkv), s.qk_norm ? check::widen(q_norm) : std::vector<double>{},
                                        s.qk_norm ? check::widen(k_norm) : std::vector<double>{},
                                        check::widen(rope_table), table, {1, s.Hq, s.Hkv, s.D, s.rotary_dim, 0}, eps,
                                        zeros, zeros);
  std::vector<std::pair<uint64_t, uint64_t>> rows;
  for (size_t i = 0; i < positions.size(); ++i)
    rows.push_back({blocks.row_of(i, positions[i]), capacity * i + positions[i]});
  expect_pool_written(device.read_as<uint32_t>(k_pool, 0, layout.words()), k_before, layout, rows, ref.k_cache, "k");
  expect_pool_written(device.read_as<uint32_t>(v_pool, 0, layout.words()), v_before, layout, rows, ref.v_cache, "v");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Q8Writers,
                         ::testing::Values(WriterShape{5, 4, 2, 64, 64, false, 1021},  // crosses a block edge
                                           WriterShape{3, 3, 1, 36, 20, true, 1500},   // rotary short of head_dim
                                           WriterShape{2, 2, 2, 256, 0, false, 1030},  // every thread a word
                                           WriterShape{2, 2, 1, 4, 4, true, 1100}));

// --- readers ---------------------------------------------------------------------------------------------

// A sequence's K or V rows (logical, [keys, width]) quantized into a pool through its block table: `values` the
// unquantized rows, `dequantized` what the stored rows decode to, `words` the pool (rows outside the table hold
// random codes and NaN scales, which a reader straying there brings into its output).
struct Q8Cache {
  std::vector<double> values, dequantized;
  std::vector<uint32_t> words;
  std::vector<double> half_steps;  // per logical (row, kv head): its scale / 2, the most a value moved
};

Q8Cache q8_cache(Rng& rng, const check::ScrambledBlocks& blocks, const std::vector<size_t>& keys, uint64_t width,
                 uint32_t head_dim, double lo, double hi) {
  Q8Layout layout{blocks.pool_rows(), width, head_dim};
  Q8Cache c;
  c.words = random_words(rng, layout);
  std::fill(c.words.begin() + std::ptrdiff_t(layout.data_words()), c.words.end(), kNaNWord);
  for (size_t seq = 0; seq < keys.size(); ++seq) {
    auto values = random_rows(rng, keys[seq] * width, head_dim, lo, hi);
    for (uint64_t j = 0; j < keys[seq]; ++j) {
      for (uint64_t head = 0; head < width / head_dim; ++head) {
        uint64_t first = blocks.row_of(seq, j) * width + head * head_dim;
        quantize_row(c.words, layout, first, std::span(values).subspan(j * width + head * head_dim, head_dim));
        double scale = scale_of(c.words, layout, first);
        c.half_steps.push_back(scale / 2);
        for (uint32_t d = 0; d < head_dim; ++d) c.dequantized.push_back(code_of(c.words, first + d) * scale);
      }
    }
    c.values.insert(c.values.end(), values.begin(), values.end());
  }
  return c;
}

double max_of(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

// The attention over the unquantized cache differs from the one over the q8 cache by at most: each score moves by
// at most delta = scale * sum_d |q_d| * (the largest key half-step), so each softmax weight by a factor within
// e^(+-2 delta) and the weighted sum by (e^(2 delta) - 1) max |v|; each value by its half-step. Per (query, head).
void expect_within_quantization(const std::vector<float>& got, const std::vector<double>& unquantized,
                                const std::vector<float>& Q, const Q8Cache& k, const Q8Cache& v, uint32_t D,
                                float scale) {
  double key_step = max_of(k.half_steps), value_step = max_of(v.half_steps), value_max = max_of(v.values);
  size_t outside = 0;
  for (size_t row = 0; row < got.size() / D; ++row) {
    double q_sum = 0;
    for (uint32_t d = 0; d < D; ++d) q_sum += std::abs(Q[row * D + d]);
    double delta = scale * q_sum * key_step;
    double bound = std::expm1(2 * delta) * value_max + value_step + 1e-5 * value_max;
    for (uint32_t d = 0; d < D; ++d) outside += std::abs(got[row * D + d] - unquantized[row * D + d]) > bound;
  }
  EXPECT_EQ(outside, 0u) << "outputs further from the unquantized attention than quantization allows";
}

struct ReaderShape {
  uint32_t T, Hq, Hkv, D, position, window;
  uint32_t capacity;  // > 0: the split-KV overload with this capacity
};

// Runs flash attention over a q8 cache of shape s on `device`, the pools in blocks of the kernel's key tile through a
// scrambled table, and checks it against the float64 attention over the dequantized cache (tightly) and over the
// unquantized one (within what quantization allows). Returns the first dispatch's kernel.
std::string expect_flash_attention_matches(gpu::Device& device, const ReaderShape& s) {
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE(fmt::format("T={} heads={}/{} D={} position={} window={} capacity={}, seed {}", s.T, s.Hq, s.Hkv, s.D,
                           s.position, s.window, s.capacity, seed));
  Rng rng(seed);
  uint32_t S = s.position + s.T;
  uint32_t capacity = std::max(S, s.capacity);
  float scale = 1.f / std::sqrt(float(s.D));
  FlashAttentionParams p{s.T, S, s.Hq, s.Hkv, s.D, s.position, s.window, float_bits(scale)};
  auto blocks = check::scrambled_blocks(rng, {capacity}, flash_attention_key_tile(device, p, KvType::Q8));
  uint64_t width = uint64_t(s.Hkv) * s.D;
  // Keys of magnitudes 10^-2 .. 10^0.5 (scores up to ~10: softmax neither flat nor one-hot), values 10^-6 .. 10^3.
  Q8Cache k = q8_cache(rng, blocks, {capacity}, width, s.D, -2, 0.5), v = q8_cache(rng, blocks, {capacity}, width, s.D, -6, 3);
  auto Q = check::random_floats(rng, uint64_t(s.T) * s.Hq * s.D);

  check::Buffers b{device};
  auto& out = b.poisoned("out", Q.size());
  KvBlocks kv_blocks{{&b.input("kv_table", blocks.table)}, blocks.pool_blocks, blocks.block_tokens};
  const auto& K = b.input("K", k.words);
  const auto& V = b.input("V", v.words);
  std::vector<Dispatch> dispatches;
  if (s.capacity) {
    auto& scratch = b.poisoned("scratch", flash_attention_scratch_bytes(device, p, s.capacity) / 4);
    dispatches = flash_attention(device, {&b.input("Q", Q)}, {&K}, {&V}, {&out}, kv_blocks, p, {&scratch}, s.capacity,
                                 KvType::Q8);
  } else {
    dispatches.push_back(flash_attention(device, {&b.input("Q", Q)}, {&K}, {&V}, {&out}, kv_blocks, p, KvType::Q8));
  }
  for (const auto& d : dispatches) EXPECT_NE(d.kernel, "flash_attention_sg") << "no subgroup reader for q8";
  run(device, dispatches);
  auto got = b.read(out, Q.size());

  auto attend = [&](const std::vector<double>& keys, const std::vector<double>& values) {
    return reference::flash_attention(check::widen(Q), std::span(keys).first(S * width),
                                      std::span(values).first(S * width), s.T, S, s.Hq, s.Hkv, s.D, s.position,
                                      s.window, scale);
  };
  EXPECT_LT(check::relative_error(got, attend(k.dequantized, v.dequantized)), 1e-5) << dispatches.front().kernel;
  expect_within_quantization(got, attend(k.values, v.values), Q, k, v, s.D, scale);
  return dispatches.front().kernel;
}

class Q8Readers : public ::testing::TestWithParam<ReaderShape> {};

TEST_P(Q8Readers, FlashAttentionMatchesTheDequantizedAttention) {
  EXPECT_NE(expect_flash_attention_matches(test::device(), GetParam()), "flash_attention_block");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Q8Readers,
                         ::testing::Values(ReaderShape{1, 4, 2, 64, 1100, 0, 0},     // flash_attention.wgsl
                                           ReaderShape{3, 2, 1, 36, 1300, 0, 0},     // odd vec4 count per row
                                           ReaderShape{1, 4, 2, 32, 1200, 500, 1600}));  // split-KV, windowed

// flash_attention_block.wgsl stages a q8 tile four codes a word, times the row's scale: each shape at the blockings
// lavapipe's own tuning takes (4 rows per thread where they fit its workgroup memory) and at those an H200's tuning
// takes (2 rows per thread for these short prompts), on keys deep in the cache through blocks of one key tile, so
// tiles from a window's first key span two blocks.
class Q8BlockReaders : public ::testing::TestWithParam<ReaderShape> {};

TEST_P(Q8BlockReaders, FlashAttentionAtEveryBlocking) {
  gpu::Device h200;
  h200.set_tuning(test::kH200);
  for (gpu::Device* device : {&test::device(), &h200})
    EXPECT_EQ(expect_flash_attention_matches(*device, GetParam()), "flash_attention_block");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Q8BlockReaders,
                         ::testing::Values(ReaderShape{20, 4, 2, 64, 1030, 0, 0},
                                           ReaderShape{37, 7, 1, 36, 1000, 100, 0},  // GQA 7, 9 words a row, a window
                                           ReaderShape{19, 4, 2, 4, 600, 45, 0},     // a word a row
                                           ReaderShape{33, 8, 2, 144, 700, 70, 0},   // 32-key tiles past head_dim 128
                                           ReaderShape{17, 4, 1, 256, 300, 0, 0},    // head_dim 256: 1 row a thread
                                           ReaderShape{24, 2, 2, 20, 2040, 0, 2100},  // split, 5 words a row
                                           ReaderShape{41, 4, 2, 128, 1030, 77, 3000}));  // split, a window

// attention_rows.wgsl: three sequences (one past 1,000 keys) in one dispatch.
TEST(Q8RowReader, AttentionRowsMatchesTheDequantizedAttention) {
  gpu::Device& device = test::device();
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  const uint32_t Hq = 4, Hkv = 2, D = 36;
  const std::vector<uint32_t> positions = {1100, 40, 700};
  uint32_t capacity = 1101;
  auto blocks = check::scrambled_blocks(rng, std::vector<size_t>(positions.size(), capacity), kKvBlockTokens);
  uint64_t width = uint64_t(Hkv) * D;
  std::vector<size_t> keys(positions.size(), capacity);
  Q8Cache k = q8_cache(rng, blocks, keys, width, D, -2, 0.5), v = q8_cache(rng, blocks, keys, width, D, -6, 3);
  uint32_t activation_rows = uint32_t(positions.size()) + 1;
  const std::vector<uint32_t> row_of = {3, 0, 1};
  auto [entries, table] = row_tables(blocks, row_of, positions, capacity, width);
  RowSpace space{activation_rows, uint32_t(blocks.table.size()), width, KvType::Q8};
  ASSERT_TRUE(attention_rows_fits(D, KvType::Q8));
  auto Q = check::random_floats(rng, uint64_t(activation_rows) * Hq * D);
  float scale = 1.f / std::sqrt(float(D));

  check::Buffers b{device};
  auto& out = b.poisoned("out", Q.size());
  FlashAttentionParams p{uint32_t(entries.size()), 0, Hq, Hkv, D, 0, 0, float_bits(scale)};
  run(device, attention_rows(device, {&b.input("Q", Q)}, {&b.input("k_pool", k.words)}, {&b.input("v_pool", v.words)},
                             {&out}, {&b.input("table", entries)},
                             {{&b.input("kv_table", blocks.table)}, blocks.pool_blocks}, p, space));
  auto all = b.read(out, Q.size());
  std::vector<float> got, queries;
  for (uint32_t row : row_of) {
    got.insert(got.end(), all.begin() + row * Hq * D, all.begin() + (row + 1) * Hq * D);
    queries.insert(queries.end(), Q.begin() + row * Hq * D, Q.begin() + (row + 1) * Hq * D);
  }
  auto attend = [&](const std::vector<double>& keys, const std::vector<double>& values) {
    return reference::attention_rows(check::widen(Q), keys, values, table, Hq, Hkv, D, 0, scale);
  };
  EXPECT_LT(check::relative_error(got, attend(k.dequantized, v.dequantized)), 1e-5);
  expect_within_quantization(got, attend(k.values, v.values), queries, k, v, D, scale);
}

// --- dispatch rules ---------------------------------------------------------------------------------------

TEST(Q8Rules, PoolBytesCountTheRowScales) {
  // 512 rows of 2 heads x 64: a byte per element and 4 per (row, head).
  EXPECT_EQ(kv_pool_bytes(KvType::Q8, 512 * 128, 64), 512u * 128 + 512 * 2 * 4);
  EXPECT_EQ(kv_pool_bytes(KvType::F16, 512 * 128, 64), 512u * 128 * 2);
  EXPECT_STREQ(kv_type_name(KvType::Q8), "q8");
}

TEST(Q8Rules, NoFusedWriterTakesAQ8Cache) {
  EXPECT_FALSE(qkv_rope_fusable({2, 1, 64, 64, 512, KvType::Q8}));
  EXPECT_TRUE(qkv_rope_fusable({2, 1, 64, 64, 512, KvType::F16}));
}

TEST(Q8Rules, HeadDimMustBeAMultipleOf4) {
  gpu::Device& device = test::device();
  check::Buffers b{device};
  const auto& any = b.poisoned("any", 1 << 16);
  KvBlocks blocks{{&any}, 2};
  EXPECT_THAT([&] {
    qkv_rope_store(device, {&any}, {&any}, {&any}, {&any}, {&any}, {&any}, {&any}, blocks, {1, 2, 1, 6, 0, 0, 0, 0}, 4,
                   KvType::Q8);
  }, ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'qkv_rope_store'"), HasSubstr("q8"),
                                HasSubstr("head_dim must be a multiple of 4, not 6"))));
  EXPECT_THAT([&] { flash_attention(device, {&any}, {&any}, {&any}, {&any}, blocks, {1, 1, 2, 1, 6, 0, 0, 0}, KvType::Q8); },
              ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'flash_attention'"), HasSubstr("multiple of 4, not 6"))));
  EXPECT_NO_THROW(flash_attention(device, {&any}, {&any}, {&any}, {&any}, blocks, {1, 1, 2, 1, 8, 0, 0, 0}, KvType::Q8));
  RowSpace space{1, 2, 6, KvType::Q8};
  EXPECT_THAT([&] {
    attention_rows(device, {&any}, {&any}, {&any}, {&any}, {&any}, blocks, {1, 0, 1, 1, 6, 0, 0, 0}, space);
  }, ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'attention_rows'"), HasSubstr("multiple of 4, not 6"))));
}

// A q8 pool is its data and its scales: a buffer holding only the data is refused, naming the operand.
TEST(Q8Rules, APoolWithoutRoomForItsScalesIsRefused) {
  gpu::Device& device = test::device();
  check::Buffers b{device};
  const auto& any = b.poisoned("any", 1 << 12);
  const auto& data_only = b.input("data only", std::vector<uint32_t>(256 * 8 / 4));  // 256 rows of 8, no scales
  KvBlocks blocks{{&any}, 1};
  EXPECT_THAT([&] { flash_attention(device, {&any}, {&data_only}, {&any}, {&any}, blocks, {1, 1, 2, 1, 8, 0, 0, 0}, KvType::Q8); },
              ThrowsMessage<Error>(AllOf(HasSubstr("operand 'K'"), HasSubstr("3072 bytes"))));
}

}  // namespace
}  // namespace gerbil::kernels
