// ggml's tensor element types (the type ids GGUF files store) and CPU dequantization of the ones gerbil
// supports: F32, F16, BF16 and the block formats Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
// IQ4_XS, IQ3_XXS and IQ3_S, laid out byte for byte as ggml's ggml-common.h defines them (little-endian, f16 scales). A block of
// `block_size` elements takes `block_bytes` bytes; a row's length must be a multiple of block_size.
// Also the int4 group formats of Hugging Face checkpoints: AutoAWQ's GEMM layout, repacked into GPTQ's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/dtype.h"

namespace gerbil {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // ggml's spelling: "Q4_K", "BF16", ...
  uint32_t block_size;    // elements per block
  uint32_t block_bytes;   // bytes per block
  bool dequantizable;     // gerbil can turn it into floats
};

// The type with ggml id ID, or nullptr for ids ggml does not define (or has retired).
const GgmlTypeInfo* find_ggml_type(uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType type);
std::string_view ggml_type_name(GgmlType type);
// "F32, F16, BF16, Q8_0, ..." for error messages.
std::string dequantizable_types();

// Bytes that COUNT elements of TYPE take; throws unless COUNT is a multiple of the block size.
uint64_t ggml_byte_size(GgmlType type, uint64_t count);

// Converts BYTES (whole blocks of TYPE) into OUT, one float per element (OUT.size() elements, which
// must match the bytes). WHAT names the tensor in errors, e.g. an unsupported type.
void dequantize(GgmlType type, std::span<const std::byte> bytes, std::span<float> out, std::string_view what);

// Round-to-nearest quantizers in ggml's layouts, for making quantized test files from float weights:
// Q8_0 and Q4_0 as ggml's reference quantizers do (scale from the largest magnitude), Q2_K, Q3_K, Q4_K and Q6_K with
// simple per-sub-block scales (valid blocks, not ggml's searched scales). VALUES.size() must be a
// multiple of the block size.
std::vector<std::byte> quantize(GgmlType type, std::span<const float> values);

// --- int4 linear layers of Hugging Face checkpoints --------------------------------------------------
// A layer with K inputs, N outputs and groups of group_size consecutive inputs (G = K / group_size), each
// group and output with its own scale and zero point.
struct Int4Shape {
  int64_t in = 0, out = 0, group_size = 0;  // K, N, group size
};

// A layer in the GPTQ "v1" layout (fixtures README "GPTQ int4 folders"):
//   W[k][n] = scales[g][n] * (q[k][n] - (z[g][n] + 1)),  g = k / group_size,
// q[k][n] nibble k % 8 of qweight[k / 8][n], z[g][n] nibble n % 8 of qzeros[g][n / 8] (lowest bits first).
struct GptqInt4 {
  std::vector<uint32_t> qweight;  // [K / 8, N]
  std::vector<uint32_t> qzeros;   // [G, N / 8]
  std::vector<std::byte> scales;  // [G, N], in the checkpoint's float dtype
};

// AutoAWQ's GEMM layout ("version": "gemm", "zero_point": true), all little-endian:
//   qweight I32 [K, N / 8], qzeros I32 [G, N / 8], scales float [G, N],
//   W[k][n] = scales[g][n] * (q[k][n] - z[g][n]),
// packed along N in an interleaved order: nibble i (lowest bits first) of a word holds column
// kAwqNibbleColumn[i] of the word's 8 columns, in qweight and qzeros alike.
inline constexpr int kAwqNibbleColumn[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// Repacks an AWQ GEMM layer into GPTQ v1 with the same dequantised W, bit for bit: quants and zeros are
// integers moved between nibbles, and a real zero z becomes GPTQ's stored z - 1. AWQ's zero 0 has no stored
// GPTQ zero (it would be -1), so such a group and column is mirrored instead: q -> 15 - q, zero 15, scale
// negated (exact in any float dtype), since s * (q - 0) = -s * ((15 - q) - 15). Every byte count is checked
// against SHAPE first; WHAT names the layer (its qweight tensor) in errors.
GptqInt4 repack_awq_gemm(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                         std::span<const std::byte> scales, DType scale_dtype, Int4Shape shape,
                         std::string_view what);

// An int4 group block as the GPU keeps GPTQ and AWQ layers (kernels::WeightType::Q4_G of 32 elements, Q4_G128 of
// 128), laid out as ggml's Q4_1 block: d (f16, the group's scale), then the group's zero point z + 1 (an integer
// of 1 to 16, as an f16) where Q4_1 keeps its minimum, then 16 bytes of nibbles per 32 elements (element i < 16 of
// them in the low nibble of byte i, i + 16 in its high nibble). Element i is d * (q_i - (z + 1)), exactly GPTQ's
// W[k][n]. A block lies within one group: 128 elements where the group size is a multiple of 128 (one header per
// 128 weights, 4.25 bits a weight), else 32 (5 bits).
uint64_t int4_block_elements(uint64_t group_size);
inline uint64_t int4_block_bytes(uint64_t elements) { return 4 + elements / 2; }

// Outputs [first, first + count) of a GPTQ v1 layer (qweight, qzeros little-endian words, scales f16 [G, N]) as
// rows of K / E such blocks each (E = int4_block_elements(group size)), into `out` (count * K / E *
// int4_block_bytes(E) bytes). K and the group size must be multiples of 32 (the checkpoint's shapes are checked by
// model/weights.cpp); `what` names the layer in errors.
void gptq_group_blocks(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                       std::span<const std::byte> scales, Int4Shape shape, uint64_t first, uint64_t count,
                       std::span<std::byte> out, std::string_view what);

// Outputs [first, first + count) of an act-order GPTQ v1 layer, where input k sits in group g_idx[k] (little-endian
// int32 [K], each below K / group size), as float rows of W [N, K]: out[(n - first) * K + k] =
// scales[g][n] * (q[k][n] - (z[g][n] + 1)), g = g_idx[k], scales f16 [G, N]. Such groups are not runs of inputs,
// so no int4 block holds them: the GPU keeps these rows requantized (graph/gpu_weights.cpp).
void gptq_act_order_rows(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                         std::span<const std::byte> scales, std::span<const std::byte> g_idx, Int4Shape shape,
                         uint64_t first, uint64_t count, std::span<float> out, std::string_view what);

}  // namespace gerbil
