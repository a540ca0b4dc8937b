// The checks of the model kernels (kernels/model.h) against their float64 references (reference/model.h).
#include <bit>

#include "gerbil/error.h"
#include "checks/check_support.h"
#include "graph/gpu_weights.h"
#include "kernels/model.h"
#include "kernels/seed.h"
#include "model/quant.h"
#include "reference/model.h"
#include "reference/reference.h"

namespace gerbil::kernels {
namespace {

using namespace check;
using reference::Activation;
constexpr WeightType F32 = WeightType::F32, F16 = WeightType::F16, BF16 = WeightType::BF16;

const char* type_name(WeightType type) { return type == F32 ? "f32" : type == F16 ? "f16" : "bf16"; }

// --- test data ----------------------------------------------------------------------------------------

// The f16 bits of v, which must be zero or a normal f16 number with at most 11 significant bits.
uint16_t f16_bits(float v) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  uint32_t sign = (bits >> 16) & 0x8000u;
  if ((bits & 0x7FFFFFFFu) == 0) return static_cast<uint16_t>(sign);
  uint32_t exponent = ((bits >> 23) & 0xFFu) - 127 + 15;
  return static_cast<uint16_t>(sign | exponent << 10 | ((bits >> 13) & 0x3FFu));
}

// Two 16-bit values per u32, the lower index in the low half, as in a safetensors file.
std::vector<uint32_t> pack_halves(const std::vector<uint16_t>& halves) {
  std::vector<uint32_t> words((halves.size() + 1) / 2, 0);
  for (size_t i = 0; i < halves.size(); ++i) words[i / 2] |= uint32_t(halves[i]) << (16 * (i % 2));
  return words;
}

// Values steps_lo / scale .. steps_hi / scale with integer steps: exact in f16 when scale = 2048 and
// |steps| < 2048, exact in bf16 when scale = 256 and |steps| < 256.
std::vector<float> grid_floats(Rng& rng, size_t n, int steps_lo, int steps_hi, float scale) {
  std::uniform_int_distribution<int> dist(steps_lo, steps_hi);
  std::vector<float> values(n);
  for (float& v : values) v = float(dist(rng)) / scale;
  return values;
}

// Random weights in [-1, 1] as uploaded (u32 words) and as the reference sees them. 16-bit weights are
// drawn on a grid their type represents exactly, so both sides use the same numbers.
struct Weights {
  std::vector<uint32_t> words;
  std::vector<double> values;
};

Weights random_weights(Rng& rng, size_t n, WeightType type) {
  std::vector<float> values;
  std::vector<uint32_t> words;
  if (type == F32) {
    values = random_floats(rng, n);
    for (float v : values) words.push_back(std::bit_cast<uint32_t>(v));
  } else {
    std::vector<uint16_t> halves;
    if (type == F16) {
      values = grid_floats(rng, n, -2047, 2047, 2048.f);
      for (float v : values) halves.push_back(f16_bits(v));
    } else {
      values = grid_floats(rng, n, -255, 255, 256.f);
      for (float v : values) halves.push_back(static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16));
    }
    words = pack_halves(halves);
  }
  return {std::move(words), widen(values)};
}

std::vector<uint32_t> random_words(Rng& rng, size_t n) {
  std::uniform_int_distribution<uint32_t> dist;
  std::vector<uint32_t> words(n);
  for (uint32_t& w : words) w = dist(rng);
  return words;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();

constexpr KvType KV32 = KvType::F32, KV16 = KvType::F16;

// A KV cache's contents (n elements, n even for f16) as uploaded and as the reference sees them: random values in
// [-1, 1], on a grid f16 represents exactly for an f16 cache.
Weights random_cache(Rng& rng, size_t n, KvType kv) {
  return random_weights(rng, n, kv == KV16 ? F16 : F32);
}

// Poisons elements [first, first + count) of a cache (both even for f16): NaN values, and NaN words.
void poison_cache(Weights& cache, size_t first, size_t count, KvType kv) {
  std::fill_n(cache.values.begin() + first, count, std::numeric_limits<double>::quiet_NaN());
  if (kv == KV16) {
    std::fill_n(cache.words.begin() + first / 2, count / 2, 0x7E007E00u);  // two f16 quiet NaNs
  } else {
    std::fill_n(cache.words.begin() + first, count, std::bit_cast<uint32_t>(kNaN));
  }
}

float f16_value(uint32_t half) {
  float magnitude = (half & 0x7C00u) == 0x7C00u ? ((half & 0x3FFu) ? kNaN : INFINITY)
                    : (half & 0x7C00u) == 0      ? std::ldexp(float(half & 0x3FFu), -24)
                                                 : std::ldexp(float((half & 0x3FFu) | 0x400u), int((half >> 10) & 0x1Fu) - 25);
  return half & 0x8000u ? -magnitude : magnitude;
}

// The first n elements of a cache buffer, widened to f32.
std::vector<float> read_cache(gpu::Device& device, const gpu::Buffer& buffer, size_t n, KvType kv) {
  if (kv == KV32) return device.read_as<float>(buffer, 0, n);
  auto words = device.read_as<uint32_t>(buffer, 0, (n + 1) / 2);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = f16_value(words[i / 2] >> (16 * (i % 2)) & 0xFFFFu);
  return values;
}

// An f16 cache's stored values may differ from the float64 reference rounded to f16 by one f16 step where the
// kernel's f32 value lies on the other side of a rounding boundary, or where the adapter rounds the other way
// (WGSL's pack2x16float may): 2^-10 relative at most for those elements.
constexpr double kF16CacheBound = 1e-3;

// --- the checks ---------------------------------------------------------------------------------------

struct EmbedShape {
  uint32_t T, D, vocab, blocks;
  WeightType type;
  float scale;
  bool positions;
  uint32_t position_offset;
  bool skip_last_block;  // its tokens must keep the values `out` had before
  bool one_table = false;  // the blocks bound at their offsets in one buffer, as the graph binds a split table
  uint32_t first_row = 0;  // the T tokens gathered lie between first_row others before and after them
};

std::string describe_embed(const EmbedShape& s) {
  return fmt::format("T={}{} D={} vocab={} blocks={}{}{} {} scale={} positions={}", s.T,
                     s.first_row ? fmt::format(" from row {} of {}", s.first_row, s.T + 2 * s.first_row) : "", s.D,
                     s.vocab, s.blocks,
                     s.skip_last_block ? " (last skipped)" : "", s.one_table ? " in one buffer" : "",
                     type_name(s.type), s.scale, s.positions ? fmt::format("from {}", s.position_offset) : "none");
}

KernelCheck embed_check(bool quick) {
  std::vector<EmbedShape> shapes = {{1, 64, 50, 1, F32, 1.f, false, 0, false},
                                    {7, 33, 100, 2, F16, 8.f, false, 0, false},
                                    {5, 17, 51, 3, BF16, 1.5f, false, 0, false},
                                    {9, 40, 64, 1, F32, 1.f, true, 3, false},
                                    {6, 24, 90, 2, F16, 1.f, true, 0, true},
                                    // D % 4 == 0 runs embed_vec4.wgsl: every type, with and without positions
                                    {5, 36, 70, 2, BF16, 2.f, false, 0, false},
                                    {4, 20, 30, 1, BF16, 1.f, true, 2, false},
                                    {3, 12, 40, 3, F16, 0.5f, false, 0, true},
                                    // blocks at 256-byte offsets of one buffer (rows of 256 bytes), as the graph
                                    // binds a table larger than the binding limit
                                    {9, 64, 100, 3, F32, 1.f, false, 0, false, true},
                                    {5, 128, 60, 2, F16, 2.f, true, 1, true, true},
                                    // one sequence's rows of a batched step (GPT-2): the rows around keep their values
                                    {4, 20, 30, 1, F32, 1.f, true, 7, false, false, 3},
                                    {3, 17, 40, 2, F16, 1.f, true, 2, true, false, 5}};
  if (!quick) shapes.push_back({300, 257, 1000, 2, BF16, 16.f, true, 7, false});
  constexpr double bound = 1e-6;
  return make_check<EmbedShape>(
      "embed", bound, "one f32 multiply (and one add with positions) per element: at most ~2 ulp", shapes,
      describe_embed, [](gpu::Device& device, Rng& rng, const EmbedShape& s) {
        auto block_begin = [&](uint32_t b) { return uint32_t(uint64_t(s.vocab) * b / s.blocks); };
        uint32_t rows_in_all = s.T + 2 * s.first_row;
        auto ids = random_ints(rng, rows_in_all, s.vocab);
        for (uint32_t b = 0; b < s.blocks && b < s.T; ++b)  // every block gets a token
          ids[s.first_row + b] = block_begin(b) + ids[s.first_row + b] % (block_begin(b + 1) - block_begin(b));
        uint32_t position_rows = s.positions ? s.position_offset + s.T + 2 : 1;
        auto positions = random_floats(rng, size_t(position_rows) * s.D);
        // Tokens not gathered, and those of a skipped block, keep random prior values; the rest start as NaN.
        auto prior = random_floats(rng, size_t(rows_in_all) * s.D);
        if (!s.skip_last_block)
          std::fill_n(prior.begin() + size_t(s.first_row) * s.D, size_t(s.T) * s.D, kNaN);
        Buffers b{device};
        auto& out = b.input("out", prior);
        auto& ids_buffer = b.input("ids", ids);
        auto& positions_buffer = b.input("positions", positions);
        std::vector<double> ref = widen(prior);
        Weights whole;  // one_table: every block's rows, in one buffer
        if (s.one_table) whole = random_weights(rng, size_t(s.vocab) * s.D, s.type);
        const gpu::Buffer* whole_buffer = s.one_table ? &b.input("table", whole.words) : nullptr;
        uint64_t row_bytes = uint64_t(s.D) * weight_bytes(s.type);
        for (uint32_t block = 0; block < s.blocks - (s.skip_last_block ? 1 : 0); ++block) {
          uint32_t rows = block_begin(block + 1) - block_begin(block);
          uint32_t first = block_begin(block);
          std::vector<double> values;
          BufferBinding table;
          if (s.one_table) {
            if (first * row_bytes % 256 != 0) fail("embed check {}: block offset not 256-aligned", describe_embed(s));
            values.assign(whole.values.begin() + size_t(first) * s.D, whole.values.begin() + size_t(first + rows) * s.D);
            table = {whole_buffer, first * row_bytes, rows * row_bytes};
          } else {
            auto block_weights = random_weights(rng, size_t(rows) * s.D, s.type);
            values = std::move(block_weights.values);
            table = {&b.input("table", block_weights.words)};
          }
          EmbedParams p{s.T, s.D, first, rows, float_bits(s.scale), s.position_offset, s.positions, s.first_row};
          run(device, embed(device, {&ids_buffer}, table, {&positions_buffer}, {&out}, p, s.type, position_rows));
          ref = reference::embed(ids, values, s.positions ? widen(positions) : std::vector<double>{}, s.first_row,
                                 s.T, s.D, first, s.scale, s.position_offset, std::move(ref));
        }
        return result("embed", describe_embed(s), b.read(out, ref.size()), ref, bound);
      });
}

struct LinearShape {
  uint32_t M, K, N;
  WeightType type;
  bool bias, residual;
  uint32_t out_stride = 0, out_col = 0;  // out_stride 0: N
  uint32_t row0 = 0;  // the block's first row in the bound weight (row0 * K * bytes is a multiple of 256)
  MatvecBlocking blocking = {};  // the subgroup decode variant's; zeros: the dispatcher's choice
  uint32_t workers = 0;          // prompts: workgroups sharing the work (linear_split_k); 0: the dispatcher's
};

std::string describe_blocking(MatvecBlocking b) {
  return (b.columns || b.split || b.unroll ? fmt::format(" columns={} split={} unroll={}", b.columns, b.split, b.unroll)
                                            : "") +
         (b.workgroups ? fmt::format(" workgroups={}", b.workgroups) : "");
}

LinearParams linear_params(const LinearShape& s) {
  return {s.M, s.K, s.N, s.out_stride ? s.out_stride : s.N, s.out_col, s.bias, s.residual};
}

// The workers named are the requested ones: the dispatcher's own choice depends on the adapter's tuning.
std::string describe_linear(const LinearShape& s) {
  return fmt::format("M={} K={} N={} {}{}{} out_stride={} out_col={} row0={}{}{}", s.M, s.K, s.N,
                     type_name(s.type), s.bias ? " bias" : "", s.residual ? " residual" : "",
                     s.out_stride ? s.out_stride : s.N, s.out_col, s.row0, describe_blocking(s.blocking),
                     s.workers ? fmt::format(" workers={} (requested)", s.workers) : "");
}

// x, bias, residual and out of a linear layer, uploaded; `ref` starts as the prior contents of out: NaN in
// the block's columns, random values in the others, which must be left alone.
struct LinearIo {
  std::vector<float> x, bias, residual;
  std::vector<double> ref;
  const gpu::Buffer *x_buffer, *bias_buffer, *residual_buffer, *out;
};

LinearIo linear_io(Buffers& b, Rng& rng, uint32_t M, uint32_t K, uint32_t N, uint32_t out_stride,
                   uint32_t out_col, bool bias, bool residual) {
  LinearIo io;
  io.x = random_floats(rng, size_t(M) * K);
  io.x_buffer = &b.input("x", io.x);
  io.bias_buffer = io.residual_buffer = io.x_buffer;  // any buffer stands in for an unused operand
  if (bias) {
    io.bias = random_floats(rng, N);
    io.bias_buffer = &b.input("bias", io.bias);
  }
  if (residual) {
    io.residual = random_floats(rng, size_t(M) * out_stride);
    io.residual_buffer = &b.input("residual", io.residual);
  }
  auto prior = random_floats(rng, size_t(M) * out_stride);
  for (uint32_t m = 0; m < M; ++m) std::fill_n(prior.begin() + size_t(m) * out_stride + out_col, N, kNaN);
  io.out = &b.input("out", prior);
  io.ref = widen(prior);
  return io;
}

// One linear case: random weights of the shape's type (a block of rows from row0 on), x, bias and residual;
// prompts go through linear_split_k() in `arithmetic` (shared out where the shape asks or the dispatcher
// chooses), decoding and batched steps with a blocking of their own through linear() with the shape's blocking.
CaseResult linear_case(gpu::Device& device, Rng& rng, const LinearShape& s, Arithmetic arithmetic,
                       const std::string& kernel, double bound) {
  uint32_t stride = s.out_stride ? s.out_stride : s.N;
  uint64_t offset = uint64_t(s.row0) * s.K * weight_bytes(s.type);
  if (offset % 256 != 0) fail("{} check {}: weight offset {} is not 256-aligned", kernel, describe_linear(s), offset);
  Buffers b{device};
  auto weight = random_weights(rng, size_t(s.row0 + s.N) * s.K, s.type);
  auto& weight_buffer = b.input("W", weight.words);
  auto io = linear_io(b, rng, s.M, s.K, s.N, stride, s.out_col, s.bias, s.residual);
  LinearParams p = linear_params(s);
  bool rows_blocking = use_linear_rows(device, p, s.type) &&
                       (s.blocking.columns || s.blocking.split || s.blocking.unroll || s.blocking.workgroups);
  if (p.M > kMatvecRows && !rows_blocking) {
    auto& scratch = b.poisoned("scratch", std::max<uint64_t>(linear_split_scratch_floats(device, p, s.workers), 1));
    for (const Dispatch& d : linear_split_k(device, {io.x_buffer}, {&weight_buffer, offset}, {io.bias_buffer},
                                            {io.residual_buffer}, {io.out}, p, s.type, {&scratch}, s.workers,
                                            arithmetic))
      run(device, d);
  } else {
    run(device, linear(device, {io.x_buffer}, {&weight_buffer, offset}, {io.bias_buffer}, {io.residual_buffer},
                       {io.out}, p, s.type, {}, s.blocking));
  }
  std::span<const double> block(weight.values.data() + size_t(s.row0) * s.K, size_t(s.N) * s.K);
  auto ref = reference::linear(widen(io.x), block, widen(io.bias), widen(io.residual), s.M, s.K, s.N, stride,
                               s.out_col, std::move(io.ref));
  return result(kernel, describe_linear(s), b.read(*io.out, ref.size()), ref, bound);
}

std::vector<LinearShape> linear_shapes(bool quick) {
  std::vector<LinearShape> shapes = {
      // matrix-vector variant (M <= 4): 16-byte pieces (K % 4 == 0 for f32, K % 8 == 0 for 16-bit weights)
      // and single weights (other K), odd N; from kLinearRowsMin rows with K % 8 == 0, linear_rows.wgsl
      {1, 64, 48, F32, true, false},
      {1, 36, 20, BF16, true, false},
      {1, 67, 33, F16, false, true},
      {3, 96, 130, BF16, true, true},
      {4, 33, 17, F32, false, false},
      {2, 64, 40, F16, true, true, 96, 50, 4},
      {1, 896, 896, BF16, true, false},
      // several columns per group, N not a multiple of them (the last group's extra rows write nothing),
      // and groups split over 2 or 4 subgroups (pieces per row not a multiple of lanes * split)
      {1, 64, 41, F16, true, true, 0, 0, 0, {2, 1}},
      // (several rows of f32 weights with K % 8 != 0: linear_rows.wgsl takes K % 8 == 0)
      {3, 76, 23, F32, false, true, 30, 5, 0, {3, 1}},
      {1, 136, 37, BF16, true, false, 0, 0, 0, {4, 1}},
      {1, 584, 29, F16, true, true, 0, 0, 0, {1, 2}},
      {2, 1004, 19, F32, false, true, 0, 0, 0, {3, 4}},
      // batched decode steps (kLinearRowsMin <= M <= kLinearRowsMax, K % 8 == 0: linear_rows.wgsl): 4 columns
      // per thread, fewer for narrow N, each with N not a multiple of the workgroup's columns (some threads'
      // columns past N), pieces per row (K / 4 for f32, K / 8 for 16-bit weights) odd or not a multiple of
      // the slices' blocks, a row block into a strided output, and wide N (grids of thousands of
      // workgroups); under a tuning of many resident tiles (an H200's) narrow N takes fewer columns a thread
      {5, 64, 33, F32, true, true},
      {5, 72, 19, F16, false, true, 23, 3},
      {7, 200, 45, F32, true, false},
      {7, 128, 301, BF16, true, true, 310, 7, 1},
      {8, 136, 301, F16, true, false, 310, 7},
      {9, 72, 45, BF16, true, true, 50, 3},
      {13, 200, 77, BF16, false, true},
      {kLinearRowsMax, 128, 1001, F16, true, true, 1010, 5, 3},
      {kLinearRowsMax, 96, 1001, F16, true, true},
      {kLinearRowsMax, 264, 17, F32, false, true},
      {6, 64, 17000, F16, false, true},
      {7, 64, 33800, BF16, true, false},
      {kLinearRowsMax, 64, 17000, BF16, true, true},
      // ... from kLinearRowsMin rows where the weights are large for the adapter (use_linear_rows: 24 KiB per
      // resident workgroup, so on lavapipe, not under an H200's tuning, where the matrix-vector kernel takes them)
      {2, 200, 67, F16, true, true},
      {4, 136, 97, F32, false, true, 100, 3},
      {3, 264, 61, BF16, true, false, 0, 0, 0, {1, 8, 2}},
      // ... and at blockings of its own (columns a thread, columns a slice, pieces a slice a step): 1 to 4
      // columns, slices of 8 to 32, 1 to 4 pieces a step, with the last step's pieces past K, for 16-bit and
      // f32 weights
      {5, 200, 37, F32, true, true, 0, 0, 0, {1, 8, 4}},
      {7, 264, 61, BF16, false, true, 70, 9, 0, {2, 16, 2}},
      {13, 136, 99, F32, true, false, 0, 0, 0, {4, 8, 2}},
      {kLinearRowsMax, 200, 75, F16, true, true, 0, 0, 0, {4, 32, 1}},
      {kLinearRowsMax, 72, 21, F32, true, true, 0, 0, 0, {1, 16, 2}},
      // ... with 2 to 8 teams a workgroup (each team its own columns; N ends inside a later team's)
      {13, 136, 99, BF16, true, true, 0, 0, 0, {2, 8, 2, 4}},
      {kLinearRowsMax, 200, 75, F16, false, true, 120, 30, 0, {1, 16, 4, 2}},
      {9, 264, 41, F32, true, false, 0, 0, 0, {4, 8, 1, 8}},
      // the same step sizes for K % 8 != 0 (linear.wgsl's tiles)
      {7, 60, 19, F16, true, true},
      {kLinearRowsMax, 100, 33, F32, false, true},
      // tiled variant, linear.wgsl for K % 8 != 0: single partial tiles, several tiles
      {5, 17, 5, F32, false, false},
      {33, 129, 67, F16, true, false, 100, 20},
      // linear_tiled.wgsl (K % 8 == 0): 64 x 64 tiles, several slabs, odd M and N, row blocks
      {70, 64, 130, BF16, true, true},
      {kLinearRowsMax + 1, 64, 72, F32, true, true, 200, 128, 3},
      {50, 896, 96, F32, true, false},
      {37, 136, 133, F32, true, true, 140, 5},
      {37, 136, 133, F16, false, true},
      {kLinearRowsMax + 2, 128, 20, BF16, true, true, 30, 10, 2},
      // ... and batched decode steps of 17 to 64 rows in linear_tiled_rows.wgsl's 32 x 256 and 64 x 256 tiles,
      // where their iterations make three quarters of a wave of shares of 32 slabs (on lavapipe's one or two
      // resident tiles, from 24 or 48 iterations): odd M, N past a tile and ending inside a column group, a
      // strided output, requested shares
      {25, 256, 301, BF16, true, true, 310, 7, 2},
      {32, 264, 513, F16, false, true},
      {kBatchTileRows, 264, 513, F16, false, true},
      {45, 256, 300, F32, true, true, 310, 7, 2},
      {19, 1024, 40, F32, true, false},
      {kLinearRowsMax + 1, 520, 130, F16, true, true, 0, 0, 0, {}, 5},
      // ... and its larger tiles, chosen once they give 128 workgroups: 128 x 128, 128 x 64, 64 x 128
      {257, 24, 5501, BF16, true, false},
      {200, 24, 4101, F32, false, true},
      {4033, 24, 131, F16, true, true},
      // ... shared out where the tiles alone are few (linear_shares.wgsl): one tile of 256 slabs in 8 shares;
      // 2 tiles of 125 slabs in 7 shares into a strided output (the first tile cut by 4 shares, the fourth
      // share ending one tile and starting the next); 10 tiles in 20 halves; and counts a benchmark asks
      // for: 5 shares of one tile's 64 slabs (12.8 each), 3 shares of 4 tiles of 12 slabs (whole tiles at a
      // share's start and end, cut ones between), 7 shares of 165 tiles of 8 slabs (whole tiles inside)
      {40, 2048, 40, F16, true, true},
      {37, 1000, 70, BF16, true, true, 90, 11},
      {100, 512, 300, F32, false, true},
      {40, 512, 50, F16, true, true, 0, 0, 0, {}, 5},
      {64, 96, 200, F16, true, true, 0, 0, 0, {}, 3},
      {300, 64, 2100, BF16, false, true, 0, 0, 0, {}, 7},
  };
  if (!quick) {
    // A K long enough for the dispatcher to share 128 x 128 tiles out over a wave (264 shares of 64 slabs):
    // 4.4 GFLOP, too slow for lavapipe's quick lists.
    shapes.push_back({256, 33792, 256, F16, true, true});
    shapes.push_back({64, 896, 257, BF16, true, true});
    // linear_tiled_rows.wgsl's 32 x 256 and 64 x 256 tiles under an H200's tuning (3 tiles of 2,112 slabs, the
    // last of 8 columns: three quarters of a wave of shares of 32 slabs over 264 resident tiles; the quick list's
    // batched steps take them only on adapters of a few resident tiles)
    shapes.push_back({32, 16896, 520, F16, true, true});
    shapes.push_back({kBatchTileRows, 16896, 520, F16, true, true});
    shapes.push_back({1, 4, 600000, F32, true, false});  // 75000 workgroups: a folded grid
  }
  return shapes;
}

KernelCheck linear_check(bool quick) {
  std::vector<LinearShape> shapes = linear_shapes(quick);
  constexpr double bound = 1e-5;
  return make_check<LinearShape>(
      "linear", bound,
      "f32 dot products of K terms (16-bit weights are exact in f32): rounding grows like sqrt(K) * 6e-8, "
      "~2e-6 at K=896",
      shapes, describe_linear, [](gpu::Device& device, Rng& rng, const LinearShape& s) {
        return linear_case(device, rng, s, Arithmetic::F32, "linear", bound);
      });
}

// Prompt products in f16 arithmetic (linear_tiled_f16.wgsl): linear_check's shapes that take the tiled kernel
// (their tile sizes and shares), and a long K in one share, whose sum in f16 alone (not in slabs added to f32)
// would exceed the bound (9e-3), against the same float64 reference of the unrounded inputs.
KernelCheck linear_f16_check(bool quick) {
  std::vector<LinearShape> shapes;
  for (const LinearShape& s : linear_shapes(quick))
    if (s.M > kLinearRowsMax && s.K % 8 == 0) shapes.push_back(s);
  // (72 rows: from 17 to 64, linear_tiled_rows.wgsl's f32 tiles may take them)
  shapes.push_back({72, 4096, 64, F16, true, true, 0, 0, 0, {}, 1});
  shapes.push_back({72, 4096, 64, F32, true, false, 0, 0, 0, {}, 1});
  constexpr double bound = 2e-3;
  KernelCheck check = make_check<LinearShape>(
      "linear_f16", bound,
      "x (and f32 weights) rounded to f16 and each slab of 8 products summed in f16 before the f32 sum: a few "
      "f16 roundings (up to 2^-11 relative) per term, ~3e-4 relative overall",
      shapes, describe_linear, [](gpu::Device& device, Rng& rng, const LinearShape& s) {
        return linear_case(device, rng, s, Arithmetic::F16, "linear_f16", bound);
      });
  check.needs = "shader-f16";
  return check;
}

// The decode variant's fusions (and linear_rows.wgsl's gate): a gate activation on the gate|up output, an
// RMSNorm of x before the product (with the norm's weight, or on an x prepared as x * weight, the rms from the
// raw x), and the next norm's x * weight written beside the output (norm_out, into a block of columns at out_col
// of a wider output).
// N is the output width: a gated case projects onto N gate and N up rows.
struct FusedLinearShape {
  uint32_t M, K, N;
  WeightType type;
  uint32_t gate;  // 0 none, 1 SiLU, 2 GELU-tanh
  uint32_t norm;  // kNormNone, kNormWeighted, kNormPrepared
  bool residual_or_bias;  // a gated case takes a bias, others a residual
  MatvecBlocking blocking = {};  // zeros: the dispatcher's choice
  bool norm_out = false;
  uint32_t out_col = 0;  // norm_out cases: the block's first column of an output out_col + N + 5 wide
};

// Columns [col, col + N) of the M rows of a row-major [M, stride] matrix.
template <typename T>
std::vector<T> column_block(const std::vector<T>& rows, uint32_t M, uint32_t stride, uint32_t col, uint32_t N) {
  std::vector<T> block;
  for (uint32_t m = 0; m < M; ++m)
    block.insert(block.end(), rows.begin() + size_t(m) * stride + col, rows.begin() + size_t(m) * stride + col + N);
  return block;
}

KernelCheck linear_fused_check() {
  constexpr uint32_t W = kNormWeighted, P = kNormPrepared;
  std::vector<FusedLinearShape> shapes = {{1, 64, 48, F32, 1, 0, true},    {1, 96, 40, F16, 2, 0, false},
                                          {3, 64, 33, BF16, 1, 0, true},   {1, 128, 50, F16, 0, W, false},
                                          {2, 896, 64, F32, 0, W, true},    {4, 64, 20, BF16, 2, W, false},
                                          {1, 72, 29, F16, 1, W, true},     {2, 64, 31, BF16, 0, W, false, {3, 1}},
                                          {1, 1096, 23, F16, 1, 0, true, {0, 4}},
                                          {3, 904, 21, F32, 0, W, true, {2, 2}},
                                          {4, 520, 13, BF16, 2, W, false, {2, 8}},
                                          {2, 4104, 9, F16, 0, W, false, {1, 8, 8}},
                                          {1, 200, 7, F16, 1, 0, true, {2, 1, 3}},
                                          {3, 136, 5, F32, 0, 0, true, {1, 2, 1}},
                                          // prepared x: the raw x's pieces over the workgroup's threads, past
                                          // one per thread (K / 4 = 258) and past four (1,026)
                                          {1, 1032, 37, F16, 0, P, true},
                                          {3, 4104, 9, BF16, 0, P, false, {1, 8, 8}},
                                          {2, 64, 20, F32, 1, P, true},
                                          // (a gated case keeps K small and N large: at K = 4096 and N = 6 all
                                          // gates could land far below zero, GELU ~ 1e-38, ill-conditioned)
                                          {1, 1032, 24, F16, 2, P, false, {2, 2}},
                                          // norm_out: the next norm's x * weight beside the output
                                          {1, 128, 50, F16, 0, 0, true, {}, true, 7},
                                          {4, 96, 33, BF16, 0, 0, true, {2, 2}, true},
                                          {2, 200, 29, F32, 0, 0, false, {1, 4, 2}, true, 3},
                                          // rows of 8 KiB and more: the resident grid's blocking
                                          {1, 4104, 13, F16, 0, W, true},
                                          {2, 2056, 11, F32, 1, 0, true},
                                          // grids smaller than the units (with subgroups of 8 to 32 lanes),
                                          // each workgroup looping over several: the squares and split shares
                                          // of one unit must not leak into the next, the prepared rms is
                                          // summed once per workgroup
                                          {3, 4104, 9, BF16, 0, P, false, {1, 8, 1, 2}},
                                          {2, 200, 29, F32, 0, W, true, {1, 2, 1, 1}},
                                          {1, 1032, 24, F16, 1, 0, true, {2, 4, 1, 1}},
                                          // (an unfused product under 24 KiB of weights, which linear_rows
                                          // would take on an adapter measured at one resident workgroup)
                                          {4, 72, 151, BF16, 0, 0, true, {3, 1, 2, 2}},
                                          {2, 96, 33, F16, 0, 0, true, {1, 8, 1, 5}, true, 3},
                                          // batched steps' gate|up projections in linear_rows.wgsl (no norm):
                                          // 1 and 2 outputs a thread (4 and 2 columns), odd N past the last
                                          // thread's outputs, slices of 8 to 32
                                          {5, 64, 33, F16, 1, 0, true},
                                          {9, 72, 21, BF16, 2, 0, false},
                                          {kLinearRowsMax, 136, 45, F32, 1, 0, true, {4, 16, 2}},
                                          {13, 200, 19, F16, 2, 0, true, {2, 32, 1}},
                                          {kLinearRowsMax, 72, 45, BF16, 1, 0, true, {2, 8, 2, 4}}};
  constexpr double bound = 1e-5;
  auto describe = [](const FusedLinearShape& s) {
    return fmt::format("M={} K={} N={} {} gate={} norm={}{}{}{}", s.M, s.K, s.N, type_name(s.type), s.gate,
                       s.norm == kNormPrepared ? "prepared" : s.norm ? "weighted" : "none",
                       s.residual_or_bias ? (s.gate ? " bias" : " residual") : "",
                       s.norm_out ? fmt::format(" norm_out out_col={}", s.out_col) : "",
                       describe_blocking(s.blocking));
  };
  return make_check<FusedLinearShape>(
      "linear_fused", bound, "linear's rounding plus one f32 activation or RMS per output", shapes, describe,
      [describe](gpu::Device& device, Rng& rng, const FusedLinearShape& s) {
        bool gate_only = s.gate && !s.norm && !s.norm_out;
        if (!linear_can_fuse(device, s.M, s.K, s.type) &&
            !(gate_only && linear_gates(device, s.M, s.K, 2 * s.N, s.type)))
          return CaseResult{"linear_fused", describe(s) + " (not run: the adapter lacks subgroups)", 0, bound};
        Buffers b{device};
        uint32_t rows = s.gate ? 2 * s.N : s.N;
        uint32_t stride = s.norm_out ? s.out_col + s.N + 5 : s.N;
        bool bias = s.gate && s.residual_or_bias, residual = !s.gate && s.residual_or_bias;
        auto weight = random_weights(rng, size_t(rows) * s.K, s.type);
        auto x = random_floats(rng, size_t(s.M) * s.K, -2.f, 2.f);
        auto norm_weight = random_floats(rng, s.norm_out ? stride : s.K, 0.5f, 1.5f);
        auto bias_values = random_floats(rng, rows);
        auto residual_values = random_floats(rng, size_t(s.M) * stride);
        auto& out = b.poisoned("out", size_t(s.M) * stride);
        const float eps = 1e-6f;
        LinearParams p{s.M, s.K, rows, stride, s.out_col, bias, residual, s.gate, s.norm, float_bits(eps), 0,
                       s.norm_out};
        // A prepared x holds x * weight in f32, as the product before writes it.
        std::vector<float> x_in = x;
        if (s.norm == kNormPrepared)
          for (size_t i = 0; i < x_in.size(); ++i) x_in[i] *= norm_weight[i % s.K];
        LinearNorm norm;
        norm.weight = {&b.input("norm", norm_weight)};
        if (s.norm == kNormPrepared) norm = {{}, {&b.input("raw x", x)}, {}};
        const gpu::Buffer& prepared = b.poisoned("prepared", size_t(s.M) * stride);
        if (s.norm_out) norm.prepared = {&prepared};
        run(device, linear(device, {&b.input("x", x_in)}, {&b.input("W", weight.words)},
                           {&b.input("bias", bias_values)}, {&b.input("residual", residual_values)}, {&out}, p,
                           s.type, norm, s.blocking));
        std::vector<double> input = widen(x);
        if (s.norm) {
          std::vector<float> weights(norm_weight.begin(), norm_weight.begin() + s.K);
          input = reference::rmsnorm(input, widen(weights), s.M, s.K, eps);
        }
        auto ref = reference::linear(input, weight.values, bias ? widen(bias_values) : std::vector<double>{},
                                     residual ? widen(residual_values) : std::vector<double>{}, s.M, s.K, rows,
                                     rows == s.N ? stride : rows, rows == s.N ? s.out_col : 0,
                                     std::vector<double>(size_t(s.M) * (rows == s.N ? stride : rows), 0.0));
        if (s.gate)
          ref = reference::gated_act(ref, s.M, s.N,
                                     s.gate == 1 ? reference::Activation::Silu : reference::Activation::GeluTanh);
        std::vector<float> gpu = b.read(out, size_t(s.M) * stride);
        if (s.gate) {
          gpu.resize(ref.size());
        } else {
          gpu = column_block(gpu, s.M, stride, s.out_col, s.N);
          ref = column_block(ref, s.M, stride, s.out_col, s.N);
        }
        if (s.norm_out) {
          // Compared together with out: prepared[m, col] = out[m, col] * weight[col].
          auto written = column_block(b.read(prepared, size_t(s.M) * stride), s.M, stride, s.out_col, s.N);
          size_t count = ref.size();
          for (size_t i = 0; i < count; ++i) ref.push_back(ref[i] * norm_weight[s.out_col + i % s.N]);
          gpu.insert(gpu.end(), written.begin(), written.end());
        }
        return result("linear_fused", describe(s), gpu, ref, bound);
      });
}

// A sequence's cache (`rows` rows of `row` elements of type kv) in a pool of blocks through a scrambled block
// table (check::scrambled_blocks), the pool's other rows filled with `others` (random values the kernel must leave
// alone, or NaN that a kernel reading past its table would bring into its output).
struct PagedCache {
  Weights pool;
  const gpu::Buffer* buffer;
};

PagedCache paged_cache(Buffers& b, Rng& rng, const ScrambledBlocks& blocks, const Weights& logical, size_t rows,
                       size_t row, KvType kv, bool nan_others, const char* name) {
  size_t per_word = kv == KV16 ? 2 : 1;
  PagedCache paged{random_cache(rng, blocks.pool_rows() * row, kv), nullptr};
  if (nan_others) poison_cache(paged.pool, 0, blocks.pool_rows() * row, kv);
  blocks.scatter(0, logical.values, rows, row, paged.pool.values);
  blocks.scatter(0, logical.words, rows, row / per_word, paged.pool.words);
  paged.buffer = &b.input(name, paged.pool.words);
  return paged;
}

// What both q / k / v store kernels (qkv_rope_store, linear_qkv_rope) take and write: inverse frequencies of
// the rotary dims, caches in pools of blocks through a scrambled block table whose earlier rows must survive (the
// rows written now start as NaN, the pool's rows outside the table hold values that must stay), and a poisoned
// q output. check() compares q and both whole pools with the reference at once.
struct QkvStoreIo {
  uint32_t capacity;
  size_t row;  // elements per cache row
  KvType kv;
  ScrambledBlocks blocks;
  std::vector<float> rope_table;
  std::vector<double> k_prior, v_prior;  // the caches' logical values before the kernel runs
  std::vector<double> k_pool, v_pool;    // the pools' values before the kernel runs
  const gpu::Buffer *q_out, *k_cache, *v_cache, *rope_table_buffer, *table;

  KvBlocks kv_blocks() const { return {{table}, blocks.pool_blocks, blocks.block_tokens}; }

  // Against the reference's q and caches (scattered into the pools); an f16 cache within kF16CacheBound (at least
  // `bound`).
  CaseResult check(Buffers& b, reference::QkvRopeOutput ref, const std::string& kernel, std::string shape,
                   double bound) const {
    size_t pool_elements = blocks.pool_rows() * row;
    auto gpu = b.read(*q_out, ref.q.size());
    for (auto* cache : {k_cache, v_cache}) {
      auto values = read_cache(b.device, *cache, pool_elements, kv);
      gpu.insert(gpu.end(), values.begin(), values.end());
    }
    if (kv == KV16) bound = std::max(bound, kF16CacheBound);
    std::vector<double> expected_k = k_pool, expected_v = v_pool;
    blocks.scatter(0, ref.k_cache, capacity, row, expected_k);
    blocks.scatter(0, ref.v_cache, capacity, row, expected_v);
    ref.q.insert(ref.q.end(), expected_k.begin(), expected_k.end());
    ref.q.insert(ref.q.end(), expected_v.begin(), expected_v.end());
    return result(kernel, std::move(shape) + fmt::format(" blocks={}x{}", blocks.pool_blocks, blocks.block_tokens),
                  gpu, ref.q, bound);
  }
};

// `tokens` rows stored from cache row `position`, in a cache of position + tokens + `spare` rows of type kv, in
// blocks of `block_tokens`.
QkvStoreIo qkv_store_io(Buffers& b, Rng& rng, uint32_t tokens, uint32_t Hq, uint32_t Hkv, uint32_t D,
                        uint32_t rotary_dim, uint32_t position, uint32_t spare, KvType kv, uint32_t block_tokens) {
  QkvStoreIo io;
  io.capacity = position + tokens + spare;
  io.row = size_t(Hkv) * D;
  io.kv = kv;
  io.blocks = scrambled_blocks(rng, {io.capacity}, block_tokens);
  io.rope_table = rope_table(rotary_dim);
  Weights k_prior = random_cache(rng, io.capacity * io.row, kv), v_prior = random_cache(rng, io.capacity * io.row, kv);
  poison_cache(k_prior, position * io.row, tokens * io.row, kv);
  poison_cache(v_prior, position * io.row, tokens * io.row, kv);
  PagedCache k_pool = paged_cache(b, rng, io.blocks, k_prior, io.capacity, io.row, kv, false, "k_cache");
  PagedCache v_pool = paged_cache(b, rng, io.blocks, v_prior, io.capacity, io.row, kv, false, "v_cache");
  io.k_prior = std::move(k_prior.values);
  io.v_prior = std::move(v_prior.values);
  io.k_pool = std::move(k_pool.pool.values);
  io.v_pool = std::move(v_pool.pool.values);
  io.q_out = &b.poisoned("q_out", size_t(tokens) * Hq * D);
  io.k_cache = k_pool.buffer;
  io.v_cache = v_pool.buffer;
  io.table = &b.input("kv_table", io.blocks.table);
  io.rope_table_buffer = &b.input("rope_table", io.rope_table);
  return io;
}

// The decode q|k|v projection with the rotary / cache-store epilogue, against linear then qkv_rope_store.
struct QkvRopeCase {
  uint32_t M, K, Hq, Hkv, D, rotary_dim, position;
  WeightType type;
  uint32_t norm;  // kNormNone, kNormWeighted, kNormPrepared
  bool bias;
  MatvecBlocking blocking = {};  // zeros: the dispatcher's choice (columns: 2, or 4 for an f16 cache, or 0)
  KvType kv = KV32;
};

KernelCheck linear_qkv_rope_check() {
  std::vector<QkvRopeCase> shapes = {{1, 64, 2, 1, 16, 16, 0, F16, true, true},   {3, 72, 4, 2, 8, 4, 5, F32, false, true},
                                     {2, 128, 7, 1, 24, 0, 9, BF16, true, false}, {4, 64, 2, 2, 64, 64, 100, F16, false, false},
                                     {1, 896, 14, 2, 64, 64, 37, F16, true, true},
                                     // few pairs of a whole 16 KiB task each: split over two subgroups
                                     {1, 2048, 4, 2, 64, 64, 11, F32, true, true},
                                     // x prepared as x * weight by the product before
                                     {1, 2048, 4, 2, 64, 64, 11, F16, kNormPrepared, true},
                                     {2, 1032, 6, 3, 16, 8, 3, BF16, kNormPrepared, false},
                                     // rows of 8 KiB: the resident grid's blocking; then grids smaller
                                     // than the units, each workgroup looping over several pairs
                                     {2, 4104, 4, 2, 64, 64, 7, F16, kNormWeighted, true},
                                     {1, 1032, 6, 3, 16, 8, 3, F16, kNormPrepared, true, {2, 8, 1, 3}},
                                     {3, 136, 4, 2, 24, 12, 5, F32, kNormWeighted, false, {0, 2, 1, 2}},
                                     // an f16 cache: groups of two rotary pairs (head_dim and rotary_dim multiples
                                     // of 4), rotary dims short of head_dim, none, split and looping blockings
                                     {1, 896, 14, 2, 64, 64, 37, F16, true, true, {}, KV16},
                                     {3, 72, 4, 2, 8, 4, 5, F32, false, true, {}, KV16},
                                     {4, 64, 3, 1, 20, 12, 100, F16, false, false, {}, KV16},
                                     {2, 1032, 6, 3, 16, 8, 3, BF16, kNormPrepared, false, {}, KV16},
                                     {1, 2048, 4, 2, 64, 64, 11, F32, true, true, {}, KV16},
                                     {1, 1032, 6, 3, 12, 0, 3, F16, kNormPrepared, true, {4, 8, 1, 3}, KV16}};
  constexpr double bound = 1e-5;
  auto describe = [](const QkvRopeCase& s) {
    return fmt::format("M={} K={} heads={}/{} D={} rotary_dim={} position={} {}{}{}{} kv={}", s.M, s.K, s.Hq, s.Hkv,
                       s.D, s.rotary_dim, s.position, type_name(s.type),
                       s.norm == kNormPrepared ? " norm prepared" : s.norm ? " norm" : "", s.bias ? " bias" : "",
                       describe_blocking(s.blocking), kv_type_name(s.kv));
  };
  return make_check<QkvRopeCase>(
      "linear_qkv_rope", bound, "linear's rounding, then qkv_rope_store's angles and f32 sin/cos", shapes, describe,
      [describe](gpu::Device& device, Rng& rng, const QkvRopeCase& s) {
        if (!linear_can_fuse(device, s.M, s.K, s.type))
          return CaseResult{"linear_qkv_rope", describe(s) + " (not run: the adapter lacks subgroups)", 0, bound};
        uint32_t N = (s.Hq + 2 * s.Hkv) * s.D;
        Buffers b{device};
        auto weight = random_weights(rng, size_t(N) * s.K, s.type);
        auto x = random_floats(rng, size_t(s.M) * s.K);
        auto bias = random_floats(rng, N);
        auto norm_weight = random_floats(rng, s.K, 0.5f, 1.5f);
        // Blocks of 4 tokens: the M rows cross a block edge at most positions.
        auto io = qkv_store_io(b, rng, s.M, s.Hq, s.Hkv, s.D, s.rotary_dim, s.position, 2, s.kv, 4);
        const float eps = 1e-6f;
        LinearParams p{s.M, s.K, N, N, 0, s.bias, 0, 0, s.norm, float_bits(eps), s.position};
        std::vector<float> x_in = x;  // a prepared x holds x * weight in f32, as the product before writes it
        LinearNorm norm{{&b.input("norm", norm_weight)}};
        if (s.norm == kNormPrepared) {
          for (size_t i = 0; i < x_in.size(); ++i) x_in[i] *= norm_weight[i % s.K];
          norm = {{}, {&b.input("raw x", x)}, {}};
        }
        run(device, linear_qkv_rope(device, {&b.input("x", x_in)}, {&b.input("W", weight.words)}, {&b.input("bias", bias)},
                                    {io.rope_table_buffer}, {io.q_out}, {io.k_cache}, {io.v_cache}, io.kv_blocks(), p,
                                    s.type, norm,
                                    {s.Hq, s.Hkv, s.D, s.rotary_dim, io.capacity, s.kv}, s.blocking));
        std::vector<double> input = widen(x);
        if (s.norm) input = reference::rmsnorm(input, widen(norm_weight), s.M, s.K, eps);
        auto qkv = reference::linear(input, weight.values, s.bias ? widen(bias) : std::vector<double>{}, {}, s.M, s.K,
                                     N, N, 0, std::vector<double>(size_t(s.M) * N, 0.0));
        auto ref = reference::qkv_rope_store(qkv, {}, {}, widen(io.rope_table),
                                             {s.M, s.Hq, s.Hkv, s.D, s.rotary_dim, s.position, s.kv == KV16}, eps,
                                             io.k_prior, io.v_prior);
        return io.check(b, std::move(ref), "linear_qkv_rope", describe(s), bound);
      });
}

struct GptqShape {
  uint32_t M, K, N, group;
  bool bias, residual;
  uint32_t out_stride = 0, out_col = 0;  // out_stride 0: N
};

std::string describe_gptq(const GptqShape& s) {
  return fmt::format("M={} K={} N={} group={}{}{} out_stride={} out_col={}", s.M, s.K, s.N, s.group,
                     s.bias ? " bias" : "", s.residual ? " residual" : "", s.out_stride ? s.out_stride : s.N,
                     s.out_col);
}

// GPTQ layers as the graph runs them: repacked into int4 group blocks (graph::pack_gptq_rows: Q4_G for groups of
// 32 or 64, Q4_G128 for 128) and multiplied by linear_split_k, which picks the decode, batched or prompt kernel
// by M.
KernelCheck linear_int4_check(bool quick) {
  std::vector<GptqShape> shapes = {
      // linear_q_matvec.wgsl (M <= 4)
      {1, 64, 32, 32, true, false},
      {3, 256, 40, 128, false, true},
      {4, 96, 24, 32, true, true, 40, 8},
      {2, 128, 136, 32, true, false},
      // linear_rows.wgsl (batched decode steps)
      {5, 64, 16, 32, false, false},
      {16, 128, 40, 64, true, true},
      // linear_tiled.wgsl
      {17, 256, 96, 32, true, true},
      {70, 128, 72, 128, true, false, 80, 4},
  };
  if (!quick) shapes.push_back({33, 896, 264, 128, true, true});
  constexpr double bound = 1e-5;
  return make_check<GptqShape>(
      "linear_int4", bound,
      "dequantised weights (f16 scale times a small integer) are exact in f32; the K-term sums round like "
      "linear's",
      shapes, describe_gptq, [](gpu::Device& device, Rng& rng, const GptqShape& s) {
        uint32_t stride = s.out_stride ? s.out_stride : s.N;
        size_t groups = s.K / s.group;
        // Any nibbles, zero points included (a stored zero of 15 means a real zero point of 16).
        auto qweight = random_words(rng, size_t(s.K / 8) * s.N);
        auto qzeros = random_words(rng, groups * s.N / 8);
        auto scales = grid_floats(rng, groups * s.N, 21, 205, 2048.f);  // 0.01 .. 0.1, exact in f16
        std::vector<uint16_t> scale_bits;
        for (float v : scales) scale_bits.push_back(f16_bits(v));
        Int4Shape shape{s.K, s.N, s.group};
        WeightType type = graph::gptq_block_type(shape);
        std::vector<uint32_t> packed(size_t(s.N) * weight_row_bytes(type, s.K) / 4);
        graph::pack_gptq_rows(std::as_bytes(std::span(qweight)), std::as_bytes(std::span(qzeros)),
                              std::as_bytes(std::span(scale_bits)), shape, 0, s.N,
                              std::as_writable_bytes(std::span(packed)), "check");
        Buffers b{device};
        auto io = linear_io(b, rng, s.M, s.K, s.N, stride, s.out_col, s.bias, s.residual);
        LinearParams p{s.M, s.K, s.N, stride, s.out_col, s.bias, s.residual};
        auto& scratch = b.poisoned("scratch", std::max<uint64_t>(1, linear_split_scratch_floats(device, p)));
        run(device, linear_split_k(device, {io.x_buffer}, {&b.input("W", packed)}, {io.bias_buffer},
                                   {io.residual_buffer}, {io.out}, p, type, {&scratch}));
        auto W = reference::dequantize_gptq(qweight, qzeros, widen(scales), s.K, s.N, s.group);
        auto ref = reference::linear(widen(io.x), W, widen(io.bias), widen(io.residual), s.M, s.K, s.N,
                                     stride, s.out_col, std::move(io.ref));
        return result("linear_int4", describe_gptq(s), b.read(*io.out, ref.size()), ref, bound);
      });
}

struct GatedShape {
  uint32_t T, I;
  Activation act;
};

std::string describe_gated(const GatedShape& s) {
  return fmt::format("T={} I={} {}", s.T, s.I, s.act == Activation::Silu ? "silu" : "gelu_tanh");
}

KernelCheck gated_act_check(bool quick) {
  std::vector<GatedShape> shapes = {{1, 3, Activation::Silu},        {1, 5, Activation::GeluTanh},
                                    {7, 257, Activation::Silu},      {7, 257, Activation::GeluTanh},
                                    {3, 4864, Activation::GeluTanh}, {50, 1000, Activation::Silu},
                                    {5, 12, Activation::GeluTanh}};  // I % 4 == 0: the vec4 kernel
  if (!quick) shapes.push_back({129, 4864, Activation::Silu});
  constexpr double bound = 1e-5;
  return make_check<GatedShape>(
      "gated_act", bound, "exp per element (Vulkan allows 3 + 2|x| ulp), a division and a product", shapes,
      describe_gated, [](gpu::Device& device, Rng& rng, const GatedShape& s) {
        auto gate_up = random_floats(rng, size_t(s.T) * 2 * s.I, -8.f, 8.f);
        gate_up[0] = -90.f, gate_up[1] = 90.f;  // saturated tails must not produce inf/NaN
        Buffers b{device};
        auto& out = b.poisoned("out", size_t(s.T) * s.I);
        run(device, gated_act(device, {&b.input("gate_up", gate_up)}, {&out},
                              {s.T, s.I, static_cast<uint32_t>(s.act)}));
        auto ref = reference::gated_act(widen(gate_up), s.T, s.I, s.act);
        return result("gated_act", describe_gated(s), b.read(out, ref.size()), ref, bound);
      });
}

struct QkvCase {
  uint32_t T, Hq, Hkv, D, rotary_dim, offset;
  bool qk_norm;
  KvType kv = KV32;
};

std::string describe_qkv(const QkvCase& s) {
  return fmt::format("T={} heads={}/{} head_dim={} rotary_dim={} offset={}{} kv={}", s.T, s.Hq, s.Hkv, s.D,
                     s.rotary_dim, s.offset, s.qk_norm ? " qk_norm" : "", kv_type_name(s.kv));
}

KernelCheck qkv_rope_store_check(bool quick) {
  std::vector<QkvCase> shapes = {
      {1, 2, 2, 16, 16, 0, false},    {5, 4, 2, 32, 32, 7, true},     {3, 7, 1, 24, 12, 2, false},
      {7, 4, 4, 16, 0, 0, false},     {2, 2, 1, 256, 256, 100, true}, {9, 14, 2, 64, 64, 37, true},
      {1, 8, 2, 128, 64, 250, false}, {4, 4, 2, 200, 100, 5, true},   {2, 3, 1, 18, 10, 4, true},
      // an f16 cache: pairs of dims per thread, across the rotary halves and past the rotary dims, the smallest
      // head and the largest
      {5, 4, 2, 32, 32, 7, true, KV16}, {3, 7, 1, 18, 10, 2, false, KV16}, {7, 4, 4, 2, 0, 0, false, KV16},
      {2, 2, 1, 256, 256, 100, true, KV16}, {4, 4, 2, 200, 100, 5, true, KV16}};
  if (!quick) shapes.push_back({50, 14, 2, 64, 64, 0, true});
  constexpr double bound = 1e-5;
  return make_check<QkvCase>(
      "qkv_rope_store", bound,
      "an f32 RMS per head, then angles f32(pos) * inv_freq whose absolute error grows with the position "
      "(~pos * 6e-8; positions here stay below 260) and f32 sin/cos",
      shapes, describe_qkv, [](gpu::Device& device, Rng& rng, const QkvCase& s) {
        auto qkv = random_floats(rng, size_t(s.T) * (s.Hq + 2 * s.Hkv) * s.D);
        auto q_norm = random_floats(rng, s.D, 0.5f, 1.5f), k_norm = random_floats(rng, s.D, 0.5f, 1.5f);
        Buffers b{device};
        auto io = qkv_store_io(b, rng, s.T, s.Hq, s.Hkv, s.D, s.rotary_dim, s.offset, 3, s.kv, 2 + s.T % 5);
        const float eps = 1e-6f;
        QkvRopeParams p{s.T, s.Hq, s.Hkv, s.D, s.rotary_dim, s.offset, s.qk_norm, float_bits(eps)};
        run(device, qkv_rope_store(device, {&b.input("qkv", qkv)}, {&b.input("q_norm", q_norm)},
                                   {&b.input("k_norm", k_norm)}, {io.rope_table_buffer}, {io.q_out}, {io.k_cache},
                                   {io.v_cache}, io.kv_blocks(), p, io.capacity, s.kv));
        std::vector<double> no_norm;
        auto ref = reference::qkv_rope_store(widen(qkv), s.qk_norm ? widen(q_norm) : no_norm,
                                             s.qk_norm ? widen(k_norm) : no_norm, widen(io.rope_table),
                                             {s.T, s.Hq, s.Hkv, s.D, s.rotary_dim, s.offset, s.kv == KV16}, eps,
                                             io.k_prior, io.v_prior);
        return io.check(b, std::move(ref), "qkv_rope_store", describe_qkv(s), bound);
      });
}

struct FlashShape {
  uint32_t T, S, Hq, Hkv, D, offset, window;
  float scale = 0;        // 0: 1 / sqrt(D)
  uint32_t capacity = 0;  // 0: the single-dispatch flash_attention(); else the overload with scratch
  KvType kv = KV32;
  FlashBlocking blocking = {};  // zeros: the dispatcher's
};

std::string describe_flash(const FlashShape& s) {
  std::string blocking = s.blocking.rows_per_thread
                             ? fmt::format(" blocking={}x{}", s.blocking.rows_per_thread, s.blocking.keys_per_thread)
                             : "";
  return fmt::format("T={} S={} heads={}/{} head_dim={} offset={} window={} scale={} capacity={} kv={}{}", s.T, s.S,
                     s.Hq, s.Hkv, s.D, s.offset, s.window, s.scale, s.capacity, kv_type_name(s.kv), blocking);
}

KernelCheck flash_attention_check(bool quick) {
  // GQA ratios 1, 2 and 7; windows shorter than, across and longer than tiles; keys past the last query that
  // must stay masked (S > offset + T); head_dim up to 256, and not a multiple of 4. Each variant:
  std::vector<FlashShape> shapes = {
      // one workgroup per query (T < kFlashBlockMinQueries, no scratch)
      {1, 1, 2, 2, 16, 0, 0},
      {7, 7, 4, 4, 16, 0, 0},
      {9, 9, 4, 2, 32, 0, 4},
      {5, 5, 7, 1, 24, 0, 0, 0.3f},
      {1, 200, 14, 2, 64, 199, 0},
      {3, 150, 4, 2, 64, 147, 50},
      {2, 130, 2, 1, 256, 128, 0, 0.0625f},
      {4, 70, 2, 2, 80, 66, 1},
      {6, 20, 2, 1, 16, 10, 0},
      {3, 40, 3, 3, 18, 37, 0},
      // the portable kernel's 256-key tiles from a window's first key: a tile across a block edge
      {3, 600, 2, 1, 18, 597, 100},
      // query blocks (T >= kFlashBlockMinQueries): partial last blocks, offsets, windows inside a block
      {33, 33, 8, 8, 64, 0, 0},
      {65, 100, 2, 2, 40, 35, 70},
      {40, 100, 14, 2, 64, 60, 0},
      {70, 171, 4, 2, 128, 100, 50},
      {17, 40, 7, 1, 256, 23, 0},
      {20, 23, 2, 1, 18, 0, 3},
      // the smallest block prompt; GQA 7 at head_dim 72 (vec4 columns past 16 per thread); rows of one block
      // spanning queries of different heads; windows across tiles; head_dim below 4 and not a multiple of 4
      {16, 16, 4, 4, 64, 0, 0},
      {23, 60, 14, 2, 72, 37, 0},
      {50, 120, 8, 2, 128, 70, 20},
      {36, 36, 3, 1, 6, 0, 0, 0.7f},
      {19, 19, 1, 1, 3, 0, 5},
      // head_dim between 128 and 256: tiles staged in fewer keys per thread
      {20, 20, 2, 1, 160, 0, 0},
      {40, 60, 8, 1, 192, 20, 0},
      // split-KV (T <= kFlashSplitMaxQueries with a capacity of several chunks): capacities above S leave
      // chunks empty; a window leaves the early keys out
      {1, 1500, 4, 1, 128, 1499, 0, 0, 1500},
      {1, 1200, 14, 2, 64, 1199, 333, 0, 4096},
      {3, 777, 7, 1, 256, 774, 0, 0, 1000},
      {2, 301, 2, 2, 80, 299, 0, 0.0625f, 301},
      {1, 5, 2, 1, 16, 4, 0, 0, 2048},
      {4, 60, 4, 2, 24, 50, 7, 0, 600},
      // split prompt chunks (the block kernel, T > kFlashSplitMaxQueries, a capacity from 2,048 keys, on an adapter
      // whose resident workgroups outnumber the blocks: an H200's tuning, not lavapipe's): chunks of whole tiles,
      // empty ones past a block's keys, rows without keys in a chunk (a window shorter than a block; causal rows
      // of the chunk's last tile), partial last blocks, GQA 7, head_dim 256
      {40, 100, 14, 2, 64, 60, 0, 0, 8192},
      {50, 120, 8, 2, 128, 70, 20, 0, 4096},
      {65, 100, 2, 2, 40, 35, 70, 0, 3000},
      {17, 40, 7, 1, 256, 23, 0, 0, 2048},
      {20, 700, 4, 2, 64, 680, 0, 0, 4096},
      {33, 33, 8, 8, 64, 0, 0, 0, 8192},
      // split-KV rows that are not whole vec4s (the portable kernel where the subgroup one serves the rest)
      // and the narrowest rows
      {2, 500, 3, 1, 18, 498, 0, 0, 800},
      {1, 300, 2, 1, 4, 299, 0, 0, 300},
      // an f16 cache, each variant: per query (the subgroup kernel where head_dim is a multiple of 8, two vec4
      // pieces per 16-byte word, else the portable one), query blocks, split-KV
      {1, 1, 2, 2, 16, 0, 0, 0, 0, KV16},
      {5, 5, 7, 1, 24, 0, 0, 0.3f, 0, KV16},
      {3, 150, 4, 2, 12, 147, 50, 0, 0, KV16},
      {2, 130, 2, 1, 256, 128, 0, 0.0625f, 0, KV16},
      {4, 70, 2, 2, 80, 66, 1, 0, 0, KV16},
      {3, 40, 3, 3, 18, 37, 0, 0, 0, KV16},
      {65, 100, 2, 2, 40, 35, 70, 0, 0, KV16},
      {23, 60, 14, 2, 72, 37, 0, 0, 0, KV16},
      {36, 36, 3, 1, 6, 0, 0, 0.7f, 0, KV16},
      {17, 40, 7, 1, 256, 23, 0, 0, 0, KV16},
      {1, 1500, 4, 1, 128, 1499, 0, 0, 1500, KV16},
      {1, 1200, 14, 2, 64, 1199, 333, 0, 4096, KV16},
      {4, 60, 4, 2, 24, 50, 7, 0, 600, KV16},
      {2, 500, 3, 1, 18, 498, 0, 0, 800, KV16},
      {1, 300, 2, 1, 2, 299, 0, 0, 300, KV16},
      {1, 700, 2, 1, 8, 699, 100, 0, 800, KV16},
      {23, 60, 14, 2, 72, 37, 0, 0, 8192, KV16},
      // an f16 cache in the block kernel, which stages two elements a word: rows of an odd number of words (9,
      // 5), head_dim 128 and 144 (64-key tiles at 2 rows a thread with an H200's tuning, 32 at 4 rows on
      // lavapipe; 144: 32-key tiles or 16, where an f32 cache's stage takes 16), windows whose tiles start inside
      // a KV block and span two, split
      {20, 23, 2, 1, 18, 0, 3, 0, 0, KV16},
      {33, 70, 4, 2, 10, 37, 9, 0, 0, KV16},
      {50, 120, 8, 2, 128, 70, 20, 0, 0, KV16},
      {37, 90, 8, 2, 144, 53, 40, 0, 0, KV16},
      {41, 100, 4, 2, 144, 59, 77, 0, 3000, KV16},
      // an f16 cache's 64-key tiles (heads of 128 dims; 2 rows per thread where blocks are few), whole and split
      {50, 120, 8, 2, 128, 70, 20, 0, 4096, KV16},
      // 4 x 4 blocks, which the dispatcher takes only where 43.5 KiB of workgroup memory fit (head_dim 128 on
      // an H100 or H200), requested at head dims whose tiles fit lavapipe's 32 KiB: windows of more than a
      // 64-key tile starting inside one (every key a thread holds sees visible keys), partial last blocks, GQA 7,
      // split where the tuning calls for it (an H200's)
      {50, 120, 8, 2, 64, 70, 90, 0, 0, KV16, {4, 4}},
      {40, 100, 14, 2, 32, 60, 0, 0, 4096, KV16, {4, 4}},
      {33, 90, 4, 2, 40, 57, 70, 0, 0, KV16, {2, 4}},
      // decoding past 1,000 positions at Qwen2.5-0.5B's and Llama-3-8B's heads, split as a model step with a
      // context of 8,448 (64 chunks) or 2,048 takes them, each cache type
      {1, 2100, 14, 2, 64, 2099, 0, 0, 8448},
      {1, 2100, 14, 2, 64, 2099, 0, 0, 8448, KV16},
      {1, 1100, 32, 8, 128, 1099, 0, 0, 2048, KV16}};
  if (!quick) {
    shapes.push_back({128, 128, 14, 2, 64, 0, 0});
    shapes.push_back({256, 256, 32, 4, 64, 0, 100});  // enough blocks for 4 rows per thread
    shapes.push_back({1, 3001, 4, 1, 128, 3000, 0, 0, 3001});
    shapes.push_back({2, 3000, 4, 1, 128, 2998, 1024, 0, 4096});
    shapes.push_back({4, 9000, 2, 1, 64, 8996, 0, 0, 9000});  // 64 chunks of 256 keys
    // Llama-3-8B's heads in blocks enough to fill an H100's or H200's resident tiles: 4 x 4 over an f16 cache's
    // 64-key tiles of words, 43.5 KiB of workgroup memory (more than lavapipe's 32)
    shapes.push_back({1100, 1100, 32, 8, 128, 0, 0, 0, 0, KV16});
    shapes.push_back({512, 4096, 32, 8, 128, 3584, 0, 0, 8192, KV16});  // and split, as a chunk deep in a prompt
  }
  constexpr double bound = 1e-5;
  return make_check<FlashShape>(
      "flash_attention", bound,
      "f32 dot products, exp and a weighted sum per query, rescaled per tile (and per chunk when split): a few "
      "ulp times sqrt(keys)",
      shapes, describe_flash, [](gpu::Device& device, Rng& rng, const FlashShape& s) {
        // K and V hold max(S, capacity) rows, as a cache does; rows from S on must not matter. They lie in pools
        // of the smallest blocks the kernel takes, through a scrambled table; the pools' other rows are NaN.
        size_t rows = std::max(s.S, s.capacity), row = size_t(s.Hkv) * s.D;
        auto Q = random_floats(rng, size_t(s.T) * s.Hq * s.D, -2.f, 2.f);
        Weights K = random_cache(rng, rows * row, s.kv), V = random_cache(rng, rows * row, s.kv);
        float scale = s.scale != 0 ? s.scale : 1.f / std::sqrt(float(s.D));
        FlashAttentionParams p{s.T, s.S, s.Hq, s.Hkv, s.D, s.offset, s.window, float_bits(scale)};
        Buffers b{device};
        auto& out = b.poisoned("out", Q.size());
        ScrambledBlocks blocks =
            scrambled_blocks(rng, {rows}, flash_attention_key_tile(device, p, s.kv, s.blocking));
        PagedCache k_pool = paged_cache(b, rng, blocks, K, rows, row, s.kv, true, "K");
        PagedCache v_pool = paged_cache(b, rng, blocks, V, rows, row, s.kv, true, "V");
        KvBlocks kv_blocks{{&b.input("kv_table", blocks.table)}, blocks.pool_blocks, blocks.block_tokens};
        BufferBinding q{&b.input("Q", Q)}, k{k_pool.buffer}, v{v_pool.buffer};
        if (s.capacity) {
          auto& scratch = b.poisoned("scratch", flash_attention_scratch_bytes(device, p, s.capacity) / 4);
          for (const Dispatch& d :
               flash_attention(device, q, k, v, {&out}, kv_blocks, p, {&scratch}, s.capacity, s.kv, s.blocking))
            run(device, d);
        } else {
          run(device, flash_attention(device, q, k, v, {&out}, kv_blocks, p, s.kv, s.blocking));
        }
        std::vector<double> Kd(K.values.begin(), K.values.begin() + s.S * row);
        std::vector<double> Vd(V.values.begin(), V.values.begin() + s.S * row);
        auto ref = reference::flash_attention(widen(Q), Kd, Vd, s.T, s.S, s.Hq, s.Hkv, s.D, s.offset, s.window,
                                              scale);
        return result("flash_attention",
                      describe_flash(s) + fmt::format(" blocks={}x{}", blocks.pool_blocks, blocks.block_tokens),
                      b.read(out, ref.size()), ref, bound);
      });
}

}  // namespace

// Argmax: exact (an index), so the "error" is 0 when the GPU picks the reference's index of every row and 1
// otherwise. Shapes include ties (many equal maxima), NaN logits, a vocabulary-sized row, and several rows (a
// batched step's sequences) whose stride leaves a gap of larger values between them, which no row may pick.
KernelCheck argmax_check(bool quick) {
  struct Shape {
    uint32_t count;
    bool ties, nans;
    bool all_nan = false;  // then no token: kNoToken
    uint32_t rows = 1;
  };
  // Counts below, at and above one element per chunk; ties across chunk boundaries (count / 4 apart); every
  // logit NaN; 3 to 7 rows.
  std::vector<Shape> shapes = {{1, false, false},         {5, true, false},         {256, true, false},
                               {1000, true, true},        {4097, false, true},      {70001, true, true},
                               {3000, false, true, true}, {1, false, false, false, 3}, {1000, true, true, false, 7},
                               {4097, false, false, false, 5}, {300, false, true, true, 3}};
  if (!quick) shapes.push_back({151936, true, false, false, 3});
  return make_check<Shape>(
      "argmax", 0.5, "an index: exactly the reference's or wrong", shapes,
      [](const Shape& s) {
        return fmt::format("count={}{}{}{}", s.count, s.rows > 1 ? fmt::format(" rows={}", s.rows) : "",
                           s.ties ? " ties" : "", s.all_nan ? " all NaN" : s.nans ? " NaN" : "");
      },
      [](gpu::Device& device, Rng& rng, const Shape& s) {
        constexpr uint32_t kGap = 3, kSlot = 2;
        uint32_t stride = s.rows > 1 ? s.count + kGap : 0;
        std::vector<float> logits(size_t(s.rows - 1) * stride + s.count, 100.f);  // the gaps: larger than any logit
        std::vector<uint32_t> want;
        for (uint32_t r = 0; r < s.rows; ++r) {
          auto row = random_floats(rng, s.count, -10.f, 10.f);
          if (s.ties)  // several copies of the maximum: the lowest index must win (another one in each row)
            for (uint32_t i = (s.count / 3 + r) % s.count; i < s.count; i += std::max(1u, s.count / 4)) row[i] = 11.f;
          if (s.nans)
            for (uint32_t i = 0; i < s.count; i += s.all_nan ? 1 : 7) row[i] = std::numeric_limits<float>::quiet_NaN();
          std::copy(row.begin(), row.end(), logits.begin() + std::ptrdiff_t(r * stride));
          want.push_back(s.all_nan ? kNoToken : uint32_t(reference::argmax(widen(row))));
        }
        Buffers b{device};
        auto& next = b.input("next_ids", std::vector<uint32_t>(s.rows + 1, 0xDEADu));
        auto& history = b.input("history", std::vector<uint32_t>(kSlot + s.rows + 1, 0xDEADu));
        auto& partials = b.poisoned("partials", 2 * kArgmaxPartials * s.rows);
        run(device, argmax(device, {&b.input("logits", logits)}, {&next}, {&history}, {&partials},
                           {s.count, kSlot, s.rows, stride}));
        auto got_next = device.read_as<uint32_t>(next);
        auto got_history = device.read_as<uint32_t>(history);
        bool ok = got_next[s.rows] == 0xDEADu && got_history[kSlot - 1] == 0xDEADu &&
                  got_history[kSlot + s.rows] == 0xDEADu;
        for (uint32_t r = 0; r < s.rows; ++r) ok = ok && got_next[r] == want[r] && got_history[kSlot + r] == want[r];
        return CaseResult{"argmax", fmt::format("count={} rows={}", s.count, s.rows), ok ? 0.0 : 1.0, 0.5};
      });
}

// mask_tokens: exact, so the "error" is 0 when every masked logit is NaN, every other logit keeps its bits and
// the elements past count are untouched, and 1 otherwise. Counts below, at and past a word and a workgroup of
// ids, a vocabulary's; masks with no id, one id, a few, half and all but one allowed.
KernelCheck mask_tokens_check(bool quick) {
  struct Shape {
    uint32_t count;
    double density;  // the chance that an id is allowed; 0: one id only
  };
  std::vector<Shape> shapes = {{1, 1.0}, {31, 0.5}, {32, 0.0}, {33, 0.9}, {257, 0.5}, {1000, 0.01}, {4097, 0.999}};
  if (!quick) shapes.push_back({151936, 0.3});
  return make_check<Shape>(
      "mask_tokens", 0.5, "NaN exactly where masked, every other bit kept", shapes,
      [](const Shape& s) { return fmt::format("count={} allowed={}", s.count, s.density); },
      [](gpu::Device& device, Rng& rng, const Shape& s) {
        // The row after kHead values and kTail after it (a batched step's rows): those must keep their values;
        // its bits after two words that allow nothing.
        constexpr uint32_t kHead = 3, kTail = 5, kWords = 2;
        auto logits = random_floats(rng, kHead + s.count + kTail, -10.f, 10.f);
        std::vector<uint32_t> allowed(kWords + token_mask_words(s.count), 0);
        std::bernoulli_distribution allow(s.density);
        uint32_t only = uint32_t(rng() % s.count);
        for (uint32_t i = 0; i < s.count; ++i)
          if (s.density > 0 ? allow(rng) : i == only) allowed[kWords + i / 32] |= 1u << (i % 32);
        if (s.count % 32) allowed.back() |= ~0u << (s.count % 32);  // bits past count: must not matter
        auto want = reference::mask_tokens(widen(std::vector<float>(logits.begin() + kHead, logits.end() - kTail)),
                                           std::span(allowed).subspan(kWords));
        Buffers b{device};
        auto& buffer = b.input("logits", logits);
        run(device, mask_tokens(device, {&buffer}, {&b.input("allowed", allowed)}, s.count, kHead, kWords));
        auto got = b.read(buffer, logits.size());
        bool ok = true;
        for (uint32_t i = 0; i < s.count; ++i)
          ok = ok && (std::isnan(want[i]) ? std::isnan(got[kHead + i]) : got[kHead + i] == logits[kHead + i]);
        for (uint32_t i = 0; i < logits.size(); ++i)
          if (i < kHead || i >= kHead + s.count) ok = ok && got[i] == logits[i];
        return CaseResult{"mask_tokens", fmt::format("count={}", s.count), ok ? 0.0 : 1.0, 0.5};
      });
}

// The checks of sample: the chunks' candidates once, then `draws` merges and draws at positions 0, 1, ...,
// each into its own history slot. A token the reference never keeps, drawn even once, is an infinite error.
// Where the draw among the best 64 decides (top_k on, or fewer than 64 tokens kept), the token must be the
// one the reference's inverse distribution gives for the kernel's random number (or its neighbour when the
// number lies within 1e-5 of their boundary). Always, the kept tokens, most probable first, are grouped
// into bins of at least 1/16 of the probability (a token alone when it has more), and the figure reported
// is the largest z-score of a bin's drawn frequency against its probability, |f - p| / sqrt(p (1 - p) /
// draws).
KernelCheck sample_check(bool quick) {
  struct Shape {
    uint32_t count, top_k;
    float top_p, min_p, temperature;
    bool ties, nans;
    float offset = 0;             // added to every logit
    bool masked_chunks = false;   // the second chunk all -inf, the third all NaN
    bool plus_infinity = false;   // one logit +inf: drawn every time
    bool all_nan = false;         // no token: kNoToken every time
    bool penalties = false;       // every 4th token seen 1-3 times; repetition 1.5, presence 0.3, frequency 0.2
  };
  // One chunk and several (up to the largest vocabulary), fewer valid logits than top_k, top_k 1 (argmax
  // with ties), the cuts alone and together, equal logits across chunk boundaries, NaN; top-k off with the
  // cuts among few tokens (a peaked distribution) and many (flatter ones), with no cut at all, and top-k above
  // 64 and at or past the vocabulary. Each draw is also checked against the reference's token at its random
  // number, in index order.
  std::vector<Shape> shapes = {{3000, 5, 1.f, 0.f, 1.f, false, false},     {7, 64, 0.9f, 0.f, 1.f, false, true},
                               {4097, 1, 1.f, 0.f, 1.f, true, true},       {5000, 40, 1.f, 0.3f, 1.f, true, false},
                               {70001, 64, 0.8f, 0.f, 0.7f, false, true},  {2500, 20, 0.8f, 0.05f, 0.7f, true, true},
                               {9000, 0, 0.9f, 0.f, 0.1f, false, true},    {3000, 0, 0.5f, 0.f, 1.f, true, false},
                               {2100, 0, 1.f, 0.02f, 1.f, false, true},    {1500, 0, 1.f, 0.f, 2.f, false, false},
                               // infinities and whole chunks of -inf or NaN, around logits near -100 too
                               {5000, 0, 0.5f, 0.01f, 1.f, false, false, 0, true},
                               {5000, 0, 0.9f, 0.f, 0.5f, false, true, -100, true},
                               {5000, 20, 0.8f, 0.f, 0.7f, false, false, 0, true, true},
                               {5000, 0, 0.9f, 0.f, 1.f, true, false, 0, false, true},
                               {2000, 0, 0.9f, 0.f, 1.f, false, true, 0, false, false, true},
                               {2000, 5, 1.f, 0.f, 1.f, false, true, 0, false, false, true},
                               // penalties, with top-k and with the rejection draw
                               {3000, 20, 0.9f, 0.f, 0.7f, false, true, 0, false, false, false, true},
                               {3000, 0, 0.7f, 0.f, 1.f, true, false, 0, false, false, false, true},
                               // top-k above 64, at the vocabulary, past it
                               {5000, 200, 0.9f, 0.f, 0.7f, false, true},  {3001, 3001, 1.f, 0.05f, 1.f, true, false},
                               {4100, 9000, 0.8f, 0.f, 1.5f, false, false}};
  if (!quick) shapes.push_back({kMaxSampleCount, 20, 0.8f, 0.f, 0.7f, true, false});
  constexpr double bound = 6;  // bins of >= 64 expected draws: a false alarm is below 1e-7 per bin
  auto describe = [](const Shape& s) {
    return fmt::format("count={} top_k={} top_p={} min_p={} temperature={}{}{}{}{}{}", s.count, s.top_k, s.top_p,
                       s.min_p, s.temperature, s.ties ? " ties" : "", s.nans ? " NaN" : "",
                       s.offset != 0 ? fmt::format(" offset={}", s.offset) : "",
                       s.masked_chunks ? " -inf/NaN chunks" : "",
                       s.plus_infinity ? " +inf" : s.all_nan ? " all NaN" : s.penalties ? " penalties" : "");
  };
  return make_check<Shape>(
      "sample", bound, "z-score of drawn frequencies against the reference's probabilities", shapes, describe,
      [describe, quick](gpu::Device& device, Rng& rng, const Shape& s) {
        const uint32_t draws = quick ? 1024 : 4096;
        auto logits = random_floats(rng, s.count, -4.f, 4.f);
        if (s.ties)  // equal logits at the top, in different chunks: the lower index comes first
          for (uint32_t i = s.count / 5; i < s.count; i += std::max(1u, s.count / 3)) logits[i] = 4.5f;
        if (s.nans)
          for (uint32_t i = 1; i < s.count; i += 3) logits[i] = std::numeric_limits<float>::quiet_NaN();
        for (float& v : logits) v += s.offset;
        for (uint32_t i = kSampleChunk; s.masked_chunks && i < std::min(3 * kSampleChunk, s.count); ++i)
          logits[i] = i < 2 * kSampleChunk ? -INFINITY : std::numeric_limits<float>::quiet_NaN();
        if (s.plus_infinity) logits[s.count / 2 + 1] = INFINITY;
        if (s.all_nan) std::fill(logits.begin(), logits.end(), std::numeric_limits<float>::quiet_NaN());
        Buffers b{device};
        auto& next = b.input("next_ids", std::vector<uint32_t>(draws, 0xDEADu));  // draw d into slot d
        auto& history = b.input("history", std::vector<uint32_t>(draws, 0xDEADu));
        auto& candidates = b.input("candidates", std::vector<uint32_t>(sample_candidates_words(s.count), 0xDEADu));
        std::vector<uint32_t> seen(s.count, 0);
        for (uint32_t i = 2; s.penalties && i < s.count; i += 4) seen[i] = 1 + i % 3;
        auto& counts = b.input("counts", seen);
        SampleParams p{s.count, 0, s.top_k, 0, s.top_p, s.min_p, 1.f / s.temperature, 0x5eed, 0x1234};
        if (s.penalties) p.repetition_penalty = 1.5f, p.presence_penalty = 0.3f, p.frequency_penalty = 0.2f;
        // The row after 37 logits that would win every draw (a batched step's rows lie one after another).
        p.logits_offset = 37;
        std::vector<float> rows(p.logits_offset, 1e30f);
        rows.insert(rows.end(), logits.begin(), logits.end());
        auto& settings = b.input("rows", std::vector<uint32_t>(sizeof(SampleParams) / 4, 0xDEADu));
        const SampleBuffers buffers{{&b.input("logits", rows)}, {&next}, {&history}, {&candidates}, {&counts}, {&settings}};
        auto stages = sample(device, buffers, s.count, 1);
        write_sample_rows(device, buffers, s.count, std::span(&p, 1));
        for (size_t stage = 0; stage + 1 < stages.size(); ++stage) run(device, stages[stage]);  // position-free
        for (uint32_t d = 0; d < draws; ++d) {
          p.position = p.slot = d;
          write_sample_rows(device, buffers, s.count, std::span(&p, 1));
          // A penalized draw counts its token: put the counts back, so that every draw sees the same ones
          // (but the last, whose counts are checked below).
          if (d > 0) device.write(counts, std::span<const uint32_t>(seen));
          run(device, stages.back());
        }
        if (device.read_as<uint32_t>(next) != device.read_as<uint32_t>(history))
          return CaseResult{"sample", describe(s) + " (next_ids and history differ)", INFINITY, bound};
        if (s.all_nan) {
          auto drawn = device.read_as<uint32_t>(history);
          bool none = std::all_of(drawn.begin(), drawn.end(), [](uint32_t t) { return t == kNoToken; });
          return CaseResult{"sample", describe(s), none ? 0.0 : INFINITY, bound};
        }
        // A penalized draw counts its token; one without penalties leaves every count as it was (a step queued
        // ahead may drop its row's draw, which must not have been counted).
        uint32_t last = device.read_as<uint32_t>(history).back();
        auto after = device.read_as<uint32_t>(counts);
        if (last >= s.count) return CaseResult{"sample", describe(s) + " (no token drawn)", INFINITY, bound};
        std::vector<uint32_t> want_counts = seen;
        if (s.penalties) ++want_counts[last];
        if (after != want_counts)
          return CaseResult{"sample", describe(s) + (s.penalties ? " (the drawn token's count did not go up by one)"
                                                                 : " (a draw without penalties changed the counts)"),
                            INFINITY, bound};
        auto effective = reference::penalized_logits(widen(logits), seen, p.repetition_penalty, p.presence_penalty,
                                                     p.frequency_penalty);
        auto want = reference::sampling_probabilities(effective, s.temperature, s.top_k, s.top_p, s.min_p);
        std::vector<double> frequency(s.count, 0.0);
        for (uint32_t token : device.read_as<uint32_t>(history)) {
          if (token >= s.count || want[token] == 0) return CaseResult{"sample", describe(s), INFINITY, bound};
          frequency[token] += 1.0 / draws;
        }
        std::vector<uint32_t> kept;  // in sampling order: higher logit, then lower index
        for (uint32_t i = 0; i < s.count; ++i)
          if (want[i] > 0) kept.push_back(i);
        {  // the draw: the kept token at u in index order (the GPU's is in integer weights: near boundaries, either)
          auto drawn = device.read_as<uint32_t>(history);
          for (uint32_t d = 0; d < draws; ++d) {
            double u = kernels::sample_unit(uint64_t(p.seed_hi) << 32 | p.seed_lo, d, 0), cumulative = 0;
            size_t pick = 0;
            while (pick + 1 < kept.size() && (cumulative += want[kept[pick]]) <= u) ++pick;
            bool near_boundary = std::abs(cumulative - u) < 1e-5 || (pick > 0 && std::abs(cumulative - want[kept[pick]] - u) < 1e-5);
            bool neighbour = (pick + 1 < kept.size() && drawn[d] == kept[pick + 1]) || (pick > 0 && drawn[d] == kept[pick - 1]);
            if (drawn[d] != kept[pick] && !(near_boundary && neighbour))
              return CaseResult{"sample", fmt::format("{} (draw {}: token {}, the reference's {})", describe(s), d,
                                                       drawn[d], kept[pick]),
                                INFINITY, bound};
          }
        }
        std::stable_sort(kept.begin(), kept.end(), [&](uint32_t a, uint32_t b) { return effective[a] > effective[b]; });
        double worst = 0, bin_p = 0, bin_f = 0;
        auto close_bin = [&] {
          double spread = std::sqrt(bin_p * (1 - bin_p) / draws);
          worst = std::max(worst, spread > 0 ? std::abs(bin_f - bin_p) / spread : std::abs(bin_f - bin_p) < 1e-9 ? 0 : INFINITY);
          bin_p = bin_f = 0;
        };
        for (size_t r = 0; r < kept.size(); ++r) {
          bin_p += want[kept[r]];
          bin_f += frequency[kept[r]];
          if (bin_p >= 1.0 / 16 || r + 1 == kept.size()) close_bin();
        }
        return CaseResult{"sample", describe(s), worst, bound};
      });
}

std::vector<KernelCheck> model_kernel_checks(bool quick) {
  return {embed_check(quick),        linear_check(quick),         linear_f16_check(quick), linear_int4_check(quick),
          gated_act_check(quick),    qkv_rope_store_check(quick), flash_attention_check(quick),
          argmax_check(quick),       mask_tokens_check(quick),    sample_check(quick),
          linear_fused_check(),      linear_qkv_rope_check()};
}

}  // namespace gerbil::kernels
