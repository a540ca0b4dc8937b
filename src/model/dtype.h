// Element types of safetensors files and the float conversions the loaders and writers need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace gerbil {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

// The safetensors spelling ("F32", "BF16", ...).
std::string_view dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);
// Parses a safetensors dtype name; false for names gerbil does not know (F8_E4M3, ...).
bool parse_dtype(std::string_view name, DType& out);
bool is_float(DType dtype);

float f16_to_f32(uint16_t bits);
float bf16_to_f32(uint16_t bits);
// Round to nearest, ties to even; overflow gives infinity, NaN stays NaN.
uint16_t f32_to_f16(float value);
uint16_t f32_to_bf16(float value);

// Converts SRC (elements of type FROM, one of F32/F16/BF16) into OUT, one float per element.
void convert_to_f32(DType from, std::span<const std::byte> src, std::span<float> out);
// Converts floats into TO (F32/F16/BF16); OUT must hold values.size() * dtype_size(to) bytes.
void convert_from_f32(DType to, std::span<const float> values, std::span<std::byte> out);

}  // namespace gerbil
