#include "model/quant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "gerbil/error.h"
#include "model/iq3.h"

namespace gerbil {

namespace {

constexpr uint32_t kQK = 32;    // elements per block of the Q4_0 ... Q8_0 family
constexpr uint32_t kQK_K = 256;  // elements per super-block of the K-quants

// Every type ggml defines, with its block geometry (ggml-common.h's block_* structs).
constexpr std::array kTypes = {
    GgmlTypeInfo{GgmlType::F32, "F32", 1, 4, true},
    GgmlTypeInfo{GgmlType::F16, "F16", 1, 2, true},
    GgmlTypeInfo{GgmlType::Q4_0, "Q4_0", kQK, 18, true},
    GgmlTypeInfo{GgmlType::Q4_1, "Q4_1", kQK, 20, true},
    GgmlTypeInfo{GgmlType::Q5_0, "Q5_0", kQK, 22, true},
    GgmlTypeInfo{GgmlType::Q5_1, "Q5_1", kQK, 24, true},
    GgmlTypeInfo{GgmlType::Q8_0, "Q8_0", kQK, 34, true},
    GgmlTypeInfo{GgmlType::Q8_1, "Q8_1", kQK, 36, false},
    GgmlTypeInfo{GgmlType::Q2_K, "Q2_K", kQK_K, 84, true},
    GgmlTypeInfo{GgmlType::Q3_K, "Q3_K", kQK_K, 110, true},
    GgmlTypeInfo{GgmlType::Q4_K, "Q4_K", kQK_K, 144, true},
    GgmlTypeInfo{GgmlType::Q5_K, "Q5_K", kQK_K, 176, true},
    GgmlTypeInfo{GgmlType::Q6_K, "Q6_K", kQK_K, 210, true},
    GgmlTypeInfo{GgmlType::Q8_K, "Q8_K", kQK_K, 292, false},
    GgmlTypeInfo{GgmlType::IQ2_XXS, "IQ2_XXS", kQK_K, 66, false},
    GgmlTypeInfo{GgmlType::IQ2_XS, "IQ2_XS", kQK_K, 74, false},
    GgmlTypeInfo{GgmlType::IQ3_XXS, "IQ3_XXS", kQK_K, 98, true},
    GgmlTypeInfo{GgmlType::IQ1_S, "IQ1_S", kQK_K, 50, false},
    GgmlTypeInfo{GgmlType::IQ4_NL, "IQ4_NL", kQK, 18, true},
    GgmlTypeInfo{GgmlType::IQ3_S, "IQ3_S", kQK_K, 110, true},
    GgmlTypeInfo{GgmlType::IQ2_S, "IQ2_S", kQK_K, 82, false},
    GgmlTypeInfo{GgmlType::IQ4_XS, "IQ4_XS", kQK_K, 136, true},
    GgmlTypeInfo{GgmlType::I8, "I8", 1, 1, false},
    GgmlTypeInfo{GgmlType::I16, "I16", 1, 2, false},
    GgmlTypeInfo{GgmlType::I32, "I32", 1, 4, false},
    GgmlTypeInfo{GgmlType::I64, "I64", 1, 8, false},
    GgmlTypeInfo{GgmlType::F64, "F64", 1, 8, false},
    GgmlTypeInfo{GgmlType::IQ1_M, "IQ1_M", kQK_K, 56, false},
    GgmlTypeInfo{GgmlType::BF16, "BF16", 1, 2, true},
    GgmlTypeInfo{GgmlType::TQ1_0, "TQ1_0", kQK_K, 54, false},
    GgmlTypeInfo{GgmlType::TQ2_0, "TQ2_0", kQK_K, 66, false},
    GgmlTypeInfo{GgmlType::MXFP4, "MXFP4", kQK, 17, false},
    GgmlTypeInfo{GgmlType::NVFP4, "NVFP4", 64, 36, false},
    GgmlTypeInfo{GgmlType::Q1_0, "Q1_0", 128, 18, false},
};

uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

float load_f16(const std::byte* p) { return f16_to_f32(load_u16(p)); }

uint8_t byte_at(const std::byte* p, std::size_t i) { return std::to_integer<uint8_t>(p[i]); }

// --- dequantizing one block: the arithmetic (and its order) of ggml's dequantize_row_* ---------------
// Every product of a scale (an f16, or an f16 times a 6- or 8-bit integer) and a quant is exact in
// float, so each output is the exactly rounded value of the format's real-number definition.

void block_q4_0(const std::byte* b, float* y) {
  float d = load_f16(b);
  const std::byte* qs = b + 2;
  for (uint32_t j = 0; j < kQK / 2; ++j) {
    y[j] = float((byte_at(qs, j) & 0x0f) - 8) * d;
    y[j + kQK / 2] = float((byte_at(qs, j) >> 4) - 8) * d;
  }
}

void block_q4_1(const std::byte* b, float* y) {
  float d = load_f16(b), m = load_f16(b + 2);
  const std::byte* qs = b + 4;
  for (uint32_t j = 0; j < kQK / 2; ++j) {
    y[j] = float(byte_at(qs, j) & 0x0f) * d + m;
    y[j + kQK / 2] = float(byte_at(qs, j) >> 4) * d + m;
  }
}

// The fifth bits of Q5_0/Q5_1: bit j of the little-endian word qh belongs to element j.
uint32_t fifth_bit(uint32_t qh, uint32_t element) { return ((qh >> element) & 1u) << 4; }

void block_q5_0(const std::byte* b, float* y) {
  float d = load_f16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const std::byte* qs = b + 6;
  for (uint32_t j = 0; j < kQK / 2; ++j) {
    int x0 = int((byte_at(qs, j) & 0x0f) | fifth_bit(qh, j)) - 16;
    int x1 = int((byte_at(qs, j) >> 4) | fifth_bit(qh, j + kQK / 2)) - 16;
    y[j] = float(x0) * d;
    y[j + kQK / 2] = float(x1) * d;
  }
}

void block_q5_1(const std::byte* b, float* y) {
  float d = load_f16(b), m = load_f16(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const std::byte* qs = b + 8;
  for (uint32_t j = 0; j < kQK / 2; ++j) {
    uint32_t x0 = (byte_at(qs, j) & 0x0f) | fifth_bit(qh, j);
    uint32_t x1 = (byte_at(qs, j) >> 4) | fifth_bit(qh, j + kQK / 2);
    y[j] = float(x0) * d + m;
    y[j + kQK / 2] = float(x1) * d + m;
  }
}

void block_q8_0(const std::byte* b, float* y) {
  float d = load_f16(b);
  for (uint32_t j = 0; j < kQK; ++j) y[j] = float(int8_t(byte_at(b + 2, j))) * d;
}

// The 6-bit scale and min of sub-block J (0..7) packed in the 12 bytes Q of a Q4_K/Q5_K block.
void k4_scale_min(uint32_t j, const std::byte* q, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = byte_at(q, j) & 63;
    min = byte_at(q, j + 4) & 63;
  } else {
    scale = uint8_t((byte_at(q, j + 4) & 0x0f) | ((byte_at(q, j - 4) >> 6) << 4));
    min = uint8_t((byte_at(q, j + 4) >> 4) | ((byte_at(q, j) >> 6) << 4));
  }
}

// Q4_K and Q5_K share their scales; HIGH_BITS is the Q5_K qh array, or null for Q4_K.
void block_k_scaled(const std::byte* scales, const std::byte* qs, const std::byte* high_bits, float d, float dmin,
                    float* y) {
  for (uint32_t pair = 0; pair < 4; ++pair) {  // 64 elements: sub-blocks 2*pair (low nibbles), 2*pair+1 (high)
    for (uint32_t half = 0; half < 2; ++half) {
      uint8_t sc, m;
      k4_scale_min(2 * pair + half, scales, sc, m);
      float scale = d * float(sc), min = dmin * float(m);
      for (uint32_t l = 0; l < 32; ++l) {
        uint32_t q = half == 0 ? byte_at(qs, 32 * pair + l) & 0x0f : byte_at(qs, 32 * pair + l) >> 4;
        if (high_bits && ((byte_at(high_bits, l) >> (2 * pair + half)) & 1)) q += 16;
        y[64 * pair + 32 * half + l] = scale * float(q) - min;
      }
    }
  }
}

void block_q4_k(const std::byte* b, float* y) { block_k_scaled(b + 4, b + 16, nullptr, load_f16(b), load_f16(b + 2), y); }

void block_q5_k(const std::byte* b, float* y) {
  block_k_scaled(b + 4, b + 48, b + 16, load_f16(b), load_f16(b + 2), y);
}

void block_q6_k(const std::byte* b, float* y) {
  const std::byte* ql = b;
  const std::byte* qh = b + 128;
  const std::byte* scales = b + 192;
  float d = load_f16(b + 208);
  for (uint32_t half = 0; half < 2; ++half) {  // 128 elements: 64 ql bytes, 32 qh bytes, 8 scales
    for (uint32_t l = 0; l < 32; ++l) {
      uint8_t low0 = byte_at(ql, 64 * half + l), low1 = byte_at(ql, 64 * half + l + 32);
      uint8_t high = byte_at(qh, 32 * half + l);
      int q[4] = {int((low0 & 0x0f) | ((high & 3) << 4)) - 32, int((low1 & 0x0f) | (((high >> 2) & 3) << 4)) - 32,
                  int((low0 >> 4) | (((high >> 4) & 3) << 4)) - 32, int((low1 >> 4) | (((high >> 6) & 3) << 4)) - 32};
      for (uint32_t k = 0; k < 4; ++k) {
        uint32_t i = 32 * k + l;  // element within the half; its scale covers 16 elements
        float scale = d * float(int8_t(byte_at(scales, 8 * half + i / 16)));
        y[128 * half + i] = scale * float(q[k]);
      }
    }
  }
}

// Q3_K's 16 scales of 6 bits from their 12 packed bytes, as dequantize_row_q3_K unpacks them: scale s's low 4 bits
// are the low (s < 8) or high nibble of byte s % 8, its top 2 bits bits 2 (s / 4) of byte 8 + s % 4.
std::array<int, 16> q3_k_scales(const std::byte* packed) {
  std::array<int, 16> scales;
  for (uint32_t s = 0; s < 16; ++s) {
    uint32_t low = (byte_at(packed, s % 8) >> (4 * (s / 8))) & 0x0f;
    uint32_t top = (byte_at(packed, 8 + s % 4) >> (2 * (s / 4))) & 3;
    scales[s] = int(low | top << 4);
  }
  return scales;
}

// Q2_K and Q3_K: in each half of 128 elements, element 32 k + l's two low bits are bits 2 k of qs byte 32 half + l.
int two_bit_code(const std::byte* qs, uint32_t i) {
  return (byte_at(qs, 32 * (i / 128) + i % 32) >> (2 * ((i % 128) / 32))) & 3;
}

// Q3_K: hmask (32 bytes), qs (64), the packed scales (12), d. Element 32 k + l of a half takes, as its third bit,
// bit 4 half + k of hmask byte l: d (scale - 32) (q - 4).
void block_q3_k(const std::byte* b, float* y) {
  const std::byte* hmask = b;
  std::array<int, 16> scales = q3_k_scales(b + 96);
  float d = load_f16(b + 108);
  for (uint32_t i = 0; i < kQK_K; ++i) {
    int high = (byte_at(hmask, i % 32) >> (4 * (i / 128) + (i % 128) / 32)) & 1;
    y[i] = d * float(scales[i / 16] - 32) * float(two_bit_code(b + 32, i) + 4 * high - 4);
  }
}

// Q2_K: scales (16 bytes: a 4-bit scale and, above it, a 4-bit min for each 16 elements), qs (64), d, dmin:
// d (scale & 15) q - dmin (scale >> 4).
void block_q2_k(const std::byte* b, float* y) {
  float d = load_f16(b + 80), dmin = load_f16(b + 82);
  for (uint32_t i = 0; i < kQK_K; ++i) {
    uint8_t scale = byte_at(b, i / 16);
    y[i] = d * float(scale & 0x0f) * float(two_bit_code(b + 16, i)) - dmin * float(scale >> 4);
  }
}

// IQ4_NL's and IQ4_XS's 16 levels (ggml's kvalues_iq4nl): a 4-bit code picks one of these int8 values, a grid
// denser near zero than a uniform one.
constexpr std::array<int8_t, 16> kIq4Levels = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ4_XS's 6-bit scale of sub-block s (0..7): the low (even s) or high nibble of scales_l byte s / 2, with bits 2 s
// of the u16 scales_h above it; the sub-block's scale is d (scale - 32).
int iq4_xs_scale(const std::byte* b, uint32_t s) {
  uint16_t high = load_u16(b + 2);
  return int(((byte_at(b + 4, s / 2) >> (4 * (s % 2))) & 0x0f) | (((high >> (2 * s)) & 3) << 4)) - 32;
}

// 32 elements of IQ4_NL / IQ4_XS codes under the scale dl: dl level[code], element j < 16's code in the low nibble
// of qs byte j, j + 16's in its high nibble.
void iq4_levels32(const std::byte* qs, float dl, float* y) {
  for (uint32_t j = 0; j < kQK / 2; ++j) {
    y[j] = dl * float(kIq4Levels[byte_at(qs, j) & 0x0f]);
    y[j + kQK / 2] = dl * float(kIq4Levels[byte_at(qs, j) >> 4]);
  }
}

// IQ4_NL: d, then 16 bytes of codes.
void block_iq4_nl(const std::byte* b, float* y) { iq4_levels32(b + 2, load_f16(b), y); }

// IQ4_XS: d, scales_h, scales_l (4 bytes), then 16 bytes of codes per sub-block of 32.
void block_iq4_xs(const std::byte* b, float* y) {
  float d = load_f16(b);
  for (uint32_t s = 0; s < kQK_K / kQK; ++s) iq4_levels32(b + 8 + 16 * s, d * float(iq4_xs_scale(b, s)), y + kQK * s);
}

// IQ3_XXS / IQ3_S: d (0.5 + scale) 0.5 or d (1 + 2 scale) times each element's level (model/iq3.h), as ggml
// computes them: the scale times the magnitude is exact in f32, and the sign flips it.
template <GgmlType kType>
void block_iq3(const std::byte* b, float* y) {
  std::array<uint8_t, kQK_K> codes;
  std::array<uint8_t, kQK_K / kQK> scales;
  constexpr bool kXxs = kType == GgmlType::IQ3_XXS;
  iq3_codes(kXxs, b, codes.data(), scales.data());
  float d = load_f16(b);
  for (uint32_t s = 0; s < scales.size(); ++s) {
    float db = kXxs ? d * (0.5f + float(scales[s])) * 0.5f : d * float(1 + 2 * scales[s]);
    for (uint32_t i = kQK * s; i < kQK * (s + 1); ++i) y[i] = db * float(iq3_level(kXxs, codes[i]));
  }
}

using BlockDecoder = void (*)(const std::byte*, float*);

BlockDecoder block_decoder(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return block_q4_0;
    case GgmlType::Q4_1: return block_q4_1;
    case GgmlType::Q5_0: return block_q5_0;
    case GgmlType::Q5_1: return block_q5_1;
    case GgmlType::Q8_0: return block_q8_0;
    case GgmlType::Q4_K: return block_q4_k;
    case GgmlType::Q5_K: return block_q5_k;
    case GgmlType::Q6_K: return block_q6_k;
    case GgmlType::Q3_K: return block_q3_k;
    case GgmlType::Q2_K: return block_q2_k;
    case GgmlType::IQ4_NL: return block_iq4_nl;
    case GgmlType::IQ4_XS: return block_iq4_xs;
    case GgmlType::IQ3_XXS: return block_iq3<GgmlType::IQ3_XXS>;
    case GgmlType::IQ3_S: return block_iq3<GgmlType::IQ3_S>;
    default: return nullptr;
  }
}

// --- quantizing (tests) -------------------------------------------------------------------------------

void put_f16(std::byte* p, float value) {
  uint16_t bits = f32_to_f16(value);
  std::memcpy(p, &bits, 2);
}

void quantize_q8_0(const float* x, std::byte* b) {
  float amax = 0;
  for (uint32_t j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  float d = amax / 127.0f;
  float id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(b, d);
  for (uint32_t j = 0; j < kQK; ++j) b[2 + j] = std::byte(uint8_t(int8_t(std::lround(x[j] * id))));
}

void quantize_q4_0(const float* x, std::byte* b) {
  float max = 0;  // the value of largest magnitude, sign kept: it maps to -8
  for (uint32_t j = 0; j < kQK; ++j)
    if (std::fabs(x[j]) > std::fabs(max)) max = x[j];
  float d = max / -8.0f;
  float id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(b, d);
  auto nibble = [id](float v) { return uint8_t(std::min(15, int(int8_t(v * id + 8.5f)))); };
  for (uint32_t j = 0; j < kQK / 2; ++j) b[2 + j] = std::byte(uint8_t(nibble(x[j]) | (nibble(x[j + kQK / 2]) << 4)));
}

// Quantizes VALUE / SCALE to the nearest integer in [LO, HI] (0 when the scale is 0).
int nearest(float value, float scale, int lo, int hi) {
  if (scale == 0) return std::clamp(0, lo, hi);
  return std::clamp(int(std::lround(value / scale)), lo, hi);
}

// The asymmetric K-quants' sub-blocks (COUNT of SIZE values) as x ~ scale * q - min with q in 0..TOP: each spans
// its values' range, zero included.
void sub_block_ranges(const float* x, uint32_t count, uint32_t size, float top, float* scale, float* min) {
  for (uint32_t s = 0; s < count; ++s) {
    float lo = 0, hi = 0;
    for (uint32_t l = 0; l < size; ++l) lo = std::min(lo, x[size * s + l]), hi = std::max(hi, x[size * s + l]);
    scale[s] = (hi - lo) / top;
    min[s] = -lo;
  }
}

void quantize_q4_k(const float* x, std::byte* b) {
  float scale[8], min[8];  // per sub-block of 32: x ~ scale * q - min, q in 0..15
  sub_block_ranges(x, 8, 32, 15.0f, scale, min);
  float d = *std::max_element(scale, scale + 8) / 63.0f, dmin = *std::max_element(min, min + 8) / 63.0f;
  put_f16(b, d);
  put_f16(b + 2, dmin);
  float d16 = load_f16(b), dmin16 = load_f16(b + 2);
  uint8_t sc[8], m[8];
  for (uint32_t s = 0; s < 8; ++s) sc[s] = uint8_t(nearest(scale[s], d16, 0, 63)), m[s] = uint8_t(nearest(min[s], dmin16, 0, 63));
  std::byte* scales = b + 4;
  std::memset(scales, 0, 12);
  for (uint32_t j = 0; j < 8; ++j) {  // the inverse of k4_scale_min
    if (j < 4) {
      scales[j] |= std::byte(sc[j]);
      scales[j + 4] |= std::byte(m[j]);
    } else {
      scales[j + 4] |= std::byte(uint8_t((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4)));
      scales[j - 4] |= std::byte(uint8_t((sc[j] >> 4) << 6));
      scales[j] |= std::byte(uint8_t((m[j] >> 4) << 6));
    }
  }
  std::byte* qs = b + 16;
  for (uint32_t pair = 0; pair < 4; ++pair)
    for (uint32_t l = 0; l < 32; ++l) {
      uint8_t q[2];
      for (uint32_t half = 0; half < 2; ++half) {
        uint32_t s = 2 * pair + half;
        q[half] = uint8_t(nearest(x[32 * s + l] + dmin16 * float(m[s]), d16 * float(sc[s]), 0, 15));
      }
      qs[32 * pair + l] = std::byte(uint8_t(q[0] | (q[1] << 4)));
    }
}

void quantize_q6_k(const float* x, std::byte* b) {
  float scale[16];  // per sub-block of 16: x ~ scale * q, q in -32..31
  for (uint32_t s = 0; s < 16; ++s) {
    float amax = 0;
    for (uint32_t l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * s + l]));
    scale[s] = amax / 31.0f;
  }
  float d = *std::max_element(scale, scale + 16) / 127.0f;
  put_f16(b + 208, d);
  float d16 = load_f16(b + 208);
  int8_t sc[16];
  for (uint32_t s = 0; s < 16; ++s) {
    sc[s] = int8_t(nearest(scale[s], d16, -128, 127));
    b[192 + s] = std::byte(uint8_t(sc[s]));
  }
  std::memset(b, 0, 192);
  for (uint32_t i = 0; i < kQK_K; ++i) {
    uint32_t q = uint32_t(nearest(x[i], d16 * float(sc[i / 16]), -32, 31) + 32);
    uint32_t half = i / 128, k = (i % 128) / 32, l = i % 32;
    std::byte* ql = b + 64 * half + l + (k % 2) * 32;  // k = 0, 2 low nibbles; 1, 3 high; of bytes l and l + 32
    *ql |= std::byte(uint8_t((q & 0x0f) << (k >= 2 ? 4 : 0)));
    b[128 + 32 * half + l] |= std::byte(uint8_t((q >> 4) << (2 * k)));
  }
}

void quantize_q3_k(const float* x, std::byte* b) {
  float scale[16], largest = 0;  // per sub-block of 16: x ~ scale * q, q in -4..3, the largest |x| at q = -4
  for (uint32_t s = 0; s < 16; ++s) {
    float max = 0;
    for (uint32_t l = 0; l < 16; ++l)
      if (std::fabs(x[16 * s + l]) > std::fabs(max)) max = x[16 * s + l];
    scale[s] = max / -4.0f;
    largest = std::max(largest, std::fabs(scale[s]));
  }
  float d = largest / 31.0f;
  put_f16(b + 108, d);
  float d16 = load_f16(b + 108);
  std::memset(b, 0, 108);
  int sc[16];
  for (uint32_t s = 0; s < 16; ++s) {
    sc[s] = nearest(scale[s], d16, -32, 31);
    uint32_t stored = uint32_t(sc[s] + 32);  // the inverse of q3_k_scales
    b[96 + s % 8] |= std::byte(uint8_t((stored & 0x0f) << (4 * (s / 8))));
    b[96 + 8 + s % 4] |= std::byte(uint8_t((stored >> 4) << (2 * (s / 4))));
  }
  for (uint32_t i = 0; i < kQK_K; ++i) {
    uint32_t q = uint32_t(nearest(x[i], d16 * float(sc[i / 16]), -4, 3) + 4);
    uint32_t half = i / 128, k = (i % 128) / 32, l = i % 32;
    b[32 + 32 * half + l] |= std::byte(uint8_t((q & 3) << (2 * k)));
    b[l] |= std::byte(uint8_t((q >> 2) << (4 * half + k)));
  }
}

void quantize_q2_k(const float* x, std::byte* b) {
  float scale[16], min[16];  // per sub-block of 16: x ~ scale * q - min, q in 0..3
  sub_block_ranges(x, 16, 16, 3.0f, scale, min);
  put_f16(b + 80, *std::max_element(scale, scale + 16) / 15.0f);
  put_f16(b + 82, *std::max_element(min, min + 16) / 15.0f);
  float d16 = load_f16(b + 80), dmin16 = load_f16(b + 82);
  std::memset(b, 0, 80);
  for (uint32_t s = 0; s < 16; ++s) {
    int sc = nearest(scale[s], d16, 0, 15), m = nearest(min[s], dmin16, 0, 15);
    b[s] = std::byte(uint8_t(sc | m << 4));
    for (uint32_t l = 0; l < 16; ++l) {
      uint32_t i = 16 * s + l;
      uint32_t q = uint32_t(nearest(x[i] + dmin16 * float(m), d16 * float(sc), 0, 3));
      b[16 + 32 * (i / 128) + i % 32] |= std::byte(uint8_t(q << (2 * ((i % 128) / 32))));
    }
  }
}

// --- AWQ -> GPTQ ------------------------------------------------------------------------------------

uint32_t load_u32(std::span<const std::byte> bytes, uint64_t index) {  // mapped tensors may be unaligned
  uint32_t v;
  std::memcpy(&v, bytes.data() + 4 * index, 4);
  return v;
}

uint32_t nibble(uint32_t word, uint32_t i) { return (word >> (4 * i)) & 0xfu; }

// Throws unless SHAPE and the three tensors' byte counts make a GPTQ-runnable int4 layer.
void check_awq_sizes(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                     std::span<const std::byte> scales, DType scale_dtype, Int4Shape shape, std::string_view what) {
  // Plain copies, not structured bindings: the lambda below captures them (clang 15 cannot capture bindings).
  const int64_t K = shape.in, N = shape.out, group = shape.group_size;
  constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // keeps every product below in uint64_t
  if (K <= 0 || N <= 0 || group <= 0 || K > kMaxDim || N > kMaxDim)
    fail("{}: int4 layer of {} inputs, {} outputs and group size {} is not a valid shape", what, K, N, group);
  if (K % 8 != 0 || N % 8 != 0 || group % 8 != 0 || K % group != 0)
    fail("{}: int4 layer of {} inputs and {} outputs with group size {}: inputs, outputs and group size must be "
         "multiples of 8, and inputs a multiple of the group size",
         what, K, N, group);
  if (scale_dtype != DType::F32 && scale_dtype != DType::F16 && scale_dtype != DType::BF16)
    fail("{}: scales have dtype {}, expected F32, F16 or BF16", what, dtype_name(scale_dtype));
  uint64_t groups = uint64_t(K / group), words = uint64_t(N / 8);
  auto expect_bytes = [&](std::string_view part, std::span<const std::byte> bytes, uint64_t want, std::string shape) {
    if (bytes.size() != want)
      fail("{}: AWQ {} holds {} bytes, but {} takes {} (K = {}, N = {}, group size {})", what, part, bytes.size(),
           shape, want, K, N, group);
  };
  expect_bytes("qweight", qweight, uint64_t(K) * words * 4, fmt::format("I32 [{}, {}]", K, words));
  expect_bytes("qzeros", qzeros, groups * words * 4, fmt::format("I32 [{}, {}]", groups, words));
  expect_bytes("scales", scales, groups * uint64_t(N) * dtype_size(scale_dtype),
               fmt::format("{} [{}, {}]", dtype_name(scale_dtype), groups, N));
}

// Flips the sign of float element INDEX of BYTES: the top bit of its last (little-endian) byte.
void negate(std::span<std::byte> bytes, std::size_t element_size, uint64_t index) {
  bytes[(index + 1) * element_size - 1] ^= std::byte{0x80};
}

}  // namespace

GptqInt4 repack_awq_gemm(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                         std::span<const std::byte> scales, DType scale_dtype, Int4Shape shape,
                         std::string_view what) {
  check_awq_sizes(qweight, qzeros, scales, scale_dtype, shape, what);
  const uint64_t K = uint64_t(shape.in), N = uint64_t(shape.out), group = uint64_t(shape.group_size);
  const uint64_t groups = K / group, words = N / 8;
  GptqInt4 out;
  out.qweight.assign(K / 8 * N, 0);
  out.qzeros.assign(groups * words, 0);
  out.scales.assign(scales.begin(), scales.end());
  // Zeros first, noting which groups and columns are mirrored (AWQ zero 0; see the header): per qzeros word,
  // a mask with 0xF in the nibbles of those columns, in AWQ's order, so that a qweight word's 15 - q is q ^ mask.
  std::vector<uint32_t> mirror_masks(groups * words, 0);
  for (uint64_t g = 0; g < groups; ++g)
    for (uint64_t w = 0; w < words; ++w) {
      uint32_t word = load_u32(qzeros, g * words + w), packed = 0;
      for (uint32_t i = 0; i < 8; ++i) {
        uint32_t column = uint32_t(kAwqNibbleColumn[i]), zero = nibble(word, i);
        if (zero == 0) {
          mirror_masks[g * words + w] |= 0xfu << (4 * i);
          negate(out.scales, dtype_size(scale_dtype), g * N + 8 * w + column);
        }
        packed |= (zero == 0 ? 14u : zero - 1) << (4 * column);
      }
      out.qzeros[g * words + w] = packed;
    }
  for (uint64_t k = 0; k < K; ++k) {
    const uint32_t* masks = mirror_masks.data() + k / group * words;
    for (uint64_t w = 0; w < words; ++w) {
      uint32_t word = load_u32(qweight, k * words + w) ^ masks[w];
      for (uint32_t i = 0; i < 8; ++i)
        out.qweight[k / 8 * N + 8 * w + uint64_t(kAwqNibbleColumn[i])] |= nibble(word, i) << (4 * (k % 8));
    }
  }
  return out;
}

uint64_t int4_block_elements(uint64_t group_size) { return group_size % 128 == 0 ? 128 : 32; }

void gptq_group_blocks(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                       std::span<const std::byte> scales, Int4Shape shape, uint64_t first, uint64_t count,
                       std::span<std::byte> out, std::string_view what) {
  const uint64_t K = uint64_t(shape.in), N = uint64_t(shape.out), group = uint64_t(shape.group_size);
  if (K % 32 != 0 || group == 0 || group % 32 != 0 || K % group != 0 || N % 8 != 0)
    fail("{}: GPTQ layer of {} inputs, {} outputs, group size {}: int4 blocks need inputs and groups in whole "
         "blocks of 32 and outputs in words of 8", what, K, N, group);
  const uint64_t groups = K / group, elements = int4_block_elements(group), blocks = K / elements;
  const uint64_t block_bytes = int4_block_bytes(elements), row_bytes = blocks * block_bytes;
  if (qweight.size() != K / 8 * N * 4 || qzeros.size() != groups * N / 8 * 4 || scales.size() != groups * N * 2)
    fail("{}: GPTQ tensors of {}, {} and {} bytes do not make K = {}, N = {} in groups of {}", what,
         qweight.size(), qzeros.size(), scales.size(), K, N, group);
  if (first + count > N || out.size() != count * row_bytes)
    fail("{}: outputs {} to {} of {} into {} bytes", what, first, first + count, N, out.size());
  for (uint64_t n = first; n < first + count; ++n) {
    std::byte* row = out.data() + (n - first) * row_bytes;
    for (uint64_t b = 0; b < blocks; ++b) {
      uint64_t g = b * elements / group;
      uint32_t zeros = load_u32(qzeros, g * (N / 8) + n / 8);
      uint16_t zero = f32_to_f16(float(nibble(zeros, uint32_t(n % 8)) + 1));
      std::byte* block = row + b * block_bytes;
      std::memcpy(block, scales.data() + 2 * (g * N + n), 2);
      std::memcpy(block + 2, &zero, 2);
      std::fill_n(block + 4, block_bytes - 4, std::byte{0});
    }
  }
  // qweight row by row (8 inputs of every output a word), so that a range of outputs reads it contiguously.
  for (uint64_t k8 = 0; k8 < K / 8; ++k8)
    for (uint64_t n = first; n < first + count; ++n) {
      uint32_t word = load_u32(qweight, k8 * N + n);
      std::byte* row = out.data() + (n - first) * row_bytes;
      for (uint32_t i = 0; i < 8; ++i) {
        uint64_t k = 8 * k8 + i, element = k % 32;  // of its chunk, chunk k % elements / 32 of block k / elements
        std::byte& byte = row[k / elements * block_bytes + 4 + k % elements / 32 * 16 + element % 16];
        byte |= std::byte(nibble(word, i) << (element < 16 ? 0 : 4));
      }
    }
}

void gptq_act_order_rows(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                         std::span<const std::byte> scales, std::span<const std::byte> g_idx, Int4Shape shape,
                         uint64_t first, uint64_t count, std::span<float> out, std::string_view what) {
  const uint64_t K = uint64_t(shape.in), N = uint64_t(shape.out), group = uint64_t(shape.group_size);
  if (K % 8 != 0 || N % 8 != 0 || group == 0 || K % group != 0)
    fail("{}: GPTQ layer of {} inputs, {} outputs, group size {}: inputs and outputs come in words of 8, inputs in "
         "whole groups", what, K, N, group);
  const uint64_t groups = K / group;
  if (qweight.size() != K / 8 * N * 4 || qzeros.size() != groups * N / 8 * 4 || scales.size() != groups * N * 2 ||
      g_idx.size() != K * 4)
    fail("{}: GPTQ tensors of {}, {}, {} and {} bytes do not make K = {}, N = {} in groups of {}", what,
         qweight.size(), qzeros.size(), scales.size(), g_idx.size(), K, N, group);
  if (first + count > N || out.size() != count * K)
    fail("{}: outputs {} to {} of {} into {} floats", what, first, first + count, N, out.size());
  for (uint64_t k = 0; k < K; ++k) {
    uint32_t g = load_u32(g_idx, k);
    if (g >= groups) fail("{}: input {} in group {} of {}", what, k, int32_t(g), groups);
    for (uint64_t n = first; n < first + count; ++n) {
      float q = float(nibble(load_u32(qweight, k / 8 * N + n), uint32_t(k % 8)));
      float zero = float(nibble(load_u32(qzeros, g * (N / 8) + n / 8), uint32_t(n % 8)) + 1);
      out[(n - first) * K + k] = load_f16(scales.data() + 2 * (g * N + n)) * (q - zero);
    }
  }
}

const GgmlTypeInfo* find_ggml_type(uint32_t id) {
  for (const GgmlTypeInfo& info : kTypes)
    if (uint32_t(info.type) == id) return &info;
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  if (const GgmlTypeInfo* info = find_ggml_type(uint32_t(type))) return *info;
  fail("unknown ggml type id {}", uint32_t(type));
}

std::string_view ggml_type_name(GgmlType type) { return ggml_type_info(type).name; }

std::string dequantizable_types() {
  std::string names;
  for (const GgmlTypeInfo& info : kTypes)
    if (info.dequantizable) names += (names.empty() ? "" : ", ") + std::string(info.name);
  return names;
}

uint64_t ggml_byte_size(GgmlType type, uint64_t count) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (count % info.block_size != 0)
    fail("{} elements are not a whole number of {} blocks ({} elements each)", count, info.name, info.block_size);
  return count / info.block_size * info.block_bytes;
}

void dequantize(GgmlType type, std::span<const std::byte> bytes, std::span<float> out, std::string_view what) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (!info.dequantizable)
    fail("{}: ggml type {} is not supported (gerbil reads {})", what, info.name, dequantizable_types());
  if (out.size() % info.block_size != 0 || bytes.size() != out.size() / info.block_size * info.block_bytes)
    fail("{}: {} bytes of {} do not hold {} elements", what, bytes.size(), info.name, out.size());
  if (out.empty()) return;
  switch (type) {
    case GgmlType::F32: std::memcpy(out.data(), bytes.data(), bytes.size()); return;
    case GgmlType::F16: convert_to_f32(DType::F16, bytes, out); return;
    case GgmlType::BF16: convert_to_f32(DType::BF16, bytes, out); return;
    default: break;
  }
  BlockDecoder decode = block_decoder(type);
  for (std::size_t block = 0; block < out.size() / info.block_size; ++block)
    decode(bytes.data() + block * info.block_bytes, out.data() + block * info.block_size);
}

std::vector<std::byte> quantize(GgmlType type, std::span<const float> values) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  std::vector<std::byte> out(ggml_byte_size(type, values.size()));
  using Encoder = void (*)(const float*, std::byte*);
  Encoder encode = nullptr;
  switch (type) {
    case GgmlType::F32: std::memcpy(out.data(), values.data(), out.size()); return out;
    case GgmlType::F16: convert_from_f32(DType::F16, values, out); return out;
    case GgmlType::BF16: convert_from_f32(DType::BF16, values, out); return out;
    case GgmlType::Q8_0: encode = quantize_q8_0; break;
    case GgmlType::Q4_0: encode = quantize_q4_0; break;
    case GgmlType::Q4_K: encode = quantize_q4_k; break;
    case GgmlType::Q6_K: encode = quantize_q6_k; break;
    case GgmlType::Q3_K: encode = quantize_q3_k; break;
    case GgmlType::Q2_K: encode = quantize_q2_k; break;
    default: fail("no quantizer for ggml type {}", info.name);
  }
  for (std::size_t block = 0; block < values.size() / info.block_size; ++block)
    encode(values.data() + block * info.block_size, out.data() + block * info.block_bytes);
  return out;
}

}  // namespace gerbil
