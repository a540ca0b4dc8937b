#include "kernels/model.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "gerbil/error.h"
#include "kernels/tuning.h"
#include "model/iq3.h"

namespace gerbil::kernels {
namespace {

// linear.wgsl's tiled variant: TILE x TILE output tiles (for prompts, M > kMatvecRows, with K % 8 != 0).
constexpr uint32_t kTile = 64;
constexpr uint32_t kLinearMatvecColumns = 8;  // linear.wgsl COLS
constexpr uint32_t kMaxMatvecColumns = 4;     // linear_matvec_sg.wgsl: columns per group
constexpr uint64_t kMaxMatvecSplit = 8;       // subgroups per group chosen at most (256 / 32 on NVIDIA)
constexpr uint32_t kMaxMatvecUnroll = 8;      // linear_matvec_sg.wgsl: its weight registers per column
// linear_matvec_sg.wgsl's workgroups resident at once with split 8 (one column group per workgroup at 32 lanes)
// are the adapter's tuning().resident_workgroups (an H200: 132 SMs x 8; see linear_matvec_blocking).
constexpr uint64_t kResidentMatvecRowBytes = 8192;  // weight rows from which decoding uses that grid
constexpr uint32_t kMaxHeadDim = 256;  // qkv_rope_store.wgsl / flash_attention.wgsl MAX_HEAD_DIM
// linear_q_matvec.wgsl's lanes per team: a warp of NVIDIA's (and half an AMD wave).
constexpr uint32_t kQuantTeam = 32;

const char* name_of(WeightType type) { return weight_type_name(type); }

// Weights are counted in their own bytes, not in u32 words: an odd-length 16-bit tensor ends in half a word,
// which the shader reads whole, but buffers are allocated and bound in whole words, so that word exists.
// `rows` rows of K elements.
Operand weight_operand(std::string_view name, BufferBinding binding, uint64_t rows, uint64_t K, WeightType type) {
  if (is_block_type(type)) return {name, binding, rows * weight_row_bytes(type, K), 1};
  return {name, binding, rows * K, weight_bytes(type)};
}

// An operand the kernel ignores (its flag is 0) only has to be some buffer.
uint64_t used(uint32_t flag, uint64_t elements) { return flag ? elements : 1; }

// The subgroup kernels (linear_matvec_sg, flash_attention_sg) need the feature and subgroups of at least 4
// lanes: their workgroup arrays hold one slot per subgroup of a 256-invocation workgroup, at most 64.
bool has_subgroups(const gpu::Device& device) {
  return device.features().subgroups && device.adapter().subgroup_min_size >= 4;
}

void check_weight_type(std::string_view kernel, const std::string& shapes, WeightType type) {
  if (static_cast<uint32_t>(type) > static_cast<uint32_t>(WeightType::IQ3_S))
    fail("kernel '{}' ({}): weight type {} is not f32 (0), f16 (1), bf16 (2) or a block type (3..18)", kernel,
         shapes, static_cast<uint32_t>(type));
}

// A product or table of a block type: rows of whole blocks.
void check_block_rows(std::string_view kernel, const std::string& shapes, WeightType type, uint32_t K) {
  if (is_block_type(type) && K % block_layout(type).elements != 0)
    fail("kernel '{}' ({}): rows of {} hold whole blocks of {} elements, not {}", kernel, shapes,
         weight_type_name(type), block_layout(type).elements, K);
}

bool use_matvec(uint32_t M) { return M <= kMatvecRows; }

std::pair<std::string, double> block_constant(const KvBlocks& b) { return {"KV_BLOCK_TOKENS", double(b.block_tokens)}; }

std::string blocks_shapes(const KvBlocks& b) { return fmt::format("blocks={}x{}", b.blocks, b.block_tokens); }

}  // namespace

Operand kv_pool_operand(std::string_view name, BufferBinding binding, uint64_t pool, KvType kv, uint32_t head_dim) {
  return {name, binding, kv_pool_bytes(kv, pool, head_dim), 1};
}

gpu::Constants cache_constants(KvType kv, uint64_t pool, const KvBlocks& blocks, const gpu::Constants& more) {
  gpu::Constants constants = kv_constants(kv, pool);
  constants.push_back(block_constant(blocks));
  constants.insert(constants.end(), more.begin(), more.end());
  return constants;
}

void check_kv_type(std::string_view kernel, const std::string& shapes, KvType kv, uint32_t head_dim) {
  if (kv != KvType::F32 && kv != KvType::F16 && kv != KvType::Q8)
    fail("kernel '{}' ({}): KV-cache type {} is not f32 (0), f16 (1) or q8 (2)", kernel, shapes,
         static_cast<uint32_t>(kv));
  if (kv == KvType::F16 && head_dim % 2 != 0)
    fail("kernel '{}' ({}): an f16 KV cache stores dims in pairs, so head_dim must be even, not {}", kernel, shapes,
         head_dim);
  if (kv == KvType::Q8 && head_dim % 4 != 0)
    fail("kernel '{}' ({}): a q8 KV cache stores dims four to a word, so head_dim must be a multiple of 4, not {}",
         kernel, shapes, head_dim);
}

uint64_t kv_pool_elements(std::string_view kernel, const std::string& shapes, const KvBlocks& b, uint32_t tile,
                          uint64_t kv_width) {
  if (b.block_tokens == 0 || b.block_tokens % tile != 0)
    fail("kernel '{}' ({}): KV blocks of {} tokens are not a positive multiple of its key tile of {}", kernel, shapes,
         b.block_tokens, tile);
  if (b.blocks == 0) fail("kernel '{}' ({}): the KV pool has no blocks", kernel, shapes);
  uint64_t elements = uint64_t(b.blocks) * b.block_tokens * kv_width;
  if (elements > UINT32_MAX)
    fail("kernel '{}' ({}): the KV pool's {} elements exceed the 2^32 its u32 indices reach", kernel, shapes, elements);
  return elements;
}

Operand kv_table_operand(const KvBlocks& b, uint64_t tokens) {
  return {"kv_table", b.table, std::max<uint64_t>(1, ceil_div(tokens, std::max(1u, b.block_tokens)))};
}

namespace {

// Head rules shared by qkv_rope_store and linear_qkv_rope: `tokens` rows stored from cache row `position`.
void check_heads(std::string_view kernel, const std::string& shapes, const QkvHeads& h, uint32_t position,
                 uint32_t tokens) {
  if (h.q_heads == 0 || h.kv_heads == 0 || h.head_dim == 0)
    fail("kernel '{}' ({}): head counts and head_dim must be positive", kernel, shapes);
  check_kv_type(kernel, shapes, h.kv, h.head_dim);
  if (h.rotary_dim % 2 != 0 || h.rotary_dim > h.head_dim)
    fail("kernel '{}' ({}): rotary_dim must be even and at most head_dim", kernel, shapes);
  if (uint64_t(position) + tokens > h.capacity)
    fail("kernel '{}' ({}): positions {}..{} lie past the cache capacity of {}", kernel, shapes, position,
         uint64_t(position) + tokens - 1, h.capacity);
}

// Shape rules of the linear kernels.
void check_linear(std::string_view kernel, const std::string& shapes, uint32_t M, uint32_t K, uint32_t N,
                  uint32_t out_stride, uint32_t out_col) {
  if (M == 0 || K == 0 || N == 0) fail("kernel '{}' ({}): M, K and N must be positive", kernel, shapes);
  if (uint64_t(out_col) + N > out_stride)
    fail("kernel '{}' ({}): output columns [{}, {}) do not fit in out_stride {}", kernel, shapes, out_col,
         uint64_t(out_col) + N, out_stride);
}

}  // namespace

uint32_t weight_bytes(WeightType type) {
  switch (type) {
    case WeightType::F32:
      return 4;
    case WeightType::F16:
    case WeightType::BF16:
      return 2;
    default:
      break;
  }
  fail("weight type {} is not one of f32 (0), f16 (1), bf16 (2)", static_cast<uint32_t>(type));
}

bool is_block_type(WeightType type) { return type >= WeightType::Q8_0 && type <= WeightType::IQ3_S; }

const char* weight_type_name(WeightType type) {
  constexpr const char* kNames[] = {"f32",  "f16",  "bf16", "Q8_0", "Q4_0", "Q4_1",
                                    "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_G", "Q4_G128", "Q3_K", "Q2_K",
                                    "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ3_S"};
  auto index = static_cast<uint32_t>(type);
  return index < std::size(kNames) ? kNames[index] : "invalid";
}

namespace {

// ggml-common.h's block sizes, then the GPU layout's runs (see WeightType); all zero for element types.
constexpr BlockLayout layout_of(WeightType type) {
  switch (type) {
    case WeightType::Q8_0: return {32, 34, 32, 0, 2};
    case WeightType::Q4_0: return {32, 18, 16, 0, 2};
    case WeightType::Q4_1: return {32, 20, 16, 0, 4};
    case WeightType::Q5_0: return {32, 22, 16, 4, 2};
    case WeightType::Q5_1: return {32, 24, 16, 4, 4};
    case WeightType::Q4_K: return {256, 144, 16, 0, 16};
    case WeightType::Q5_K: return {256, 176, 16, 4, 16};
    case WeightType::Q6_K: return {256, 210, 16, 8, 20};
    case WeightType::Q4_G: return {32, 20, 16, 0, 4};  // model/quant.h's int4_block_bytes
    case WeightType::Q4_G128: return {128, 68, 16, 0, 4};
    case WeightType::Q3_K: return {256, 110, 16, 0, 16};
    case WeightType::Q2_K: return {256, 84, 16, 0, 20};
    case WeightType::IQ4_NL: return {32, 18, 16, 0, 2};
    case WeightType::IQ4_XS: return {256, 136, 16, 0, 8};
    case WeightType::IQ3_XXS: return {256, 98, 16, 0, 8};
    case WeightType::IQ3_S: return {256, 110, 16, 0, 8};
    default: return {0, 0, 0, 0, 0};
  }
}

}  // namespace

BlockLayout block_layout(WeightType type) {
  BlockLayout layout = layout_of(type);
  if (layout.elements == 0)
    fail("weight type {} ({}) is not a block type", static_cast<uint32_t>(type), weight_type_name(type));
  return layout;
}

uint64_t weight_row_bytes(WeightType type, uint64_t K) {
  if (!is_block_type(type)) return K * weight_bytes(type);
  BlockLayout layout = block_layout(type);
  if (K % layout.elements != 0)
    fail("a {} weight row of {} elements is not whole blocks of {}", weight_type_name(type), K, layout.elements);
  uint64_t bytes = K / 32 * (layout.quant_bytes + layout.high_bytes) + K / layout.elements * layout.header_bytes;
  return ceil_div(bytes, 16) * 16;
}

namespace {

// One ggml block taken apart: each element's unsigned integer code (its low 4 bits and high bits; Q8_0's int8
// byte) and the scale bytes the GPU layout keeps (its header).
struct BlockParts {
  std::array<uint8_t, 256> codes;
  std::array<std::byte, 20> header{};
};

uint8_t byte_at(const std::byte* p, size_t i) { return std::to_integer<uint8_t>(p[i]); }

// 32-element blocks: element i < 16 in the low nibble of byte i, i + 16 in its high nibble.
void nibbles32(const std::byte* qs, uint8_t* codes) {
  for (size_t i = 0; i < 16; ++i) {
    codes[i] = byte_at(qs, i) & 15;
    codes[i + 16] = byte_at(qs, i) >> 4;
  }
}

// Q5_0 / Q5_1: bit i of the word at `qh` is element i's fifth bit.
// (The bits are read into a local first: `codes` may alias the block's bytes as far as the compiler knows, which
// would make it reload them after every store.)
void fifth_bits32(const std::byte* qh, uint8_t* codes) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  for (size_t i = 0; i < 32; ++i) codes[i] |= ((bits >> i) & 1) << 4;
}

// Q4_K / Q5_K: sub-block pairs share 32 bytes, the even sub-block in the low nibbles.
void nibbles256(const std::byte* qs, uint8_t* codes) {
  for (size_t pair = 0; pair < 4; ++pair)
    for (size_t l = 0; l < 32; ++l) {
      uint8_t byte = byte_at(qs, 32 * pair + l);
      codes[64 * pair + l] = byte & 15;
      codes[64 * pair + 32 + l] = byte >> 4;
    }
}

// Q5_K: bit j of byte l of the 32 bytes at `qh` is element 32 j + l's fifth bit.
void fifth_bits256(const std::byte* qh, uint8_t* codes) {
  std::array<uint8_t, 32> bits;
  std::memcpy(bits.data(), qh, 32);
  for (size_t j = 0; j < 8; ++j)
    for (size_t l = 0; l < 32; ++l) codes[32 * j + l] |= ((bits[l] >> j) & 1) << 4;
}

// Q6_K: in a half of 128 elements, element 32 k + l has its low nibble in ql byte l + 32 (k % 2) (nibble k / 2)
// and its top two bits in qh byte l (bits 2 k).
void codes_q6k(const std::byte* b, uint8_t* codes) {
  for (size_t half = 0; half < 2; ++half)
    for (size_t l = 0; l < 32; ++l) {
      uint8_t ql0 = byte_at(b, 64 * half + l), ql1 = byte_at(b, 64 * half + 32 + l);
      uint8_t qh = byte_at(b, 128 + 32 * half + l);
      uint8_t* out = codes + 128 * half + l;
      out[0] = (ql0 & 15) | (qh & 3) << 4;
      out[32] = (ql1 & 15) | ((qh >> 2) & 3) << 4;
      out[64] = (ql0 >> 4) | ((qh >> 4) & 3) << 4;
      out[96] = (ql1 >> 4) | ((qh >> 6) & 3) << 4;
    }
}

// Q2_K / Q3_K: element 128 half + 32 k + l's two low bits are bits 2 k of qs byte 32 half + l (Q2_K's value
// d (scale & 15) code - dmin (scale >> 4)). (The loops run over l last, on local copies of the bytes, so that they
// vectorize: five to six times faster than one loop over the elements, bench/bench_pack_rows.cpp.)
void two_bit_codes(const std::byte* qs, uint8_t* codes) {
  std::array<uint8_t, 64> bytes;
  std::memcpy(bytes.data(), qs, bytes.size());
  for (size_t half = 0; half < 2; ++half)
    for (size_t k = 0; k < 4; ++k)
      for (size_t l = 0; l < 32; ++l) codes[128 * half + 32 * k + l] = (bytes[32 * half + l] >> (2 * k)) & 3;
}

// Q3_K: bit 4 half + k of hmask byte l is element 128 half + 32 k + l's third bit (codes 0..7; ggml's value
// d (scale - 32) (code - 4)).
void third_bits(const std::byte* hmask, uint8_t* codes) {
  std::array<uint8_t, 32> bits;
  std::memcpy(bits.data(), hmask, bits.size());
  for (size_t half = 0; half < 2; ++half)
    for (size_t k = 0; k < 4; ++k)
      for (size_t l = 0; l < 32; ++l) codes[128 * half + 32 * k + l] |= ((bits[l] >> (4 * half + k)) & 1) << 2;
}

BlockParts block_parts(WeightType type, const std::byte* b) {
  BlockParts parts;
  uint8_t* codes = parts.codes.data();
  auto header = [&](size_t from, size_t count) { std::copy_n(b + from, count, parts.header.begin()); };
  switch (type) {
    case WeightType::Q8_0:
      for (size_t i = 0; i < 32; ++i) codes[i] = byte_at(b, 2 + i);
      header(0, 2);
      break;
    case WeightType::Q4_0:
    case WeightType::IQ4_NL: nibbles32(b + 2, codes); header(0, 2); break;
    case WeightType::IQ4_XS:  // d, scales_h, scales_l, then 16 bytes of codes per 32 elements
      for (size_t chunk = 0; chunk < 8; ++chunk) nibbles32(b + 8 + 16 * chunk, codes + 32 * chunk);
      header(0, 8);
      break;
    case WeightType::IQ3_XXS:
    case WeightType::IQ3_S: {  // d, 2 zero bytes, the sub-blocks' scales as nibbles of a word
      std::array<uint8_t, 8> scales;
      iq3_codes(type == WeightType::IQ3_XXS, b, codes, scales.data());
      header(0, 2);
      for (size_t s = 0; s < scales.size(); ++s) parts.header[4 + s / 2] |= std::byte(scales[s] << (4 * (s % 2)));
      break;
    }
    case WeightType::Q4_1:
    case WeightType::Q4_G:
    case WeightType::Q4_G128:  // d and m (z) for the block, then 16 bytes of nibbles per 32 elements
      for (size_t chunk = 0; chunk < block_layout(type).elements / 32; ++chunk)
        nibbles32(b + 4 + 16 * chunk, codes + 32 * chunk);
      header(0, 4);
      break;
    case WeightType::Q5_0: nibbles32(b + 6, codes); fifth_bits32(b + 2, codes); header(0, 2); break;
    case WeightType::Q5_1: nibbles32(b + 8, codes); fifth_bits32(b + 4, codes); header(0, 4); break;
    case WeightType::Q4_K: nibbles256(b + 16, codes); header(0, 16); break;
    case WeightType::Q5_K:
      nibbles256(b + 48, codes);
      fifth_bits256(b + 16, codes);
      header(0, 16);
      break;
    case WeightType::Q3_K:
      two_bit_codes(b + 32, codes);
      third_bits(b, codes);
      header(96, 14);  // the packed scales, d
      break;
    case WeightType::Q2_K:
      two_bit_codes(b + 16, codes);
      header(0, 16);  // the scales and mins
      std::copy_n(b + 80, 4, parts.header.begin() + 16);  // d, dmin
      break;
    default:  // Q6_K
      codes_q6k(b, codes);
      std::copy_n(b + 192, 18, parts.header.begin());  // scales, d
      break;
  }
  return parts;
}

// Writes chunk c's quants and high bits (BlockLayout's runs) from its 32 codes.
void put_chunk(const BlockLayout& layout, const uint8_t* codes, std::byte* quants, std::byte* high) {
  if (layout.quant_bytes == 32) {
    std::copy_n(reinterpret_cast<const std::byte*>(codes), 32, quants);
    return;
  }
  for (size_t i = 0; i < 16; ++i) quants[i] = std::byte((codes[i] & 15) | (codes[i + 16] & 15) << 4);
  // Element 4 q + i's bits above the nibble go to byte i at bit q (one bit) or 2 (q % 4) of word q / 4 (two):
  // quad q's four codes taken as a little-endian word put their bits in all four bytes at once.
  if (layout.high_bytes == 0) return;
  static_assert(std::endian::native == std::endian::little, "the GPU layout's words are little-endian");
  uint32_t words[2] = {0, 0};
  for (uint32_t q = 0; q < 8; ++q) {
    uint32_t quad;
    std::memcpy(&quad, codes + 4 * q, 4);
    if (layout.high_bytes == 4) words[0] |= ((quad >> 4) & 0x01010101u) << q;
    if (layout.high_bytes == 8) words[q / 4] |= ((quad >> 4) & 0x03030303u) << (2 * (q % 4));
  }
  std::memcpy(high, words, layout.high_bytes);
}

// pack_rows() for one block type, fixed at compile time so that the layout's loops unroll and its branches fold
// (four to ten times faster for K-quants than a layout read at run time: bench/bench_pack_rows.cpp). Sizes are
// checked by the caller.
template <WeightType kType>
void pack_rows_of(std::span<const std::byte> ggml, uint64_t rows, uint64_t K, std::span<std::byte> packed) {
  constexpr BlockLayout layout = layout_of(kType);
  uint64_t blocks = K / layout.elements, chunks = K / 32, row_bytes = weight_row_bytes(kType, K);
  // Each row is made in host memory and then copied out whole: the high bits are or-ed in, and `packed` may be
  // mapped GPU memory (a staging window), which the driver may make write-combined and slow to read back (on
  // the H200 that made an 8B Q4_K_M file, whose Q6_K rows have high bits, load in minutes).
  std::vector<std::byte> row(row_bytes);
  for (uint64_t r = 0; r < rows; ++r) {
    std::fill(row.begin(), row.end(), std::byte{0});
    std::byte* quants = row.data();
    std::byte* high = quants + chunks * layout.quant_bytes;
    std::byte* headers = high + chunks * layout.high_bytes;
    for (uint64_t b = 0; b < blocks; ++b) {
      BlockParts parts = block_parts(kType, ggml.data() + (r * blocks + b) * layout.ggml_bytes);
      std::copy_n(parts.header.begin(), layout.header_bytes, headers + b * layout.header_bytes);
      for (uint32_t c = 0; c < layout.elements / 32; ++c) {
        uint64_t chunk = b * (layout.elements / 32) + c;
        put_chunk(layout, parts.codes.data() + 32 * c, quants + chunk * layout.quant_bytes,
                  high + chunk * layout.high_bytes);
      }
    }
    std::copy(row.begin(), row.end(), packed.begin() + std::ptrdiff_t(r * row_bytes));
  }
}

}  // namespace

std::vector<std::byte> pack_rows(WeightType type, std::span<const std::byte> ggml, uint64_t rows, uint64_t K,
                                 std::string_view what) {
  std::vector<std::byte> packed(rows * weight_row_bytes(type, K));
  pack_rows(type, ggml, rows, K, what, packed);
  return packed;
}

void pack_rows(WeightType type, std::span<const std::byte> ggml, uint64_t rows, uint64_t K, std::string_view what,
               std::span<std::byte> packed) {
  BlockLayout layout = block_layout(type);
  if (K % layout.elements != 0)
    fail("tensor '{}' ({}): rows of {} elements are not whole blocks of {}", what, weight_type_name(type), K,
         layout.elements);
  uint64_t blocks = K / layout.elements, row_bytes = weight_row_bytes(type, K);
  if (ggml.size() != rows * blocks * layout.ggml_bytes)
    fail("tensor '{}' ({} [{}, {}]): {} bytes, expected {} ({} blocks of {})", what, weight_type_name(type), rows, K,
         ggml.size(), rows * blocks * layout.ggml_bytes, rows * blocks, layout.ggml_bytes);
  if (packed.size() != rows * row_bytes)
    fail("tensor '{}' ({}): packing {} rows into {} bytes, expected {}", what, weight_type_name(type), rows,
         packed.size(), rows * row_bytes);
  switch (type) {
    case WeightType::Q8_0: return pack_rows_of<WeightType::Q8_0>(ggml, rows, K, packed);
    case WeightType::Q4_0: return pack_rows_of<WeightType::Q4_0>(ggml, rows, K, packed);
    case WeightType::Q4_1: return pack_rows_of<WeightType::Q4_1>(ggml, rows, K, packed);
    case WeightType::Q5_0: return pack_rows_of<WeightType::Q5_0>(ggml, rows, K, packed);
    case WeightType::Q5_1: return pack_rows_of<WeightType::Q5_1>(ggml, rows, K, packed);
    case WeightType::Q4_K: return pack_rows_of<WeightType::Q4_K>(ggml, rows, K, packed);
    case WeightType::Q5_K: return pack_rows_of<WeightType::Q5_K>(ggml, rows, K, packed);
    case WeightType::Q6_K: return pack_rows_of<WeightType::Q6_K>(ggml, rows, K, packed);
    case WeightType::Q4_G: return pack_rows_of<WeightType::Q4_G>(ggml, rows, K, packed);
    case WeightType::Q4_G128: return pack_rows_of<WeightType::Q4_G128>(ggml, rows, K, packed);
    case WeightType::Q3_K: return pack_rows_of<WeightType::Q3_K>(ggml, rows, K, packed);
    case WeightType::Q2_K: return pack_rows_of<WeightType::Q2_K>(ggml, rows, K, packed);
    case WeightType::IQ4_NL: return pack_rows_of<WeightType::IQ4_NL>(ggml, rows, K, packed);
    case WeightType::IQ4_XS: return pack_rows_of<WeightType::IQ4_XS>(ggml, rows, K, packed);
    case WeightType::IQ3_XXS: return pack_rows_of<WeightType::IQ3_XXS>(ggml, rows, K, packed);
    case WeightType::IQ3_S: return pack_rows_of<WeightType::IQ3_S>(ggml, rows, K, packed);
    default: break;  // block_layout() has thrown for the others
  }
}

uint32_t kv_bytes(KvType type) {
  switch (type) {
    case KvType::F32:
      return 4;
    case KvType::F16:
      return 2;
    case KvType::Q8:
      return 1;
  }
  fail("KV-cache type {} is not one of f32 (0), f16 (1), q8 (2)", static_cast<uint32_t>(type));
}

const char* kv_type_name(KvType type) {
  return type == KvType::Q8 ? "q8" : type == KvType::F16 ? "f16" : "f32";
}

uint64_t kv_pool_bytes(KvType type, uint64_t elements, uint32_t head_dim) {
  uint64_t bytes = elements * kv_bytes(type);
  return type == KvType::Q8 ? bytes + 4 * (elements / std::max(1u, head_dim)) : bytes;
}

gpu::Constants kv_constants(KvType kv, uint64_t pool) {
  return {{"KV_TYPE", double(kv)}, {"KV_SCALES", kv == KvType::Q8 ? double(pool / 4) : 0.0}};
}

// A q8 row's scale needs the whole row's absmax, which linear_qkv_rope's lanes (a few dims of a head each,
// across workgroups) cannot reduce: q8 caches are stored by qkv_rope_store after the plain product.
bool qkv_rope_fusable(const QkvHeads& heads) {
  if (heads.kv == KvType::Q8) return false;
  return heads.kv == KvType::F32 || (heads.head_dim % 4 == 0 && heads.rotary_dim % 4 == 0);
}

Dispatch embed(gpu::Device& device, BufferBinding ids, BufferBinding table, BufferBinding positions,
               BufferBinding out, const EmbedParams& p, WeightType type, uint32_t position_rows) {
  auto shapes = fmt::format(
      "T={}{} D={} vocab_block=[{}, {}) type={} positions={}", p.seq_len,
      p.first_row ? fmt::format(" from row {}", p.first_row) : "", p.hidden_size, p.vocab_offset,
      uint64_t(p.vocab_offset) + p.vocab_rows, name_of(type),
      p.use_positions ? fmt::format("{} rows from {}", position_rows, p.position_offset) : "none");
  check_weight_type("embed", shapes, type);
  check_block_rows("embed", shapes, type, p.hidden_size);
  if (p.seq_len == 0 || p.hidden_size == 0 || p.vocab_rows == 0)
    fail("kernel 'embed' ({}): seq_len, hidden_size and vocab_rows must be positive", shapes);
  if (p.use_positions && uint64_t(p.position_offset) + p.seq_len > position_rows)
    fail("kernel 'embed' ({}): positions {}..{} lie past the {} rows of the position table", shapes,
         p.position_offset, uint64_t(p.position_offset) + p.seq_len - 1, position_rows);
  uint64_t rows = uint64_t(p.first_row) + p.seq_len;
  uint64_t n = count_of(p.seq_len, p.hidden_size);
  bool vec4 = p.hidden_size % 4 == 0;  // embed_vec4.wgsl: rows of whole vec4s
  // Its positions are an array of vec4, which a caller's small stand-in for an unused position table (any buffer
  // will do for embed.wgsl) might not hold.
  if (vec4 && !p.use_positions) positions = device.placeholder(0);
  return prepare(device, vec4 ? "embed_vec4" : "embed", shapes,
                 {{"ids", ids, rows},
                  weight_operand("table", table, p.vocab_rows, p.hidden_size, type),
                  {"positions", positions, used(p.use_positions, count_of(position_rows, p.hidden_size))},
                  {"out", out, count_of(rows, p.hidden_size)}},
                 p, fold(ceil_div(vec4 ? n / 4 : n, kWorkgroupSize)), {{"WEIGHT_TYPE", double(type)}});
}

namespace {

// linear_tiled.wgsl serves prompts (M > kMatvecRows) whose rows are whole 32-byte pieces of x (K % 8 == 0,
// which also makes 16-bit weight rows whole 16-byte pieces); other K fall back to linear.wgsl's 64 x 64 tiles.
bool use_linear_tiled(const LinearParams& p) { return !use_matvec(p.M) && p.K % 8 == 0; }

// A tile of linear_tiled.wgsl (group_rows 64: groups of 64 x 64) or linear_tiled_rows.wgsl (group_rows 32:
// groups of 32 x 128).
struct LinearTile {
  uint32_t rows, cols, group_rows = 64;
  uint32_t group_cols() const { return 4096 / group_rows; }
};

// Whole tiles where they fill their waves: a GPU runs `resident` (tuning().resident_tiles) workgroups of linear_tiled.wgsl at once
// (an H200: 132 SMs x 2), so T tiles take ceil(T / resident) waves, and a last wave at least 1 / 1.1
// full is kept (Llama-8B's gate_up at M = 512, 896 tiles, is 3.4 waves: its last is 39 % full). Other products
// share their (tile, slab) iterations out over `resident` workgroups, one wave that ends together, each
// share at least kMinShareSlabs slabs of 8 (a share's tile changes and the second pass's sums cost about as
// much). Run 20's sweep of equal parts at M = 512 on the H200 fits that count: Llama's q|k|v (192 tiles) was
// fastest in 4 parts (768 workgroups, 2.9 waves), Qwen's gate_up (304 tiles, 1.2 waves) in 3. Other GPUs
// differ in SMs and in workgroups per SM: the count is measured per adapter (kernels/tuning.h).
constexpr double kWaveSlack = 1.1;
constexpr uint64_t kMinShareSlabs = 32;

// linear_tiled_rows.wgsl's tiles: groups of 32 x 128, one or two down (32 or 64 rows) and two across; and its
// workgroup memory: two slabs of 8 k of x (16 vec4 slots) and of W (64 slots), and a level type's table of 16
// floats (blocks.wgsl).
constexpr uint32_t kBatchGroupRows = 32;
constexpr uint32_t kBatchTileCols = 256;
constexpr uint32_t kBatchTileBytes = (2 * 8 * 16 + 2 * 8 * 64) * 16 + 16 * 4;

// Whether a batched decode step of kLinearRowsMax + 1 to kBatchTileRows rows (17 to 64 sequences) runs its
// product in linear_tiled_rows.wgsl's tiles, 32 x 256 up to 32 rows and 64 x 256 above, rather than 64-row tiles
// (half of whose rows would be padding at 32, and whose threads own 4 x 8 outputs, not 8 x 8, at 64): where the
// adapter holds their workgroup arrays, and where their (tile, slab) iterations make at least three quarters of
// a wave of shares of kMinShareSlabs. On an H100 (2026-12-06, bench/device/session46_tiles.sh), Llama-3-8B's
// products at M = 32 (0.97 to 6.8 such waves) took a third less time (f16 gate_up 0.475 -> 0.301 ms, down 0.254
// -> 0.169, q|k|v 0.129 -> 0.094, o 0.111 -> 0.078; o is the 0.97) and its 32 sequences decoded 948 -> 1,440
// tok/s; Qwen2.5-0.5B's with all of its products in them (0.07 to 0.50 of a wave, its LM head aside) decoded
// 6,478 -> 5,582 tok/s. The three quarters lie between the two. At M = 64 (another H100, the same day,
// bench/device/session47_short.sh) the 64 x 256 tiles took the 8B's f16 gate_up 0.501 -> 0.428 ms, down 0.268 ->
// 0.239, and its 48 and 64 sequences from 1,367 and 1,758 to 1,555 and 1,976 tok/s. Tiles of 16 x 256
// (GROUP_ROWS 16) for 5 to 16 rows were slower than linear_rows.wgsl but for the 8B's f16 gate_up (0.239 -> 0.227
// ms; Q4_0 0.210 -> 0.293).
bool use_batch_tiles(const gpu::Device& device, const LinearParams& p) {
  if (!use_linear_tiled(p) || p.M <= kLinearRowsMax || p.M > kBatchTileRows ||
      device.limits().maxComputeWorkgroupStorageSize < kBatchTileBytes)
    return false;
  uint64_t iterations = ceil_div(p.N, kBatchTileCols) * (p.K / 8);
  return 4 * iterations >= 3 * uint64_t(tuning(device).resident_tiles) * kMinShareSlabs;
}

// linear_tiled.wgsl's tile: the largest of 128 x 128 (8x8 outputs per thread, the fewest workgroup-memory
// reads per FMA), 128 x 64, 64 x 128 that still yields tiled_fill() workgroups, else 64 x 64, so that a short
// or narrow product leaves fewer SMs idle (M = 512, N = 896: 28 tiles of 128 x 128, 112 of 64 x 64). Where the
// work may be `shared` out (linear_split_k), a larger tile is also taken when its (tile, slab) iterations make a
// wave of `resident` shares of twice kMinShareSlabs and it pads M and N no more than 64-wide tiles would:
// Qwen2.5-0.5B's down projection at M = 512 (K = 4864) then runs as 264 shares of its 28 large tiles, 0.1881 ->
// 0.1682 ms, and the model's pp512 gains 5 % (H200 run 84). Shares of only kMinShareSlabs (Qwen's o at M = 2048:
// 0.1285 -> 0.1416 ms) or padded rows (M = 50: its down 0.0475 -> 0.0593 ms) measured slower there. Whole tiles
// (linear()) keep the first rule.

uint64_t tile_count(const LinearParams& p, LinearTile tile) {
  return ceil_div(p.M, tile.rows) * ceil_div(p.N, tile.cols);
}

LinearTile linear_tile(const LinearParams& p, bool shared, uint32_t resident, bool batch_tiles) {
  if (!use_linear_tiled(p)) return {kTile, kTile};
  // linear_tiled_rows.wgsl's arrays hold 16 vec4 slots of x and 64 of W a k: the tile's rows and columns / 4.
  static_assert(kBatchTileRows / 4 <= 16 && kBatchTileCols / 4 <= 64);
  if (batch_tiles) return {p.M <= kBatchGroupRows ? kBatchGroupRows : kBatchTileRows, kBatchTileCols, kBatchGroupRows};
  for (LinearTile tile : {LinearTile{128, 128}, LinearTile{128, 64}, LinearTile{64, 128}}) {
    // Never taller than the rows rounded up to 64: a batched decode step of 17 to 64 rows computed half padding
    // in 128-row tiles (H200, 2026-12-02: Llama-3-8B's gate_up took 0.74 ms at M = 64 and at M = 32 alike).
    if (tile.rows > ceil_div(p.M, 64) * 64) continue;
    uint64_t tiles = tile_count(p, tile);
    bool unpadded = ceil_div(p.M, tile.rows) * tile.rows <= ceil_div(p.M, 64) * 64 &&
                    ceil_div(p.N, tile.cols) * tile.cols <= ceil_div(p.N, 64) * 64;
    bool fills_shares = unpadded && double(tiles * (p.K / 8) / (2 * kMinShareSlabs)) >= resident;
    if (tiles >= tiled_fill(resident) || (shared && fills_shares)) return tile;
  }
  return {64, 64};
}

// linear_tile() on `device`: its resident tiles, and linear_tiled_rows.wgsl's tiles where use_batch_tiles says.
LinearTile device_tile(const gpu::Device& device, const LinearParams& p, bool shared) {
  return linear_tile(p, shared, tuning(device).resident_tiles, use_batch_tiles(device, p));
}

std::string linear_shapes(const LinearParams& p, WeightType type) {
  return fmt::format("M={} K={} N={} type={} out_stride={} out_col={}", p.M, p.K, p.N, name_of(type), p.out_stride,
                     p.out_col);
}

// linear_shares.wgsl's override constants, which both passes of a prompt product take: the tile (its groups'
// rows, and the groups a tile has down and across) and, when shared out, the count of shares.
gpu::Constants shares_constants(LinearTile tile, uint32_t workers) {
  gpu::Constants constants = {{"GROUP_ROWS", double(tile.group_rows)},
                              {"ROW_GROUPS", double(tile.rows / tile.group_rows)},
                              {"COL_GROUPS", double(tile.cols / tile.group_cols())}};
  if (workers > 0) constants.push_back({"WORKERS", double(workers)});
  return constants;
}

// linear_shares.wgsl's u32 arithmetic bounds the workers, and the scratch of requested parts is bounded
// (partial sums of 2 tiles per worker: 128 MiB).
constexpr uint64_t kMaxSplitWorkers = 4096;
constexpr uint64_t kMaxSplitScratch = uint64_t(32) << 20;

// Slot-waves spent per wave of useful work when `workgroups` tiles run `resident` at a time (>= 1).
double wave_waste(uint64_t workgroups, uint32_t resident) {
  double waves = double(workgroups) / resident;
  return std::ceil(waves) / waves;
}

// The partial sums of `workers` shares: two tile-sized slots each.
uint64_t partial_floats(LinearTile tile, uint32_t workers) { return 2 * uint64_t(workers) * tile.rows * tile.cols; }

// linear_tiled.wgsl's bindings in order, `partials` the split's scratch (any buffer when not split).
struct TiledBindings {
  BufferBinding x, weight, bias, residual, out, partials;
};

// linear_tiled.wgsl (or its f16 twin) over the shape's tiles (workers 0) or shared out over `workers` workgroups.
Dispatch linear_tiled(gpu::Device& device, const std::string& shapes, const TiledBindings& b, const LinearParams& p,
                      WeightType type, uint32_t workers, Arithmetic arithmetic) {
  // A batched step's tiles are f32 whatever the arithmetic, as its other products are.
  bool batch_tiles = use_batch_tiles(device, p);
  bool f16 = arithmetic == Arithmetic::F16 && !batch_tiles;
  const char* kernel = batch_tiles ? "linear_tiled_rows" : f16 ? "linear_tiled_f16" : "linear_tiled";
  if (f16 && !device.features().shader_f16)
    fail("kernel '{}' ({}): f16 arithmetic needs the adapter's shader-f16 feature, which {} does not offer", kernel,
         shapes, device.adapter().summary());
  uint64_t out_count = count_of(p.M, p.out_stride);
  LinearTile tile = device_tile(device, p, workers > 0);
  gpu::Constants constants = shares_constants(tile, workers);
  constants.push_back({"WEIGHT_TYPE", double(type)});
  return prepare(device, kernel, shapes,
                 {{"x", b.x, count_of(p.M, p.K)},
                  weight_operand("W", b.weight, p.N, p.K, type),
                  {"bias", b.bias, used(p.has_bias, p.N)},
                  {"residual", b.residual, used(p.has_residual, out_count)},
                  {"out", b.out, out_count},
                  {"partials", b.partials, workers ? partial_floats(tile, workers) : 1}},
                 p, workers ? fold(workers) : fold(tile_count(p, tile)), constants);
}

}  // namespace

uint32_t linear_split_workers(const gpu::Device& device, const LinearParams& p, uint32_t requested) {
  uint32_t resident = tuning(device).resident_tiles;
  LinearTile tile = device_tile(device, p, true);
  uint64_t tiles = use_linear_tiled(p) ? tile_count(p, tile) : 0;
  if (requested != 0) {
    if (!use_linear_tiled(p) || requested > tiles * (p.K / 8) || requested > kMaxSplitWorkers ||
        partial_floats(tile, requested) > kMaxSplitScratch)
      fail("kernel 'linear' (M={} K={} N={}): {} split workers requested; the prompt kernel splits M > {} rows "
           "with K % 8 == 0 over at most one workgroup per tile and slab of 8 k, {} workgroups and {} MiB of "
           "partial sums",
           p.M, p.K, p.N, requested, kMatvecRows, kMaxSplitWorkers, kMaxSplitScratch * 4 >> 20);
    return requested;
  }
  if (!use_linear_tiled(p) || p.gate_act || p.norm_x || p.norm_out || wave_waste(tiles, resident) <= kWaveSlack) return 0;
  // Fewer workers than tiles only to even out the waves; where K is too short for that many shares (fewer
  // than `resident`), whole tiles keep more SMs busy.
  uint64_t workers = std::min<uint64_t>(resident, tiles * (p.K / 8) / kMinShareSlabs);
  return workers > tiles || workers == resident ? uint32_t(workers) : 0;
}

uint64_t linear_split_scratch_floats(const gpu::Device& device, const LinearParams& p, uint32_t workers) {
  return partial_floats(device_tile(device, p, true), linear_split_workers(device, p, workers));
}

uint64_t linear_split_scratch_bound(const gpu::Device& device) {
  // The chosen workers are at most tuning().resident_tiles, each with two tile-sized slots of up to 128 x 128: a product
  // of few rows or columns may still take the large tile when its K makes enough shares (linear_tile).
  return partial_floats({128, 128}, tuning(device).resident_tiles);
}

bool use_linear_rows(const gpu::Device& device, const LinearParams& p, WeightType type) {
  constexpr uint64_t kRowsMinWorkgroupBytes = 24 << 10;  // up to kMatvecRows rows (see model.h)
  if (p.M < kLinearRowsMin || p.M > kLinearRowsMax || p.K % 8 != 0) return false;
  if (p.norm_x || p.norm_out) return false;  // linear_rows.wgsl fuses a gate activation, no norm
  if (is_block_type(type) && p.K % block_layout(type).elements != 0) return false;  // linear() names the error
  if (p.M > kMatvecRows) return true;
  // Below kMatvecRows rows block formats stay on linear_q_matvec, and formats of 32-element blocks up to it, whose
  // chunks decode cheaply there. On an H200 (2026-12-02, Llama-3-8B's shape, linear_q_matvec -> linear_rows for
  // the large products): Q4_0 at 4 sequences 556.2 -> 510.0 tok/s; Q4_K_M (256-element super-blocks) at 4
  // sequences 380.2 -> 423.5, at 2 sequences 282.7 -> 268.5.
  if (is_block_type(type) && (block_layout(type).elements < 256 || p.M < kMatvecRows)) return false;
  return p.N * weight_row_bytes(type, p.K) >= kRowsMinWorkgroupBytes * tuning(device).resident_workgroups;
}

RowsBlocking linear_rows_blocking(const gpu::Device& device, uint32_t M, uint32_t N, WeightType type,
                                  RowsBlocking requested, bool gated) {
  auto shapes = [&] { return fmt::format("M={} N={} type={}", M, N, name_of(type)); };
  // linear_rows.wgsl's limits: four groups of 4 rows, 4 columns a thread, 4 pieces a slice at a time.
  constexpr uint32_t kRowsMaxColumns = 4, kRowsMaxUnroll = 4, kRowsInFlight = 4, kRowsMaxTeams = 8;
  static_assert(kLinearRowsMax <= 16, "linear_rows.wgsl holds the sums of four groups of 4 rows");
  RowsBlocking b = requested;
  // Sums of all M rows for each column a thread holds: 4 columns up to 8 rows (each 4-row read of x feeds 16
  // FMAs), 2 beyond (64 sums a thread would leave too few threads resident).
  if (b.columns == 0) b.columns = M <= 8 ? 4 : 2;
  // One team a workgroup unless asked: more teams fetch each x row from L2 for more columns, but whether that is
  // faster has not been measured on a GPU yet (bench/device/session40_teams.sh times it).
  if (b.teams == 0) b.teams = 1;
  auto workgroups = [&] { return ceil_div(N, uint64_t(b.lanes) * b.columns * b.teams); };
  // Slices of 8 columns at one k: a workgroup's 32 slices then share each column's k. On an H200 (2026-12-03,
  // bench kernels over every blocking at 4, 8 and 16 rows) they were the fastest or within 9 % of it for every
  // Llama-3-8B and Qwen2.5-0.5B product; the wider slices the earlier rule kept where they still filled the
  // resident tiles were slower at 16 rows: Llama's gate_up 0.272 -> 0.232 ms (f16), 0.238 -> 0.209 (Q4_0);
  // Qwen's gate_up 0.0374 -> 0.0317 (f16). Narrower slices (4 columns, 64 slices) for Qwen's narrow f16 products
  // made its down faster alone (16 rows: 0.0303 -> 0.0237 ms) but the model slower (16 sequences: 6,040 -> 5,525
  // tok/s, two runs each, same call).
  bool fixed_lanes = b.lanes != 0;
  if (!fixed_lanes) b.lanes = 8;
  // Fewer columns a thread (down to 1) while the slices leave fewer workgroups than half the resident tiles (an
  // H200: one per SM). On an H200 (2026-12-02, bench model --batch --profile, the kernel before this one):
  // Qwen2.5-0.5B's down (N = 896) went from 28 workgroups to 112 at M = 8, 57.6 -> 37.1 us, and from 56 to 112
  // at M = 16, 70.8 -> 51.9 us; Llama-3-8B's down (N = 4096) from 128 to 512 at M = 8, 183.6 -> 123.0 us; but
  // from 256 (already about the resident tiles) to 512 at M = 16 it slowed, 226.5 -> 327.9 us, hence the half.
  uint32_t fewest_columns = gated ? 2 : 1;  // a gated output's gate and up rows
  if (requested.columns == 0 && !fixed_lanes)
    while (b.columns > fewest_columns && workgroups() < tuning(device).resident_tiles / 2) b.columns /= 2;
  // Then the pieces a slice takes at a time: kRowsInFlight weight loads in flight per thread for element types.
  // A piece of a block row is a chunk's 16 bytes of quants (16 or 32 weights, not 4 or 8), and one a column at
  // a time was the fastest on the H200 run above: Qwen's o at 16 rows in Q4_0, 0.0239 ms at 4 pieces (the
  // earlier rule's, 1 column a thread) against 0.0140 at 1; Llama's gate_up 0.217 at 2 against 0.209 at 1.
  if (b.unroll == 0) b.unroll = is_block_type(type) ? 1 : std::max<uint32_t>(1, kRowsInFlight / b.columns);
  if (b.columns > kRowsMaxColumns || !std::has_single_bit(b.columns))
    fail("kernel 'linear_rows' ({}): {} columns a thread requested; 1, 2 or 4", shapes(), b.columns);
  if (b.columns < fewest_columns)
    fail("kernel 'linear_rows' ({}): 1 column a thread requested; a gated projection takes 2 or 4 (gate and up "
         "rows)", shapes());
  if (b.lanes < 8 || b.lanes > 32 || !std::has_single_bit(b.lanes))
    fail("kernel 'linear_rows' ({}): slices of {} columns requested; 8, 16 or 32", shapes(), b.lanes);
  if (b.unroll > kRowsMaxUnroll || !std::has_single_bit(b.unroll))
    fail("kernel 'linear_rows' ({}): {} pieces a slice at a time requested; 1, 2 or 4", shapes(), b.unroll);
  if (b.teams > kRowsMaxTeams || !std::has_single_bit(b.teams))
    fail("kernel 'linear_rows' ({}): {} teams a workgroup requested; 1, 2, 4 or 8", shapes(), b.teams);
  return b;
}

Grid linear_rows_grid(const gpu::Device& device, const LinearParams& p, WeightType type, RowsBlocking requested) {
  RowsBlocking b = linear_rows_blocking(device, p.M, p.N, type, requested, p.gate_act != 0);
  return fold(ceil_div(p.N, uint64_t(b.columns) * b.lanes * b.teams));
}

Grid linear_grid(const LinearParams& p, uint32_t resident_tiles) {
  if (use_matvec(p.M)) return fold(ceil_div(p.N, kLinearMatvecColumns));
  return fold(tile_count(p, linear_tile(p, false, resident_tiles, false)));
}

namespace {

// linear_matvec_sg.wgsl serves decoding when the adapter has subgroups of a known size and weight rows are
// whole 16-byte pieces; a workgroup covers 256 / (subgroup size x split) column groups per unit.
bool use_subgroup_matvec(const gpu::Device& device, const LinearParams& p, WeightType type) {
  return linear_can_fuse(device, p.M, p.K, type);
}

// linear_matvec_sg.wgsl's grid: one workgroup per unit of 256 / (subgroup size x split) column groups, or
// blocking.workgroups where those are fewer, and then the workgroups loop over the units (LOOPS).
struct MatvecGrid {
  Grid grid;
  bool loops;
};

MatvecGrid subgroup_matvec_grid(const gpu::Device& device, const LinearParams& p, MatvecBlocking blocking) {
  uint32_t groups = std::max<uint32_t>(1, kWorkgroupSize / device.adapter().subgroup_max_size / blocking.split);
  uint64_t units = ceil_div(p.N, groups * blocking.columns);
  bool loops = blocking.workgroups != 0 && units > blocking.workgroups;
  return {fold(loops ? blocking.workgroups : units), loops};
}

// The blocking of a kernel whose column groups are fixed sets of rows (gate|up, rotary pairs): `columns`
// (2, or 4 for the rotary pairs of an f16 cache), which a requested 0 leaves to it; `pairs` names what groups them.
MatvecBlocking paired_blocking(const char* kernel, const std::string& shapes, const char* pairs,
                               MatvecBlocking requested, uint32_t columns = 2) {
  if (requested.columns != 0 && requested.columns != columns)
    fail("kernel '{}' ({}): {} groups rows in {} columns, {} requested", kernel, shapes, pairs, columns,
         requested.columns);
  requested.columns = columns;
  return requested;
}

// linear_matvec_sg.wgsl's operands: x, W, bias, residual (ROPE: rope_table), out, the norms' (bound at 5 and
// 6), k_cache, v_cache (ROPE only); and the elements the kernel touches in residual, out and the caches.
struct MatvecBindings {
  BufferBinding x, weight, bias, residual, out;
  LinearNorm norm;
  BufferBinding k_cache, v_cache, kv_table;
};
struct MatvecExtents {
  uint64_t residual, out, cache;
  uint32_t cache_bytes = 4;  // bytes per cache element (kv_bytes)
  uint64_t table = 1;        // block-table entries (ROPE)
};

// Checks the norm fusions' flags against their operands.
void check_norms(const std::string& shapes, const LinearParams& p, const LinearNorm& norm, bool rope) {
  auto error = [&](const char* what) { fail("kernel 'linear_matvec_sg' ({}): {}", shapes, what); };
  if (p.norm_x > kNormPrepared) error("norm_x must be 0, 1 (weighted here) or 2 (x prepared by norm_out)");
  if (p.norm_out > 1) error("norm_out must be 0 or 1");
  if (p.norm_x == kNormWeighted && !norm.weight.buffer) error("norm_x 1 needs the norm's weight operand");
  if (p.norm_x == kNormPrepared && !norm.raw_x.buffer) error("norm_x 2 needs the raw x operand");
  if (p.norm_out && (!norm.weight.buffer || !norm.prepared.buffer))
    error("norm_out needs the next norm's weight and a prepared output operand");
  if (p.norm_out && (p.norm_x || p.gate_act || rope))
    error("norm_out goes with a plain product (no norm_x, gate activation or rotary epilogue)");
}

Dispatch subgroup_matvec(gpu::Device& device, std::string shapes, const MatvecBindings& b, const LinearParams& p,
                         WeightType type, MatvecBlocking blocking, MatvecExtents extents, gpu::Constants rope) {
  check_norms(shapes, p, b.norm, !rope.empty());
  MatvecGrid grid = subgroup_matvec_grid(device, p, blocking);
  gpu::Constants constants = {{"WEIGHT_TYPE", double(type)},  {"ROWS", double(p.M)},
                              {"COLS", double(blocking.columns)}, {"SPLIT", double(blocking.split)},
                              {"UNROLL", double(blocking.unroll)},
                              {"GATE_ACT", double(p.gate_act)},   {"NORM_X", double(p.norm_x)},
                              {"NORM_OUT", double(p.norm_out)},
                              {"LOOPS", grid.loops ? 1.0 : 0.0}};
  constants.insert(constants.end(), rope.begin(), rope.end());
  // Binding 5 is the norm's weight, or the raw x for a prepared one; 6 the prepared output or the k cache.
  uint64_t out_count = count_of(p.M, p.out_stride);
  Operand norm_in = {"norm_weight", b.norm.weight.buffer ? b.norm.weight : b.x, 1};
  if (p.norm_x == kNormWeighted) norm_in.elements = p.K;
  if (p.norm_x == kNormPrepared) norm_in = {"raw_x", b.norm.raw_x, count_of(p.M, p.K)};
  if (p.norm_out) norm_in.elements = p.out_stride;
  Operand sixth = p.norm_out ? Operand{"prepared", b.norm.prepared, out_count}
                             : Operand{"k_cache", b.k_cache, extents.cache, extents.cache_bytes};
  return prepare(device, "linear_matvec_sg", std::move(shapes),
                 {{"x", b.x, count_of(p.M, p.K)},
                  weight_operand("W", b.weight, p.N, p.K, type),
                  {"bias", b.bias, used(p.has_bias, p.N)},
                  {"residual", b.residual, extents.residual},
                  {"out", b.out, extents.out},
                  norm_in,
                  sixth,
                  {"v_cache", b.v_cache, extents.cache, extents.cache_bytes},
                  {"kv_table", b.kv_table.buffer ? b.kv_table : b.x, extents.table}},
                 p, grid.grid, constants);
}

}  // namespace

MatvecBlocking linear_matvec_blocking(const gpu::Device& device, uint32_t K, uint32_t N, WeightType type,
                                      MatvecBlocking requested, bool norm_x) {
  auto shapes = [&] { return fmt::format("K={} N={} type={}", K, N, name_of(type)); };
  if (K == 0 || N == 0) fail("kernel 'linear_matvec_sg' ({}): K and N must be positive", shapes());
  if (is_block_type(type))
    fail("kernel 'linear_matvec_sg' ({}): block types decode in linear_q_matvec (see linear_q_matvec_blocking)",
         shapes());
  MatvecBlocking b = requested;
  constexpr uint64_t kMatvecTaskBytes = 16384, kMatvecTasks = 8192;
  uint64_t row_bytes = uint64_t(K) * weight_bytes(type);
  bool fixed_columns = b.columns != 0;
  if (b.columns == 0) b.columns = N / 2 >= kMatvecTasks && 2 * row_bytes <= kMatvecTaskBytes ? 2 : 1;
  uint32_t lanes = std::max<uint32_t>(1, device.adapter().subgroup_max_size);
  uint32_t max_split = std::max<uint32_t>(1, kWorkgroupSize / lanes);
  // The most subgroups a group is split over: a share never shorter than one 16-byte piece per lane.
  uint32_t most = uint32_t(std::bit_floor(
      std::clamp<uint64_t>(row_bytes / 16 / lanes, 1, std::min<uint64_t>(kMaxMatvecSplit, max_split))));
  // Rows of at least 8 KiB (Llama-3-8B's, K >= 4096 in f16; Qwen2.5-0.5B's down): each column group is one
  // workgroup's unit (at 32 lanes), all its subgroups sharing the rows with one load in flight per lane, over
  // a grid of the workgroups an H200 holds at once, each looping over units w, w + 1056, ...: llama3-8b tg128
  // 213.6 tok/s
  // against 203.9 with the rule below (one workgroup per unit of several groups), 187.5 for the small units
  // without the cap, 205.6 capped at 2,112, 177.5 at 528 with two loads (run 70). A workgroup's tail is then
  // one 16 KiB unit, where a grid of larger units leaves SMs idle as it drains (bench_dispatch_chain, runs 67
  // and 69: 129 dispatches of 16 KiB blocks over 1,056 resident workgroups 4.10-4.15 ms, one workgroup per
  // 128 KiB block 4.79-4.97 ms).
  bool resident = row_bytes >= kResidentMatvecRowBytes && b.split == 0 && b.unroll == 0;
  if (resident) {
    b.split = most;
    b.unroll = 1;
    if (b.workgroups == 0) b.workgroups = tuning(device).resident_workgroups;
  }
  // Shorter rows, from run 23's sweep of blockings on an H200 with the weights cold in the cache, as decoding
  // reads them (docs/PERFORMANCE.md): a subgroup's task (the weights it streams for one column group) should
  // be at most kMatvecTaskBytes and there should be about kMatvecTasks tasks. So two columns per group only
  // where the pairs alone are that many (the LM heads), else one, then each group split over just enough
  // subgroups (Qwen2.5-0.5B's o: 2). A caller that fixes the columns (the gate|up and rotary pairs) gets its
  // groups split for size only: Qwen's 3.5 KiB gate|up pairs ran 25 % slower in two. So is a product with a
  // fused norm: Llama's o shape with a norm took 24.4 us split in two, 19.4 us whole (runs 25, 23; before the
  // rule above took that shape). One 16-byte load in flight per lane and column measured fastest (the
  // compiler overlaps the loop's iterations), except for pairs split over subgroups: four there (one ran up to
  // 2x slower).
  if (b.split == 0) {
    uint64_t groups = ceil_div(N, b.columns);
    auto too_big = [&] { return b.columns * row_bytes / b.split > kMatvecTaskBytes; };
    auto too_few = [&] { return !fixed_columns && !norm_x && groups * b.split < kMatvecTasks; };
    for (b.split = 1; b.split < most && (too_big() || too_few());) b.split *= 2;
  }
  if (b.unroll == 0) b.unroll = b.columns >= 2 && b.split >= 2 ? 4 : 1;
  if (b.unroll > kMaxMatvecUnroll)
    fail("kernel 'linear_matvec_sg' ({}): {} loads in flight per lane requested, at most {}", shapes(), b.unroll,
         kMaxMatvecUnroll);
  if (b.columns > kMaxMatvecColumns)
    fail("kernel 'linear_matvec_sg' ({}): {} columns per group requested, at most {}", shapes(), b.columns,
         kMaxMatvecColumns);
  if (!std::has_single_bit(b.split) || b.split > max_split)
    fail("kernel 'linear_matvec_sg' ({}): split {} must be a power of two of at most {} (256 / subgroup size {})",
         shapes(), b.split, max_split, lanes);
  return b;
}

bool linear_can_fuse(const gpu::Device& device, uint32_t M, uint32_t K, WeightType type) {
  // Lane m of a group writes row m (M <= 4).
  return !is_block_type(type) && has_subgroups(device) && use_matvec(M) &&
         (uint64_t(K) * weight_bytes(type)) % 16 == 0;
}

bool linear_fuses(const gpu::Device& device, uint32_t M, uint32_t K, uint32_t N, WeightType type) {
  return linear_can_fuse(device, M, K, type) && !use_linear_rows(device, {M, K, N}, type);
}

bool linear_gates(const gpu::Device& device, uint32_t M, uint32_t K, uint32_t N, WeightType type) {
  return N % 2 == 0 && (linear_can_fuse(device, M, K, type) || use_linear_rows(device, {M, K, N}, type));
}

MatvecBlocking linear_q_matvec_blocking(const gpu::Device& device, uint32_t N, WeightType type,
                                        MatvecBlocking requested) {
  auto shapes = [&] { return fmt::format("N={} type={}", N, name_of(type)); };
  MatvecBlocking b = requested;
  // Two columns per team (each piece of x read and summed once for both), teams of kQuantTeam lanes, more lanes
  // only while the grid is under one workgroup per SM (the adapter's resident workgroups / 8): the kernel is
  // bound by its instructions per element, not by filling the GPU. H200, llama down (K = 14336, N = 4096, 256
  // workgroups at 2 columns, 32 lanes), bench kernels 2026-12-02, with the earlier kernel whose lanes shared
  // chunks: Q4_0 0.0327 ms against 0.0389 for one column in teams of 64 (1,024 workgroups), 0.0374 for four
  // columns and 0.0443 for the earlier rule's choice; Q4_K 0.0402 against 0.0448 and 0.0482.
  // Four columns where that still leaves half the resident workgroups: every workgroup stages all of x, so
  // twice the columns halve the x staged per weight byte. H200, 2026-12-03 (bench kernels, the kernel with
  // whole chunks a lane): llama gate_up (N = 28672, 896 workgroups at 4 columns) Q4_0 0.0503 -> 0.0494 ms, Q4_K
  // 0.0559 -> 0.0526; down, qkv and o (128-192 workgroups of 4 columns at 32 lanes) 15-22 % slower, and no
  // blocking of 4 columns faster than 2 there. tg128: 8B Q4_0 253.1 -> 257.2, Q4_K_M 224.0 -> 230.1, 4 sequences
  // of Q4_0 565.8 -> 599.9.
  uint64_t resident = tuning(device).resident_workgroups;
  uint64_t sms = std::max<uint64_t>(1, resident / 8);
  auto grid = [&](uint64_t team) { return ceil_div(uint64_t(N) * team, uint64_t(b.columns) * kWorkgroupSize); };
  if (b.columns == 0) {
    b.columns = 4;
    if (grid(kQuantTeam) < resident / 2) b.columns = 2;
  }
  if (b.split == 0)
    for (b.split = kQuantTeam; b.split < kWorkgroupSize && grid(b.split) < sms;) b.split *= 2;
  // Two chunks a lane in flight, their loads issued together; one at four columns, whose words then fill the
  // registers (the gate_up rows above: Q4_0 0.0517 ms with two, Q4_K 0.0555).
  if (b.unroll == 0) b.unroll = b.columns < 4 ? 2 : 1;
  if (b.columns > kMaxMatvecColumns)
    fail("kernel 'linear_q_matvec' ({}): {} columns per team requested, at most {}", shapes(), b.columns,
         kMaxMatvecColumns);
  if (b.unroll > 2)
    fail("kernel 'linear_q_matvec' ({}): {} chunks a lane in flight requested; 1 or 2", shapes(), b.unroll);
  // Lane c * M + m of a team stores column c of row m: at least 16 lanes.
  if (!std::has_single_bit(b.split) || b.split < 16 || b.split > kWorkgroupSize)
    fail("kernel 'linear_q_matvec' ({}): a team of {} lanes requested; a power of two from 16 to {}", shapes(),
         b.split, kWorkgroupSize);
  return b;
}

namespace {

// linear_q_matvec.wgsl: decoding with block-quantized weights (`blocking` as linear_q_matvec_blocking).
Dispatch quant_matvec(gpu::Device& device, std::string shapes, BufferBinding x, BufferBinding weight,
                      BufferBinding bias, BufferBinding residual, BufferBinding out, const LinearParams& p,
                      WeightType type, MatvecBlocking blocking) {
  MatvecBlocking b = linear_q_matvec_blocking(device, p.N, type, blocking);
  uint64_t out_count = count_of(p.M, p.out_stride);
  return prepare(device, "linear_q_matvec", std::move(shapes),
                 {{"x", x, count_of(p.M, p.K)},
                  weight_operand("W", weight, p.N, p.K, type),
                  {"bias", bias, used(p.has_bias, p.N)},
                  {"residual", residual, used(p.has_residual, out_count)},
                  {"out", out, out_count}},
                 p, fold(ceil_div(p.N, uint64_t(b.columns) * (kWorkgroupSize / b.split))),
                 {{"WEIGHT_TYPE", double(type)},
                  {"ROWS", double(p.M)},
                  {"COLS", double(b.columns)},
                  {"TEAM", double(b.split)},
                  {"IN_FLIGHT", double(b.unroll)}});
}

// linear() in the given arithmetic, which only the tiled prompt kernel honours (the other paths are f32).
Dispatch linear_in(gpu::Device& device, BufferBinding x, BufferBinding weight, BufferBinding bias,
                   BufferBinding residual, BufferBinding out, const LinearParams& p, WeightType type,
                   const LinearNorm& norm, MatvecBlocking blocking, Arithmetic arithmetic) {
  auto shapes = linear_shapes(p, type);
  check_weight_type("linear", shapes, type);
  check_block_rows("linear", shapes, type, p.K);
  if (p.gate_act > 2) fail("kernel 'linear' ({}): gate_act must be 0, 1 (SiLU) or 2 (GELU)", shapes);
  if (p.gate_act && p.N % 2 != 0)
    fail("kernel 'linear' ({}): gate_act needs N = gate rows + up rows, an even count", shapes);
  if (p.gate_act && p.has_residual) fail("kernel 'linear' ({}): gate_act takes no residual", shapes);
  // A gated projection writes one act(gate) * up column per gate|up pair of rows.
  check_linear("linear", shapes, p.M, p.K, p.gate_act ? p.N / 2 : p.N, p.out_stride, p.out_col);
  // linear_rows.wgsl fuses a gate activation; the subgroup decode variant fuses that and the norms.
  bool rows = use_linear_rows(device, p, type);
  if ((p.gate_act || p.norm_x || p.norm_out) && !rows && !use_subgroup_matvec(device, p, type))
    fail("kernel 'linear' ({}): a fused norm or gate activation needs the subgroup decode variant or a batched "
         "step's linear_rows (see linear_can_fuse, linear_gates)", shapes);
  uint64_t out_count = count_of(p.M, p.out_stride);
  uint64_t x_count = count_of(p.M, p.K);
  std::initializer_list<Operand> operands = {{"x", x, x_count},
                                             weight_operand("W", weight, p.N, p.K, type),
                                             {"bias", bias, used(p.has_bias, p.N)},
                                             {"residual", residual, used(p.has_residual, out_count)},
                                             {"out", out, out_count}};
  if (rows) {
    RowsBlocking requested{blocking.columns, blocking.split, blocking.unroll, blocking.workgroups};
    RowsBlocking b = linear_rows_blocking(device, p.M, p.N, type, requested, p.gate_act != 0);
    return prepare(device, "linear_rows", shapes, operands, p, linear_rows_grid(device, p, type, requested),
                   {{"WEIGHT_TYPE", double(type)},
                    {"ROWS", double(p.M)},
                    {"COLS", double(b.columns)},
                    {"LANES", double(b.lanes)},
                    {"UNROLL", double(b.unroll)},
                    {"TEAMS", double(b.teams)},
                    {"GATE_ACT", double(p.gate_act)}});
  }
  if (is_block_type(type) && use_matvec(p.M))
    return quant_matvec(device, shapes, x, weight, bias, residual, out, p, type, blocking);
  if (use_subgroup_matvec(device, p, type)) {
    // The gate and up rows of an output are the two columns of one group.
    if (p.gate_act) blocking = paired_blocking("linear", shapes, "gate_act", blocking);
    // The cache bindings are only the ROPE epilogue's.
    return subgroup_matvec(device, shapes,
                           {x, weight, bias, residual, out, norm, device.placeholder(0), device.placeholder(1)},
                           p, type,
                           linear_matvec_blocking(device, p.K, p.N, type, blocking, p.norm_x != 0),
                           {used(p.has_residual, out_count), out_count, 1}, {});
  }
  if (use_linear_tiled(p))
    return linear_tiled(device, shapes, {x, weight, bias, residual, out, device.placeholder(0)}, p, type, 0,
                        arithmetic);
  return prepare(device, "linear", shapes, operands, p, linear_grid(p, tuning(device).resident_tiles),
                 {{"WEIGHT_TYPE", double(type)}, {"MATVEC", use_matvec(p.M) ? 1.0 : 0.0}});
}

}  // namespace

Dispatch linear(gpu::Device& device, BufferBinding x, BufferBinding weight, BufferBinding bias,
                BufferBinding residual, BufferBinding out, const LinearParams& p, WeightType type,
                const LinearNorm& norm, MatvecBlocking blocking) {
  return linear_in(device, x, weight, bias, residual, out, p, type, norm, blocking, Arithmetic::F32);
}

std::vector<Dispatch> linear_split_k(gpu::Device& device, BufferBinding x, BufferBinding weight, BufferBinding bias,
                                     BufferBinding residual, BufferBinding out, const LinearParams& p,
                                     WeightType type, BufferBinding scratch, uint32_t requested,
                                     Arithmetic arithmetic) {
  // linear_rows.wgsl reads each weight once for all of a batched decode step's rows: it shares nothing out.
  bool rows = use_linear_rows(device, p, type);
  if ((p.gate_act && !rows) || p.norm_x || p.norm_out)
    fail("kernel 'linear' (M={} K={} N={}): linear_split_k's tiles fuse no norm or gate (a batched step's "
         "linear_rows fuses a gate)", p.M, p.K, p.N);
  if (rows && requested != 0)
    fail("kernel 'linear' ({}): {} split workers requested; this product of {} weights (a batched decode step of "
         "at most {} rows) runs linear_rows.wgsl, which shares nothing out", linear_shapes(p, type), requested,
         weight_type_name(type), kLinearRowsMax);
  uint32_t workers = rows ? 0 : linear_split_workers(device, p, requested);
  std::vector<Dispatch> dispatches;
  if (workers == 0) {
    dispatches.push_back(linear_in(device, x, weight, bias, residual, out, p, type, {}, {}, arithmetic));
    return dispatches;
  }
  auto shapes = fmt::format("{} workers={}", linear_shapes(p, type), workers);
  check_weight_type("linear", shapes, type);
  check_block_rows("linear", shapes, type, p.K);
  check_linear("linear", shapes, p.M, p.K, p.N, p.out_stride, p.out_col);
  uint64_t out_count = count_of(p.M, p.out_stride);
  LinearTile tile = device_tile(device, p, true);
  dispatches.push_back(
      linear_tiled(device, shapes, {x, weight, bias, residual, out, scratch}, p, type, workers, arithmetic));
  dispatches.push_back(prepare(device, "linear_split_sum", shapes,
                               {{"partials", scratch, partial_floats(tile, workers)},
                                {"bias", bias, used(p.has_bias, p.N)},
                                {"residual", residual, used(p.has_residual, out_count)},
                                {"out", out, out_count}},
                               p, fold(uint64_t(workers - 1) * tile.rows * tile.cols / kWorkgroupSize),
                               shares_constants(tile, workers)));
  return dispatches;
}

bool linear_qkv_rope_fits(const gpu::Device& device) { return device.limits().maxStorageBuffersPerShaderStage >= 9; }

Dispatch linear_qkv_rope(gpu::Device& device, BufferBinding x, BufferBinding weight, BufferBinding bias,
                         BufferBinding rope_table, BufferBinding q_out, BufferBinding k_cache, BufferBinding v_cache,
                         const KvBlocks& blocks, const LinearParams& p, WeightType type, const LinearNorm& norm,
                         const QkvHeads& s, MatvecBlocking blocking) {
  auto shapes = fmt::format(
      "M={} K={} N={} type={} heads={}/{} head_dim={} rotary_dim={} position={} capacity={} kv={} {}", p.M, p.K, p.N,
      name_of(type), s.q_heads, s.kv_heads, s.head_dim, s.rotary_dim, p.position, s.capacity, kv_type_name(s.kv),
      blocks_shapes(blocks));
  if (!linear_qkv_rope_fits(device))
    fail("kernel 'linear_qkv_rope' ({}): needs 9 storage buffers per shader stage, the adapter allows {}", shapes,
         device.limits().maxStorageBuffersPerShaderStage);
  uint64_t pool = kv_pool_elements("linear_qkv_rope", shapes, blocks, 1, uint64_t(s.kv_heads) * s.head_dim);
  check_weight_type("linear_qkv_rope", shapes, type);
  check_linear("linear_qkv_rope", shapes, p.M, p.K, p.N, p.N, 0);
  if (!linear_can_fuse(device, p.M, p.K, type))
    fail("kernel 'linear_qkv_rope' ({}): needs the subgroup decode variant (see linear_can_fuse)", shapes);
  check_heads("linear_qkv_rope", shapes, s, p.position, p.M);
  if (s.head_dim % 2 != 0)
    fail("kernel 'linear_qkv_rope' ({}): head_dim must be even (dims pair up in column groups)", shapes);
  if (!qkv_rope_fusable(s))
    fail("kernel 'linear_qkv_rope' ({}): an f16 cache needs head_dim and rotary_dim multiples of 4 (a lane stores "
         "the words of two rotary pairs); use linear and qkv_rope_store", shapes);
  if (uint64_t(p.N) != (uint64_t(s.q_heads) + 2ull * s.kv_heads) * s.head_dim)
    fail("kernel 'linear_qkv_rope' ({}): N must be (q_heads + 2 kv_heads) * head_dim", shapes);
  if (p.has_residual || p.gate_act)
    fail("kernel 'linear_qkv_rope' ({}): no residual or gate activation on the q|k|v projection", shapes);
  // The pairs of a head's rotation are the columns of one group: one pair, or two for an f16 cache.
  uint32_t columns = s.kv == KvType::F16 ? 4 : 2;
  blocking = linear_matvec_blocking(
      device, p.K, p.N, type, paired_blocking("linear_qkv_rope", shapes, "the rotary epilogue", blocking, columns));
  return subgroup_matvec(device, shapes, {x, weight, bias, rope_table, q_out, norm, k_cache, v_cache, blocks.table}, p,
                         type, blocking,
                         {used(s.rotary_dim, rope_table_length(s.rotary_dim)), count_of(p.M, s.q_heads) * s.head_dim, pool,
                          kv_bytes(s.kv), kv_table_operand(blocks, s.capacity).elements},
                         {{"ROPE", 1.0},
                          {"KV_TYPE", double(s.kv)},
                          block_constant(blocks),
                          {"Q_HEADS", double(s.q_heads)},
                          {"KV_HEADS", double(s.kv_heads)},
                          {"HEAD_DIM", double(s.head_dim)},
                          {"ROTARY_DIM", double(s.rotary_dim)}});
}

Dispatch gated_act(gpu::Device& device, BufferBinding gate_up, BufferBinding out, const GatedActParams& p) {
  auto shapes = fmt::format("T={} I={} activation={}", p.seq_len, p.intermediate, p.activation);
  if (p.activation > 1) fail("kernel 'gated_act' ({}): activation must be 0 (SiLU) or 1 (GELU-tanh)", shapes);
  uint64_t n = count_of(p.seq_len, p.intermediate);
  bool vec4 = p.intermediate % 4 == 0;  // gated_act_vec4.wgsl: rows of whole vec4s
  return prepare(device, vec4 ? "gated_act_vec4" : "gated_act", shapes, {{"gate_up", gate_up, 2 * n}, {"out", out, n}},
                 p, fold(ceil_div(vec4 ? n / 4 : n, kWorkgroupSize)));
}

Dispatch qkv_rope_store(gpu::Device& device, BufferBinding qkv, BufferBinding q_norm, BufferBinding k_norm,
                        BufferBinding rope_table, BufferBinding q_out, BufferBinding k_cache,
                        BufferBinding v_cache, const KvBlocks& blocks, const QkvRopeParams& p, uint32_t cache_capacity,
                        KvType kv) {
  auto shapes = fmt::format("T={} heads={}/{} head_dim={} rotary_dim={} offset={} qk_norm={} capacity={} kv={} {}",
                            p.seq_len, p.num_q_heads, p.num_kv_heads, p.head_dim, p.rotary_dim,
                            p.position_offset, p.use_qk_norm, cache_capacity, kv_type_name(kv), blocks_shapes(blocks));
  if (p.head_dim > kMaxHeadDim) fail("kernel 'qkv_rope_store' ({}): head_dim must be at most {}", shapes, kMaxHeadDim);
  check_heads("qkv_rope_store", shapes,
              {p.num_q_heads, p.num_kv_heads, p.head_dim, p.rotary_dim, cache_capacity, kv}, p.position_offset,
              p.seq_len);
  uint64_t cache = kv_pool_elements("qkv_rope_store", shapes, blocks, 1, uint64_t(p.num_kv_heads) * p.head_dim);
  return prepare(device, "qkv_rope_store", shapes,
                 {{"qkv", qkv, count_of(p.seq_len, p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim},
                  {"q_norm", q_norm, used(p.use_qk_norm, p.head_dim)},
                  {"k_norm", k_norm, used(p.use_qk_norm, p.head_dim)},
                  {"rope_table", rope_table, used(p.rotary_dim, rope_table_length(p.rotary_dim))},
                  {"q_out", q_out, count_of(p.seq_len, p.num_q_heads) * p.head_dim},
                  kv_pool_operand("k_cache", k_cache, cache, kv, p.head_dim),
                  kv_pool_operand("v_cache", v_cache, cache, kv, p.head_dim),
                  kv_table_operand(blocks, cache_capacity)},
                 p, fold(count_of(p.seq_len, p.num_q_heads + p.num_kv_heads)),
                 cache_constants(kv, cache, blocks));
}

namespace {

constexpr uint32_t kSplitGranule = 128;  // flash_attention.wgsl CHUNK_GRANULE: split chunks are multiples of it
constexpr uint32_t kMaxSplits = 64;      // bounds the scratch buffer and the combine's loop

std::string flash_shapes(const FlashAttentionParams& p, KvType kv, const KvBlocks& blocks) {
  return fmt::format("T={} S={} heads={}/{} head_dim={} offset={} window={} kv={} {}", p.T, p.S, p.num_q_heads,
                     p.num_kv_heads, p.head_dim, p.position_offset, p.window, kv_type_name(kv), blocks_shapes(blocks));
}

// The key tiles of the attention kernels (kv_blocks.wgsl): blocks must hold whole tiles.
constexpr uint32_t kFlashTile = 256;     // flash_attention.wgsl TILE
constexpr uint32_t kFlashSgKeys = 4;     // flash_attention_sg.wgsl KEYS, a row group's keys per round

// The operands of every flash attention variant: Q, the pools and `out` (or the partial records), then the block
// table covering `keys` keys.
std::vector<Operand> flash_operands(BufferBinding Q, BufferBinding K, BufferBinding V, Operand out,
                                    const KvBlocks& blocks, uint64_t pool, uint64_t q, uint64_t keys, KvType kv,
                                    uint32_t head_dim) {
  return {{"Q", Q, q}, kv_pool_operand("K", K, pool, kv, head_dim), kv_pool_operand("V", V, pool, kv, head_dim), out,
          kv_table_operand(blocks, keys)};
}

void check_flash(const std::string& shapes, const FlashAttentionParams& p, KvType kv) {
  check_kv_type("flash_attention", shapes, kv, p.head_dim);
  if (p.num_kv_heads == 0 || p.num_q_heads % p.num_kv_heads != 0)
    fail("kernel 'flash_attention' ({}): q_heads must be a positive multiple of kv_heads", shapes);
  if (p.head_dim == 0 || p.head_dim > kMaxHeadDim)
    fail("kernel 'flash_attention' ({}): head_dim must be in 1..{}", shapes, kMaxHeadDim);
  if (p.T == 0) fail("kernel 'flash_attention' ({}): T must be positive", shapes);
  if (uint64_t(p.position_offset) + p.T > p.S)
    fail("kernel 'flash_attention' ({}): queries reach position {} but only S={} keys exist", shapes,
         uint64_t(p.position_offset) + p.T - 1, p.S);
}

// flash_attention_block.wgsl's blocking (FlashBlocking): more rows or keys a thread mean more arithmetic per
// workgroup-memory read but more workgroup memory (flash_block_bytes) and, for rows, fewer workgroups.

uint32_t flash_block_rows(FlashBlocking b) { return 8 * b.rows_per_thread; }

// The shader's workgroup memory: queries, the K / V tile (f32 values, or an f16 cache's words: half the floats;
// the other array keeps one element), the softmax weights and the row reductions.
uint64_t flash_block_bytes(FlashBlocking b, uint32_t head_dim, KvType kv) {
  uint64_t row = 4 * ceil_div(head_dim, 4) + 4;  // floats per staged Q / K / V row
  uint64_t rows = flash_block_rows(b), keys = 16 * b.keys_per_thread;
  uint64_t tile = kv == KvType::F16 ? keys * row / 2 + 4 : keys * row + 4;  // + the other's element, 16 bytes
  return 4 * (rows * row + tile + rows * (keys + 4) + rows * 16);
}

constexpr uint64_t kFlashMaxStage = 32;  // flash_attention_block.wgsl MAX_STAGE

// The cache words each of the shader's 128 threads stages in registers of a K / V tile (its STAGE): rows padded
// to whole vec4s, 1, 2 or 4 elements a word (f32, f16, q8).
uint64_t flash_block_stage_words(FlashBlocking b, uint32_t head_dim, KvType kv) {
  uint64_t row_words = 4 * ceil_div(head_dim, 4) / (4 / kv_bytes(kv));
  return ceil_div(16 * b.keys_per_thread * row_words, 128);
}

// 4 keys a thread (64-key tiles) only for an f16 cache's tiles of words and heads of at least 128 dims (in effect
// 128 alone: past it, a 64-key tile is more than kFlashMaxStage words a thread). On an H100
// (2026-12-07, bench/device/session53_sweep.sh) Llama-3-8B's heads (128) gained with 4 x 4 over 4 x 2 (pp8192
// 2,143.6 -> 2,245.8 tok/s, its attention about 14 % faster); at Qwen2.5-0.5B's 64 every cache type lost (f16
// 0.5435 -> 0.6373 ms at T = S = 2,048; pp8192 23,216.6 -> 22,088.2), and f32 and q8 tiles of 64 keys (f32 values,
// twice the bytes) lost more.
constexpr uint32_t kFlashFourKeysMinHeadDim = 128;

// The first blocking, most reuse first, whose workgroup memory fits the device: an f16 cache's 4 x 4 needs 43.5
// KiB at head_dim 128 (H100 and H200: 48 KiB) and its 4 x 2 31.3 KiB; an f32 cache's (f32 or q8 tiles) at 64,
// 4 x 2 23.5 KiB; at 128, 4 x 2 39.5 KiB and 4 x 1 29.3 KiB; at 256, 2 x 1 34.8 KiB and 1 x 1 25.5 KiB. Four
// rows per thread are taken only where their blocks fill a wave of the adapter's resident workgroups
// (tuning().resident_tiles, as many as of the tiled products, which hold as many registers); a prompt with fewer
// (Qwen2.5-0.5B at T = 512 on an H200: 224 of 264) takes 2 rows per thread for more workgroups in flight. Each
// thread's share of a tile must fit the shader's stage of kFlashMaxStage cache words: 32-key tiles of an f32 cache
// up to head_dim 128 (16 keys past it), of an f16 or q8 cache at every head_dim (an f16 cache's 64-key tiles up
// to 128).
// Returns {0, 0} when none fits. A requested blocking (not both zero) is returned as it is, or refused.
FlashBlocking flash_block_shape(const gpu::Device& device, const FlashAttentionParams& p, KvType kv,
                             FlashBlocking requested = {}) {
  if (requested.rows_per_thread || requested.keys_per_thread) {
    auto one_of_124 = [](uint32_t n) { return n == 1 || n == 2 || n == 4; };
    std::string what = fmt::format("kernel 'flash_attention' (T={} head_dim={} kv={}): blocking {} x {}", p.T,
                                   p.head_dim, kv_type_name(kv), requested.rows_per_thread, requested.keys_per_thread);
    if (!one_of_124(requested.rows_per_thread) || !one_of_124(requested.keys_per_thread))
      fail("{}: rows and keys a thread must each be 1, 2 or 4", what);
    if (p.T < kFlashBlockMinQueries)
      fail("{}: the block kernel runs from {} queries, not {}", what, kFlashBlockMinQueries, p.T);
    if (uint64_t words = flash_block_stage_words(requested, p.head_dim, kv); words > kFlashMaxStage)
      fail("{}: a tile is {} cache words a thread, more than the shader's {}", what, words, kFlashMaxStage);
    if (uint64_t bytes = flash_block_bytes(requested, p.head_dim, kv);
        bytes > device.limits().maxComputeWorkgroupStorageSize)
      fail("{}: needs {} bytes of workgroup memory, more than the device's {}", what, bytes,
           device.limits().maxComputeWorkgroupStorageSize);
    return requested;
  }
  uint64_t rows = uint64_t(p.T) * (p.num_q_heads / std::max(1u, p.num_kv_heads));
  bool fill = ceil_div(rows, flash_block_rows({4, 1})) * p.num_kv_heads >= tuning(device).resident_tiles;
  for (FlashBlocking b : std::initializer_list<FlashBlocking>{{4, 4}, {4, 2}, {4, 1}, {2, 4}, {2, 2}, {2, 1}, {1, 1}}) {
    if (b.rows_per_thread == 4 && !fill) continue;
    if (b.keys_per_thread == 4 && (kv != KvType::F16 || p.head_dim < kFlashFourKeysMinHeadDim)) continue;
    if (flash_block_stage_words(b, p.head_dim, kv) > kFlashMaxStage) continue;
    if (flash_block_bytes(b, p.head_dim, kv) <= device.limits().maxComputeWorkgroupStorageSize) return b;
  }
  return {0, 0};
}

bool use_flash_block(const gpu::Device& device, const FlashAttentionParams& p, KvType kv,
                     FlashBlocking requested = {}) {
  if (requested.rows_per_thread || requested.keys_per_thread)
    return flash_block_shape(device, p, kv, requested).rows_per_thread != 0;  // or throws
  return p.T >= kFlashBlockMinQueries && flash_block_shape(device, p, kv).rows_per_thread != 0;
}

// flash_attention_block.wgsl's split mode, for a prompt chunk deep in a long cache: a 512-token chunk of
// Qwen2.5-0.5B has 224 blocks of 32 rows, a few per SM of an H200, each walking up to `capacity` keys; cut
// into chunks, about a wave of the adapter's resident workgroups (tuning().resident_workgroups; an H200:
// 1,056) share them. Counted at 32 rows a block, whatever blocking the device gets (the blocking depends on the
// cache's type, which flash_attention_scratch_bytes is not given). Chunks keep at least kFlashBlockMinChunk keys
// at capacity, and a step splits only once its keys reach kFlashBlockSplitKeys (flash_attention_split_serves),
// where the blocks are long enough for the combine dispatch to pay.
constexpr uint32_t kFlashBlockMaxSplits = 8;
constexpr uint32_t kFlashBlockMinChunk = 1024;
constexpr uint32_t kFlashBlockSplitKeys = 2048;

uint32_t flash_block_splits(const gpu::Device& device, const FlashAttentionParams& p, uint32_t capacity) {
  uint64_t rows = uint64_t(p.T) * (p.num_q_heads / std::max(1u, p.num_kv_heads));
  uint64_t workgroups = ceil_div(rows, 32) * std::max(1u, p.num_kv_heads);
  uint64_t wave = tuning(device).resident_workgroups;
  uint64_t wanted = std::min(ceil_div(wave, workgroups), uint64_t(capacity / kFlashBlockMinChunk));
  return uint32_t(std::clamp<uint64_t>(wanted, 1, kFlashBlockMaxSplits));
}

// The query-block kernel (use_flash_block), whole (splits 1) or in split mode writing partial records.
Dispatch block_attention(gpu::Device& device, std::string shapes, const std::vector<Operand>& operands,
                         const FlashAttentionParams& p, uint32_t splits, KvType kv, const KvBlocks& kv_blocks,
                         FlashBlocking requested) {
  FlashBlocking block = flash_block_shape(device, p, kv, requested);
  uint64_t pool = kv_pool_elements("flash_attention_block", shapes, kv_blocks, 16 * block.keys_per_thread,
                                   uint64_t(p.num_kv_heads) * p.head_dim);
  uint64_t rows = uint64_t(p.T) * (p.num_q_heads / p.num_kv_heads);
  uint64_t blocks = ceil_div(rows, flash_block_rows(block));
  Grid grid = splits > 1 ? Grid{uint32_t(blocks), p.num_kv_heads, splits}
                         : Grid{fold(blocks).x, p.num_kv_heads, fold(blocks).y};
  return prepare(device, "flash_attention_block", std::move(shapes), operands, p, grid,
                 cache_constants(kv, pool, kv_blocks,
                             {{"HEAD_DIM", double(p.head_dim)},
                              {"ROWS_PER_THREAD", double(block.rows_per_thread)},
                              {"KEYS_PER_THREAD", double(block.keys_per_thread)},
                              {"SPLITS", double(splits)}}));
}

// flash_attention_sg.wgsl: the row lanes that read a K / V row together, its 16-byte words rounded up to a
// power of two and at most the smallest subgroup (a narrower row leaves the other lanes to other rows);
// row lane l holds the vec4 pieces l, l + row lanes, ... of a row (of an f16 cache, the pairs of pieces in its
// words l, l + row lanes, ...), at most 8 (its registers), so head_dim <= 32 x the smallest subgroup size.
constexpr uint32_t kFlashSgMaxPieces = 8;

struct FlashSgLanes {
  uint32_t row_lanes, pieces;
};

FlashSgLanes flash_sg_lanes(const gpu::Device& device, const FlashAttentionParams& p, KvType kv) {
  uint32_t pieces_per_word = 16 / (4 * kv_bytes(kv));
  uint32_t words = uint32_t(ceil_div(p.head_dim, 4 * pieces_per_word));
  uint32_t row_lanes = std::min(std::bit_ceil(words), std::max(1u, device.adapter().subgroup_min_size));
  return {row_lanes, pieces_per_word * uint32_t(ceil_div(words, row_lanes))};
}

// The per-query kernels: flash_attention_sg.wgsl where the adapter has subgroups and rows are whole 16-byte
// words, else flash_attention.wgsl; both take the same grid and write the same records in split mode.
// A q8 cache takes flash_attention.wgsl: flash_attention_sg.wgsl does not decode it.
bool use_flash_sg(const gpu::Device& device, const FlashAttentionParams& p, KvType kv) {
  return kv != KvType::Q8 && has_subgroups(device) && (uint64_t(p.head_dim) * kv_bytes(kv)) % 16 == 0 &&
         flash_sg_lanes(device, p, kv).pieces <= kFlashSgMaxPieces;
}

Dispatch per_query_attention(gpu::Device& device, std::string shapes, const std::vector<Operand>& operands,
                             const FlashAttentionParams& p, Grid grid, uint32_t splits, KvType kv,
                             const KvBlocks& blocks) {
  FlashSgLanes lanes = flash_sg_lanes(device, p, kv);
  bool subgroups = use_flash_sg(device, p, kv);
  const char* kernel = subgroups ? "flash_attention_sg" : "flash_attention";
  uint64_t pool = kv_pool_elements(kernel, shapes, blocks, subgroups ? kFlashSgKeys : kFlashTile,
                                   uint64_t(p.num_kv_heads) * p.head_dim);
  if (!subgroups)
    return prepare(device, kernel, std::move(shapes), operands, p, grid,
                   cache_constants(kv, pool, blocks, {{"SPLITS", double(splits)}}));
  return prepare(device, kernel, std::move(shapes), operands, p, grid,
                 {{"SPLITS", double(splits)},
                  {"KV_TYPE", double(kv)},
                  block_constant(blocks),
                  {"HEAD_DIM", double(p.head_dim)},
                  {"PIECES", double(lanes.pieces)},
                  {"ROW_LANES", double(lanes.row_lanes)},
                  {"MAX_SUBGROUPS", double(kWorkgroupSize / device.adapter().subgroup_min_size)}});
}

uint64_t flash_partials(const FlashAttentionParams& p, uint32_t splits) {
  return count_of(p.T, p.num_q_heads) * splits * (p.head_dim + 2);
}

}  // namespace

Dispatch flash_attention(gpu::Device& device, BufferBinding Q, BufferBinding K, BufferBinding V,
                         BufferBinding out, const KvBlocks& blocks, const FlashAttentionParams& p, KvType kv,
                         FlashBlocking requested) {
  auto shapes = flash_shapes(p, kv, blocks);
  check_flash(shapes, p, kv);
  uint64_t q = count_of(p.T, p.num_q_heads) * p.head_dim;
  // The tile rules are checked by the variant; 1 here checks the pool's size.
  uint64_t pool = kv_pool_elements("flash_attention", shapes, blocks, 1, uint64_t(p.num_kv_heads) * p.head_dim);
  auto operands = flash_operands(Q, K, V, {"out", out, q}, blocks, pool, q, p.S, kv, p.head_dim);
  if (use_flash_block(device, p, kv, requested))
    return block_attention(device, shapes, operands, p, 1, kv, blocks, requested);
  Grid queries = fold(p.T);
  return per_query_attention(device, shapes, operands, p, Grid{queries.x, p.num_q_heads, queries.y}, 1, kv, blocks);
}

uint32_t flash_attention_key_tile(const gpu::Device& device, const FlashAttentionParams& p, KvType kv,
                                  FlashBlocking requested) {
  if (use_flash_block(device, p, kv, requested))
    return 16 * flash_block_shape(device, p, kv, requested).keys_per_thread;
  return use_flash_sg(device, p, kv) ? kFlashSgKeys : kFlashTile;
}

uint32_t flash_attention_splits(uint32_t capacity) {
  return uint32_t(std::clamp<uint64_t>(ceil_div(capacity, kSplitGranule), 1, kMaxSplits));
}

uint64_t flash_attention_scratch_bytes(const gpu::Device& device, const FlashAttentionParams& p,
                                       uint32_t capacity) {
  FlashAttentionParams decode = p;
  decode.T = std::min(p.T, kFlashSplitMaxQueries);
  uint64_t partials = std::max<uint64_t>(1, flash_partials(decode, flash_attention_splits(capacity)));
  // Prompt chunks of every length up to T that split (fewer rows may take more chunks); those that do not
  // split write no partials.
  for (FlashAttentionParams prompt = p; prompt.T > kFlashSplitMaxQueries && capacity >= kFlashBlockSplitKeys;
       --prompt.T) {
    uint32_t splits = flash_block_splits(device, prompt, capacity);
    if (splits > 1) partials = std::max(partials, flash_partials(prompt, splits));
  }
  return 4 * partials;
}

bool flash_attention_split_serves(const FlashAttentionParams& p, uint32_t keys) {
  if (p.T <= kFlashSplitMaxQueries) return flash_attention_splits(keys) >= 2;
  return keys >= kFlashBlockSplitKeys;
}

std::vector<Dispatch> flash_attention(gpu::Device& device, BufferBinding Q, BufferBinding K, BufferBinding V,
                                      BufferBinding out, const KvBlocks& blocks, const FlashAttentionParams& p,
                                      BufferBinding scratch, uint32_t capacity, KvType kv,
                                      FlashBlocking requested) {
  std::vector<Dispatch> dispatches;
  check_flash(flash_shapes(p, kv, blocks), p, kv);  // before the heads' ratio is taken below
  bool prompt = p.T > kFlashSplitMaxQueries;
  bool block = use_flash_block(device, p, kv, requested);  // throws for a requested blocking that cannot run
  uint32_t splits = 1;
  if (!prompt) {
    splits = flash_attention_splits(capacity);
  } else if (block && capacity >= kFlashBlockSplitKeys) {
    uint64_t rows = uint64_t(p.T) * (p.num_q_heads / p.num_kv_heads);
    // Split grids do not fold: the blocks and the combine's queries must fit in one dimension.
    if (ceil_div(rows, flash_block_rows(flash_block_shape(device, p, kv, requested))) <= 65535 && p.T <= 65535)
      splits = flash_block_splits(device, p, capacity);
  }
  if (splits < 2) {
    dispatches.push_back(flash_attention(device, Q, K, V, out, blocks, p, kv, requested));
    return dispatches;
  }
  auto shapes = fmt::format("{} capacity={} splits={}", flash_shapes(p, kv, blocks), capacity, splits);
  if (p.S > capacity)
    fail("kernel 'flash_attention' ({}): S={} keys exceed the capacity of {}", shapes, p.S, capacity);
  uint64_t q = count_of(p.T, p.num_q_heads) * p.head_dim;
  uint64_t pool = kv_pool_elements("flash_attention", shapes, blocks, 1, uint64_t(p.num_kv_heads) * p.head_dim);
  uint64_t partials = flash_partials(p, splits);
  // Later runs may see up to capacity keys: the table must cover them.
  auto operands = flash_operands(Q, K, V, {"partials", scratch, partials}, blocks, pool, q, capacity, kv, p.head_dim);
  dispatches.push_back(prompt ? block_attention(device, shapes, operands, p, splits, kv, blocks, requested)
                              : per_query_attention(device, shapes, operands, p, Grid{p.T, p.num_q_heads, splits},
                                                    splits, kv, blocks));
  dispatches.push_back(prepare(device, "flash_attention_combine", shapes,
                               {{"partials", scratch, partials}, {"out", out, q}}, p, Grid{p.T, p.num_q_heads, 1},
                               {{"SPLITS", double(splits)}, {"FIRST_CHUNKS_ONLY", prompt ? 0.0 : 1.0}}));
  return dispatches;
}

std::vector<Dispatch> argmax(gpu::Device& device, BufferBinding logits, BufferBinding next_ids, BufferBinding history,
                             BufferBinding partials, const ArgmaxParams& p) {
  auto shapes = fmt::format("count={} slot={} rows={} row_stride={}", p.count, p.slot, p.rows, p.row_stride);
  if (p.count == 0) fail("kernel 'argmax' ({}): no logits", shapes);
  if (p.rows == 0 || p.rows > device.limits().maxComputeWorkgroupsPerDimension)
    fail("kernel 'argmax' ({}): rows must be 1 to {} (one workgroup row each)", shapes,
         device.limits().maxComputeWorkgroupsPerDimension);
  if (p.rows > 1 && p.row_stride < p.count)
    fail("kernel 'argmax' ({}): rows of {} logits overlap at a stride of {}", shapes, p.count, p.row_stride);
  auto stage = [&](gpu::Grid grid, bool final) {
    return prepare(device, "argmax", shapes,
                   {{"logits", logits, uint64_t(p.rows - 1) * p.row_stride + p.count},
                    {"next_ids", next_ids, p.rows},
                    {"history", history, uint64_t(p.slot) + p.rows},
                    {"partials", partials, 2ull * kArgmaxPartials * p.rows}},
                   p, grid, {{"FINAL", final ? 1.0 : 0.0}, {"PARTIALS", double(kArgmaxPartials)}});
  };
  std::vector<Dispatch> dispatches;
  dispatches.push_back(stage({kArgmaxPartials, p.rows, 1}, false));
  dispatches.push_back(stage({1, p.rows, 1}, true));
  return dispatches;
}

uint32_t token_mask_words(uint32_t count) { return uint32_t(ceil_div(count, 32)); }

Dispatch mask_tokens(gpu::Device& device, BufferBinding logits, BufferBinding allowed, uint32_t count,
                     uint32_t logits_offset, uint32_t allowed_offset) {
  auto shapes = fmt::format("count={}{}", count,
                            logits_offset || allowed_offset
                                ? fmt::format(" logits_offset={} allowed_offset={}", logits_offset, allowed_offset)
                                : "");
  if (count == 0) fail("kernel 'mask_tokens' ({}): no logits", shapes);
  struct Params {
    uint32_t count, masked_bits, logits_offset, allowed_offset;
  } p{count, 0x7FC00000u, logits_offset, allowed_offset};
  return prepare(device, "mask_tokens", shapes,
                 {{"logits", logits, uint64_t(logits_offset) + count},
                  {"allowed", allowed, uint64_t(allowed_offset) + token_mask_words(count)}},
                 p, fold(ceil_div(count, 256)));
}

namespace {
std::string sample_shapes(const SampleParams& p) {
  return fmt::format("count={} slot={} top_k={} top_p={} min_p={} inv_temperature={}{}", p.count, p.slot, p.top_k,
                     p.top_p, p.min_p, p.inv_temperature,
                     p.logits_offset ? fmt::format(" logits_offset={}", p.logits_offset) : "");
}

void check_sample_count(uint32_t count, std::string_view shapes) {
  if (count == 0 || count > kMaxSampleCount)
    fail("kernel 'sample' ({}): count must be 1..{} (the draw's 256 chunks of {})", shapes, kMaxSampleCount,
         kSampleChunk);
}
}  // namespace

// sample.wgsl's scratch: per level a histogram (2,048 bins of 3 words), a count, the best key, per level its
// window (16 words) and key bounds (2), 1,024 gathered (key, index) pairs, then per chunk its best key and kept
// weight (2 words).
uint64_t sample_candidates_words(uint32_t count) {
  return kSampleLevels * (3 * 2048 + 16 + 2) + 2 + 2 * 1024 + 3ull * ceil_div(count, kSampleChunk);
}

void check_sample_params(const SampleParams& p) {
  auto shapes = sample_shapes(p);
  check_sample_count(p.count, shapes);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    fail("kernel 'sample' ({}): top_p must be in (0, 1], got {}", shapes, p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    fail("kernel 'sample' ({}): min_p must be in [0, 1], got {}", shapes, p.min_p);
  if (!(p.inv_temperature > 0.0f) || !std::isfinite(p.inv_temperature))
    fail("kernel 'sample' ({}): inv_temperature must be positive and finite", shapes);
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty) || !std::isfinite(p.presence_penalty) ||
      !std::isfinite(p.frequency_penalty))
    fail("kernel 'sample' ({}): penalties must be finite and repetition_penalty positive (got {}, {}, {})", shapes,
         p.repetition_penalty, p.presence_penalty, p.frequency_penalty);
}

double sample_unit(uint64_t seed, uint32_t position, uint32_t round) {
  auto mix = [](uint32_t z) {  // lowbias32 (Chris Wellons)
    z ^= z >> 16;
    z *= 0x7feb352du;
    z ^= z >> 15;
    z *= 0x846ca68bu;
    z ^= z >> 16;
    return z;
  };
  uint32_t bits = mix(uint32_t(seed) ^ mix(uint32_t(seed >> 32) ^ mix(position ^ mix(round))));
  return double(bits >> 8) / 16777216.0;
}

uint32_t sample_levels(const SampleParams& p) {
  // sample.wgsl's first_window(): a top-k below the count or a top-p below 1 is a cut to narrow down.
  bool k_cut = p.top_k > 0 && p.top_k < p.count, p_cut = p.top_p < 1.0f;
  if (k_cut && p_cut) return kSampleLevels;
  return k_cut || p_cut ? kSampleLevelsOneCut : 1;
}

std::vector<Dispatch> sample(gpu::Device& device, const SampleBuffers& buffers, uint32_t count, uint32_t rows) {
  auto shapes = fmt::format("count={} rows={}", count, rows);
  check_sample_count(count, shapes);
  if (rows == 0 || rows > 65535) fail("kernel 'sample' ({}): rows must be 1..65535 (a grid's rows)", shapes);
  uint32_t partials = uint32_t(ceil_div(count, kSampleChunk));
  std::vector<Dispatch> dispatches;
  // The rows' offsets and slots are checked where their settings are written (write_sample_rows).
  const std::vector<Operand> operands = {{"logits", buffers.logits, count},
                                         {"next_ids", buffers.next_ids, 1},
                                         {"history", buffers.history, 1},
                                         {"candidates", buffers.candidates, rows * sample_candidates_words(count)},
                                         {"counts", buffers.counts, count},
                                         {"rows", buffers.rows, rows, sizeof(SampleParams)}};
  auto stage = [&](uint32_t number, uint32_t workgroups) {
    dispatches.push_back(prepare(device, "sample", shapes, std::span(operands), {}, {workgroups, rows, 1},
                                 {{"STAGE", double(number)}, {"PARTIALS", double(partials)}}));
  };
  stage(0, partials);
  stage(1, partials);
  stage(2, partials);  // level 0
  // Levels 1 on share one pipeline, which takes its level from the grid: level L's has L - 1 workgroups more
  // than the chunks, which return at once.
  for (uint32_t level = 1; level < kSampleLevels; ++level) stage(3, partials + level - 1);
  stage(4, 1);
  return dispatches;
}

void write_sample_rows(gpu::Device& device, const SampleBuffers& buffers, uint32_t count,
                       std::span<const SampleParams> rows) {
  auto elements = [](const BufferBinding& binding, uint64_t bytes) { return binding.bytes() / bytes; };
  if (rows.empty()) fail("kernel 'sample': no rows to write");
  if (rows.size() > elements(buffers.rows, sizeof(SampleParams)) ||
      rows.size() * sample_candidates_words(count) > elements(buffers.candidates, 4))
    fail("kernel 'sample': {} rows of {} logits do not fit its buffers ({} rows of settings, {} words of scratch)",
         rows.size(), count, elements(buffers.rows, sizeof(SampleParams)), elements(buffers.candidates, 4));
  for (size_t r = 0; r < rows.size(); ++r) {
    const SampleParams& p = rows[r];
    check_sample_params(p);
    auto where = [&] { return fmt::format("kernel 'sample' row {} ({})", r, sample_shapes(p)); };
    if (p.count > count) fail("{}: more logits than the chain's {}", where(), count);
    if (uint64_t(p.logits_offset) + p.count > elements(buffers.logits, 4))
      fail("{}: its logits end past the {} in the buffer", where(), elements(buffers.logits, 4));
    if (uint64_t(p.counts_offset) + p.count > elements(buffers.counts, 4))
      fail("{}: counts_offset {} ends past the {} counts in the buffer", where(), p.counts_offset,
           elements(buffers.counts, 4));
    if (p.slot >= std::min(elements(buffers.next_ids, 4), elements(buffers.history, 4)))
      fail("{}: slot {} lies past next_ids or history", where(), p.slot);
  }
  device.write(*buffers.rows.buffer, rows, buffers.rows.offset);
}

}  // namespace gerbil::kernels
