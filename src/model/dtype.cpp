#include "model/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "gerbil/error.h"

namespace gerbil {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array kDTypes = {
    DTypeInfo{DType::F64, "F64", 8},   DTypeInfo{DType::F32, "F32", 4}, DTypeInfo{DType::F16, "F16", 2},
    DTypeInfo{DType::BF16, "BF16", 2}, DTypeInfo{DType::I64, "I64", 8}, DTypeInfo{DType::I32, "I32", 4},
    DTypeInfo{DType::I16, "I16", 2},   DTypeInfo{DType::I8, "I8", 1},   DTypeInfo{DType::U8, "U8", 1},
    DTypeInfo{DType::BOOL, "BOOL", 1},
};

const DTypeInfo& info(DType dtype) { return kDTypes[static_cast<std::size_t>(dtype)]; }

// Rounds M / 2^SHIFT to the nearest integer, ties to even.
uint32_t shift_round_even(uint32_t m, int shift) {
  if (shift <= 0) return m;
  if (shift > 25) return 0;
  uint32_t result = m >> shift;
  uint32_t rest = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (result & 1))) ++result;
  return result;
}

}  // namespace

std::string_view dtype_name(DType dtype) { return info(dtype).name; }
std::size_t dtype_size(DType dtype) { return info(dtype).size; }
bool is_float(DType dtype) {
  return dtype == DType::F64 || dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

bool parse_dtype(std::string_view name, DType& out) {
  for (const auto& entry : kDTypes) {
    if (entry.name == name) {
      out = entry.dtype;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24 is exact in float
    float magnitude = std::ldexp(float(mantissa), -24);
    return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

uint16_t f32_to_f16(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t magnitude = x & 0x7fffffff;
  if (magnitude >= 0x7f800000) {  // infinity, or NaN kept quiet with its top payload bits
    uint16_t payload = magnitude > 0x7f800000 ? uint16_t(0x200 | ((magnitude >> 13) & 0x3ff)) : 0;
    return sign | 0x7c00 | payload;
  }
  int exponent = int(magnitude >> 23) - 112;  // half-precision biased exponent
  if (exponent >= 31) return sign | 0x7c00;
  if (exponent <= 0) {  // half subnormal: count units of 2^-24
    uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
    return sign | uint16_t(shift_round_even(mantissa, 14 - exponent));
  }
  // Rounding may carry into the exponent, and from the largest finite value into infinity: both are right.
  uint32_t half = (uint32_t(exponent) << 10) | ((magnitude & 0x7fffff) >> 13);
  uint32_t rest = magnitude & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return sign | uint16_t(half);
}

uint16_t f32_to_bf16(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);  // keep NaN a NaN
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

void convert_to_f32(DType from, std::span<const std::byte> src, std::span<float> out) {
  if (src.size() != out.size() * dtype_size(from))
    fail("convert_to_f32: {} bytes of {} do not hold {} values", src.size(), dtype_name(from), out.size());
  auto read16 = [&](std::size_t i) {
    uint16_t bits;
    std::memcpy(&bits, src.data() + 2 * i, 2);
    return bits;
  };
  switch (from) {
    case DType::F32: std::memcpy(out.data(), src.data(), src.size()); return;
    case DType::F16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(read16(i));
      return;
    case DType::BF16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(read16(i));
      return;
    default: fail("convert_to_f32: cannot convert {} to F32", dtype_name(from));
  }
}

void convert_from_f32(DType to, std::span<const float> values, std::span<std::byte> out) {
  if (out.size() != values.size() * dtype_size(to))
    fail("convert_from_f32: {} bytes cannot hold {} {} values", out.size(), values.size(), dtype_name(to));
  auto write16 = [&](std::size_t i, uint16_t bits) { std::memcpy(out.data() + 2 * i, &bits, 2); };
  switch (to) {
    case DType::F32: std::memcpy(out.data(), values.data(), out.size()); return;
    case DType::F16:
      for (std::size_t i = 0; i < values.size(); ++i) write16(i, f32_to_f16(values[i]));
      return;
    case DType::BF16:
      for (std::size_t i = 0; i < values.size(); ++i) write16(i, f32_to_bf16(values[i]));
      return;
    default: fail("convert_from_f32: cannot convert F32 to {}", dtype_name(to));
  }
}

}  // namespace gerbil
