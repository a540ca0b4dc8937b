// Float64 references of ggml's block formats, written from the formats' descriptions one element at a
// time (which bits of which bytes make element i, and what it is worth), not from ggml's loops. They
// check src/model/quant.cpp's dequantizer: every element is an exact real number (an f16 scale times
// small integers, plus an f16 minimum), so a correct float dequantizer equals this value rounded to float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace gerbil::reference {

// The value of the IEEE half-precision number BITS (subnormals, infinities and NaN included).
double f16_value(uint16_t bits);

// Dequantizes whole blocks of FORMAT ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
// "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ3_S", and gerbil's "Q4_G" and "Q4_G128", model/quant.h's gptq_group_blocks);
// throws for other names or a byte count that is not a whole number of blocks.
std::vector<double> dequantize_blocks(std::string_view format, std::span<const uint8_t> bytes);

}  // namespace gerbil::reference
