// ggml's tensor element types (the type ids GGUF files store) and CPU dequantization of the ones gerbil
// supports: F32, F16, BF16 and the block formats Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, laid out
// byte for byte as ggml's ggml-common.h defines them (little-endian, f16 scales). A block of
// `block_size` elements takes `block_bytes` bytes; a row's length must be a multiple of block_size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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
// Q8_0 and Q4_0 as ggml's reference quantizers do (scale from the largest magnitude), Q4_K and Q6_K with
// simple per-sub-block scales (valid blocks, not ggml's searched scales). VALUES.size() must be a
// multiple of the block size.
std::vector<std::byte> quantize(GgmlType type, std::span<const float> values);

}  // namespace gerbil
