#include "reference/quant.h"

#include <bit>
#include <cmath>
#include <functional>

#include "gerbil/error.h"
#include "model/iq3.h"

namespace gerbil::reference {

namespace {

// One block: its size in bytes and elements, and the value of element i.
struct Format {
  std::string_view name;
  size_t block_bytes, block_elements;
  std::function<double(const uint8_t* block, size_t i)> element;
};

double half_at(const uint8_t* p) { return f16_value(uint16_t(p[0] | (p[1] << 8))); }

uint32_t word_at(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

// 32-element blocks store element i (< 16) in the low nibble of byte i and element i + 16 in its high nibble.
unsigned nibble32(const uint8_t* qs, size_t i) { return i < 16 ? qs[i] & 15u : qs[i - 16] >> 4; }

// K-quant super-blocks of 256 elements: element i sits in sub-block i / 32; pairs of sub-blocks share 32
// bytes, the even one in the low nibbles.
unsigned nibble256(const uint8_t* qs, size_t i) {
  uint8_t byte = qs[32 * (i / 64) + i % 32];
  return (i / 32) % 2 == 0 ? byte & 15u : byte >> 4;
}

// The 6-bit (scale, min) of sub-block s of a Q4_K/Q5_K block from its 12 packed bytes: sub-blocks 0-3 keep
// theirs in the low 6 bits of bytes s and s + 4; sub-blocks 4-7 split theirs into a low nibble in byte s + 4
// (scale low, min high) and two high bits in the top bits of bytes s - 4 (scale) and s (min).
std::pair<unsigned, unsigned> k_scale_min(const uint8_t* packed, size_t s) {
  if (s < 4) return {packed[s] & 63u, packed[s + 4] & 63u};
  unsigned scale = (packed[s + 4] & 15u) + 16u * (packed[s - 4] >> 6);
  unsigned min = (packed[s + 4] >> 4) + 16u * (packed[s] >> 6);
  return {scale, min};
}

// IQ4_NL's and IQ4_XS's 16 levels, the values a 4-bit code stands for (llama.cpp's kvalues_iq4nl): a non-uniform
// grid of int8 values, denser near zero.
constexpr int kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ3_XXS's and IQ3_S's element i without its sign: its grid entry's magnitude at position i % 4.
double iq3_magnitude(std::string_view grid, const int* magnitudes, unsigned entry, size_t i) {
  return magnitudes[gerbil::iq3_magnitude_index(grid, entry, unsigned(i % 4))];
}

const std::vector<Format>& formats() {
  static const std::vector<Format> all = {
      {"Q8_0", 34, 32, [](const uint8_t* b, size_t i) { return half_at(b) * double(int8_t(b[2 + i])); }},
      {"Q4_0", 18, 32, [](const uint8_t* b, size_t i) { return half_at(b) * (double(nibble32(b + 2, i)) - 8); }},
      {"Q4_1", 20, 32,
       [](const uint8_t* b, size_t i) { return half_at(b) * double(nibble32(b + 4, i)) + half_at(b + 2); }},
      {"Q5_0", 22, 32,
       [](const uint8_t* b, size_t i) {
         unsigned high = (word_at(b + 2) >> i) & 1u;
         return half_at(b) * (double(nibble32(b + 6, i) + 16 * high) - 16);
       }},
      {"Q5_1", 24, 32,
       [](const uint8_t* b, size_t i) {
         unsigned high = (word_at(b + 4) >> i) & 1u;
         return half_at(b) * double(nibble32(b + 8, i) + 16 * high) + half_at(b + 2);
       }},
      {"Q4_K", 144, 256,
       [](const uint8_t* b, size_t i) {
         auto [scale, min] = k_scale_min(b + 4, i / 32);
         return half_at(b) * scale * nibble256(b + 16, i) - half_at(b + 2) * min;
       }},
      {"Q5_K", 176, 256,
       [](const uint8_t* b, size_t i) {
         auto [scale, min] = k_scale_min(b + 4, i / 32);
         unsigned high = (b[16 + i % 32] >> (i / 32)) & 1u;  // bit s of byte i % 32 of qh
         return half_at(b) * scale * double(nibble256(b + 48, i) + 16 * high) - half_at(b + 2) * min;
       }},
      // gerbil's blocks of GPTQ / AWQ groups (model/quant.h int4_block_bytes): d, the zero point z as an f16
      // integer, then Q4_0's nibbles for each 32 elements; d q - d z, which is GPTQ's d (q - z) but for the sign of
      // a zero.
      {"Q4_G", 20, 32,
       [](const uint8_t* b, size_t i) {
         return half_at(b) * double(nibble32(b + 4, i)) - half_at(b) * half_at(b + 2);
       }},
      {"Q4_G128", 68, 128,
       [](const uint8_t* b, size_t i) {
         return half_at(b) * double(nibble32(b + 4 + 16 * (i / 32), i % 32)) - half_at(b) * half_at(b + 2);
       }},
      {"Q2_K", 84, 256,
       [](const uint8_t* b, size_t i) {
         // scales[16], qs[64], d, dmin. Two halves of 128; in a half, element j = 32 k + l takes bits 2k of qs byte
         // l of the half's 32. Each 16 elements share a byte of scales: a 4-bit scale (times d) in its low nibble,
         // a 4-bit minimum (times dmin) in its high one.
         size_t half = i / 128, j = i % 128, k = j / 32, l = j % 32;
         unsigned q = (b[16 + 32 * half + l] >> (2 * k)) & 3u;
         unsigned scale = b[i / 16] & 15u, min = b[i / 16] >> 4;
         return half_at(b + 80) * scale * q - half_at(b + 82) * min;
       }},
      {"Q3_K", 110, 256,
       [](const uint8_t* b, size_t i) {
         // hmask[32], qs[64], scales[12], d. Two halves of 128; in a half, element j = 32 k + l takes its low 2
         // bits from bits 2k of qs byte l of the half's 32, and its third bit from bit 4 half + k of hmask byte l
         // (set: 0..7 as stored; clear: the value is 4 lower). Each 16 elements share a 6-bit scale, stored less
         // 32: the first 8 scales' low nibbles in the low nibbles of scale bytes 0-7, the last 8's in their high
         // nibbles; the top 2 bits of scale s are bits 2 (s / 4) of scale byte 8 + s % 4.
         size_t half = i / 128, j = i % 128, k = j / 32, l = j % 32, s = i / 16;
         unsigned low = (b[32 + 32 * half + l] >> (2 * k)) & 3u;
         unsigned third = (b[l] >> (4 * half + k)) & 1u;
         unsigned scale_low = s < 8 ? b[96 + s] & 15u : b[96 + s - 8] >> 4;
         unsigned scale_top = (b[104 + s % 4] >> (2 * (s / 4))) & 3u;
         double scale = double(scale_low + 16 * scale_top) - 32;
         return half_at(b + 108) * scale * (double(low + 4 * third) - 4);
       }},
      {"IQ4_NL", 18, 32,
       [](const uint8_t* b, size_t i) { return half_at(b) * double(kIq4Levels[nibble32(b + 2, i)]); }},
      {"IQ4_XS", 136, 256,
       [](const uint8_t* b, size_t i) {
         // d, scales_h (u16), scales_l[4], qs[128]. Sub-block s = i / 32 has a 6-bit scale stored plus 32: its low
         // 4 bits in the low (s even) or high nibble of scales_l byte s / 2, its top 2 bits bits 2 s of scales_h;
         // its 16 bytes of codes are laid out as IQ4_NL's.
         size_t s = i / 32;
         unsigned low = (b[4 + s / 2] >> (4 * (s % 2))) & 15u;
         unsigned top = ((unsigned(b[2]) | unsigned(b[3]) << 8) >> (2 * s)) & 3u;
         double scale = double(low + 16 * top) - 32;
         return half_at(b) * scale * double(kIq4Levels[nibble32(b + 8 + 16 * s, i % 32)]);
       }},
      {"IQ3_XXS", 98, 256,
       [](const uint8_t* b, size_t i) {
         // d, qs[64] (one 8-bit grid entry per 4 elements), then a word per sub-block s = i / 32: bits 7 k .. 7 k + 6
         // are the signs of its elements 8 k .. 8 k + 6 (bit set: negative), element 8 k + 7's sign makes the count
         // of minus signs among the 8 even, and the top 4 bits are a scale ls: d (ls + 1/2) / 2 times the value.
         size_t s = i / 32, j = i % 32;
         uint32_t word = word_at(b + 66 + 4 * s);
         unsigned field = (word >> (7 * (j / 8))) & 127u;
         unsigned parity = unsigned(std::popcount(field)) & 1u;
         bool negative = j % 8 == 7 ? parity != 0 : ((field >> (j % 8)) & 1u) != 0;
         double value = iq3_magnitude(gerbil::kIq3XxsGrid, gerbil::kIq3XxsMagnitudes, b[2 + i / 4], i);
         return half_at(b) * (double(word >> 28) + 0.5) / 2 * (negative ? -value : value);
       }},
      {"IQ3_S", 110, 256,
       [](const uint8_t* b, size_t i) {
         // d, qs[64] (the low 8 bits of one grid entry per 4 elements), qh[8] (bit q of byte s: the ninth bit of quad
         // q of sub-block s = i / 32), signs[32] (bit i % 8 of byte i / 8: negative), scales[4] (sub-block s's 4-bit
         // ls in the low nibble of byte s / 2 for even s, the high one for odd): d (2 ls + 1) times the value.
         size_t s = i / 32, quad = (i % 32) / 4;
         unsigned entry = b[2 + i / 4] | (((b[66 + s] >> quad) & 1u) << 8);
         bool negative = ((b[74 + i / 8] >> (i % 8)) & 1u) != 0;
         unsigned ls = (b[106 + s / 2] >> (4 * (s % 2))) & 15u;
         double value = iq3_magnitude(gerbil::kIq3SGrid, gerbil::kIq3SMagnitudes, entry, i);
         return half_at(b) * double(2 * ls + 1) * (negative ? -value : value);
       }},
      {"Q6_K", 210, 256,
       [](const uint8_t* b, size_t i) {
         // Two halves of 128; in a half, element j = 32 k + l takes its low 4 bits from the low (k = 0, 1) or
         // high (k = 2, 3) nibble of ql byte l (k even) or l + 32 (k odd), and its top 2 bits from bits 2k of
         // qh byte l. Each 16 elements share one signed 8-bit scale.
         size_t half = i / 128, j = i % 128, k = j / 32, l = j % 32;
         uint8_t low_byte = b[64 * half + l + 32 * (k % 2)];
         unsigned low = k < 2 ? low_byte & 15u : low_byte >> 4;
         unsigned top = (b[128 + 32 * half + l] >> (2 * k)) & 3u;
         double scale = double(int8_t(b[192 + i / 16]));
         return half_at(b + 208) * scale * (double(low + 16 * top) - 32);
       }},
  };
  return all;
}

}  // namespace

double f16_value(uint16_t bits) {
  int sign = bits >> 15, exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  double magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(double(mantissa), -24);
  else if (exponent == 31)
    magnitude = mantissa == 0 ? INFINITY : NAN;
  else
    magnitude = std::ldexp(double(1024 + mantissa), exponent - 25);
  return sign ? -magnitude : magnitude;
}

std::vector<double> dequantize_blocks(std::string_view format, std::span<const uint8_t> bytes) {
  for (const Format& f : formats()) {
    if (f.name != format) continue;
    if (bytes.size() % f.block_bytes != 0)
      fail("reference::dequantize_blocks: {} bytes are not whole {} blocks of {} bytes", bytes.size(), format,
           f.block_bytes);
    std::vector<double> out;
    out.reserve(bytes.size() / f.block_bytes * f.block_elements);
    for (size_t block = 0; block < bytes.size(); block += f.block_bytes)
      for (size_t i = 0; i < f.block_elements; ++i) out.push_back(f.element(bytes.data() + block, i));
    return out;
  }
  fail("reference::dequantize_blocks: unknown format \"{}\"", format);
}

}  // namespace gerbil::reference
