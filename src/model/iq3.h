// ggml's IQ3_XXS and IQ3_S blocks taken apart into signed 4-bit codes, for the CPU decoders (model/quant.cpp), the
// GPU's layout (kernels::pack_rows) and the float64 references (reference/quant.cpp, which reads only the grids).
//
// The grids, data of the formats themselves: a block's 8-bit (IQ3_XXS) or 9-bit (IQ3_S) index picks an entry of 4
// magnitudes, each one of the type's 8 (kIq3XxsMagnitudes, kIq3SMagnitudes). Written as gguf-py writes them: one hex
// digit per value, the index (0..7) of its magnitude, entry e in digits 4e .. 4e + 3 with values 1, 0, 3, 2 in that
// order (two digits make a byte whose low nibble holds the earlier value).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace gerbil {

inline constexpr std::string_view kIq3XxsGrid =
    "000002000400110013001700200022003100420073007500010103011001120121012501300132014101540170010002"
    "020204021102200222023102330237025102570275020103070310031203250370031304370444045704730475040105"
    "070532055205350664061007140716074307610701100310101012102110231030103210341047105010001102111111"
    "201122110112031210121212211230127212001302132013311346136613011405145014201524154615711505162217"
    "401700200220112013202020222026203120422001210321052110211221212130216321672170210022022211221722"
    "202222223722402255220123102314237023742335245324032527254125742501270327162745270130103012302130"
    "233050306530723000310231203131314431463101320332103225325232723211333333303447347234003506352235"
    "553514363636633633376037044017403540374053405740744120423742404260426642074345430444514464442545"
    "434570450547104712473047125041507050005106512651555114523252725202535353105423542754725402553155"
    "505624574257246044604660646021616161176264623063366344640565526533660367216703700570077010703270"
    "5270267140711272457252720073157333736073217441740075027524753076";

inline constexpr std::string_view kIq3SGrid =
    "000001000200050007001000110012001400160020002100250033004000420045004700510053006000620071007400"
    "770000010101020104011001110115012001230127013101350144016101650172010002010205020702100213021602"
    "210225023002340242024502470251025302700273020303110315032003220331033303360344035003520367037103"
    "750300041304170421042404320440044304510470040205040520052205260533054105450547056605730506061106"
    "130631065206710600070207040720072207260733075007540700100110021004101010111013101510171020102210"
    "311034103610541056106110721000110111031106111011141121113011331141115011521170117611001212121512"
    "171220122412321240124312551260127212011304130713101313132113271330133413411362137013031405141214"
    "141431143314421446145014541401151015131521153015321551152016241627164416461601170317101712172117"
    "351741176217701700200120032005200720102012201420162021202320272030203220412043204520502052206720"
    "702073207520002102211021132117212221252131213421422151210122042207222122232230223722412253225722"
    "712274220023022305231123222324233123332342235023662301240724202423243224352441247224752404251125"
    "222537254025532570250026022607262126552661260527112726273027432750270230113013301530173022303130"
    "333035304230443047305130633071300131033105311431213123314031603172317631003212322032323234325032"
    "013310331433213323332733303341334333473355337333033411341634223431345234603464340135103512352535"
    "323544355635733516364136013703372037223735370040044012402040244027403240414050407040024107411141"
    "134122413041354143415141554101420342104215422142334240425742624270420443114313432043224331433543"
    "004402442444374440447144054507452145624513463446604610471547304743475147025010501450225040504450"
    "475052506650745001510351055112512151325172510052115223523052365253520253075310532753445351536553"
    "735301540454205432544654125526555155535542560257045722571160136015603160336060600061206127616461"
    "126234624262556262627062006314632163406325644364626400650365346560650566406611671367007004700770"
    "207022703670407054706270027111712471437145710172047210721672217230725172027332733573537301740574"
    "13742074507422754275027631760077";

// The 8 magnitudes of each type's grid values.
inline constexpr int kIq3XxsMagnitudes[8] = {4, 12, 20, 28, 36, 44, 52, 62};
inline constexpr int kIq3SMagnitudes[8] = {1, 3, 5, 7, 9, 11, 13, 15};

// Value j (0..3) of entry `entry` of a grid above: the index of its magnitude.
constexpr uint32_t iq3_magnitude_index(std::string_view grid, uint32_t entry, uint32_t j) {
  char digit = grid[4 * entry + (j ^ 1u)];
  return uint32_t(digit - '0');
}

// A code of iq3_codes: 8 + m for +magnitude m, 7 - m for -m.
inline uint8_t iq3_signed_code(uint32_t m, bool negative) { return uint8_t(negative ? 7 - m : 8 + m); }

inline uint32_t iq3_byte(const std::byte* p, size_t i) { return std::to_integer<uint32_t>(p[i]); }

// Sub-block s of an IQ3_XXS block (d, qs[64], then a word per sub-block): 8 entries of qs, one per 4 elements, and
// its word of four 7-bit sign fields (bit j of field k: element 8 k + j negative; the eighth sign keeps the number
// of minus signs even) with a 4-bit scale on top.
inline void iq3_xxs_sub_block(const std::byte* b, uint32_t s, uint8_t* codes, uint8_t* scale) {
  uint32_t word;
  std::memcpy(&word, b + 66 + 4 * s, 4);
  *scale = uint8_t(word >> 28);
  for (uint32_t k = 0; k < 4; ++k) {
    uint32_t signs = (word >> (7 * k)) & 127;
    signs |= uint32_t(std::popcount(signs) & 1) << 7;
    for (uint32_t j = 0; j < 8; ++j) {
      uint32_t entry = iq3_byte(b + 2, 8 * s + 2 * k + j / 4);
      codes[8 * k + j] = iq3_signed_code(iq3_magnitude_index(kIq3XxsGrid, entry, j % 4), (signs >> j) & 1);
    }
  }
}

// Sub-block s of an IQ3_S block: d, qs[64] (the low 8 bits of each 4 elements' grid entry), qh[8] (byte s: bit q
// is the ninth bit of quad q's entry), signs[32] (bit j of byte 4 s + k: element 8 k + j negative), scales[4]
// (sub-block s's scale in the low (s even) or high nibble of byte s / 2).
inline void iq3_s_sub_block(const std::byte* b, uint32_t s, uint8_t* codes, uint8_t* scale) {
  *scale = uint8_t((iq3_byte(b + 106, s / 2) >> (4 * (s % 2))) & 15);
  uint32_t high = iq3_byte(b + 66, s);
  for (uint32_t q = 0; q < 8; ++q) {
    uint32_t entry = iq3_byte(b + 2, 8 * s + q) | ((high >> q) & 1) << 8;
    uint32_t signs = iq3_byte(b + 74, 4 * s + q / 2) >> (4 * (q % 2));
    for (uint32_t j = 0; j < 4; ++j)
      codes[4 * q + j] = iq3_signed_code(iq3_magnitude_index(kIq3SGrid, entry, j), (signs >> j) & 1);
  }
}

// The 256 elements of block b (IQ3_XXS where `xxs`, else IQ3_S) as signed magnitudes: codes[i] = 8 + m for
// +magnitude m and 7 - m for -magnitude m (m < 8), and each 32-element sub-block's 4-bit scale in scales[s].
// Element i is worth d (0.5 + scale) 0.5 iq3_level(code) (IQ3_XXS) or d (1 + 2 scale) iq3_level(code) (IQ3_S),
// d the block's f16 at byte 0.
inline void iq3_codes(bool xxs, const std::byte* b, uint8_t* codes, uint8_t* scales) {
  for (uint32_t s = 0; s < 8; ++s) (xxs ? iq3_xxs_sub_block : iq3_s_sub_block)(b, s, codes + 32 * s, scales + s);
}

// The value a code of iq3_codes stands for: -magnitude[7 - code] below 8, magnitude[code - 8] from 8.
inline int iq3_level(bool xxs, uint8_t code) {
  const int* magnitudes = xxs ? kIq3XxsMagnitudes : kIq3SMagnitudes;
  return code >= 8 ? magnitudes[code - 8] : -magnitudes[7 - code];
}

}  // namespace gerbil
