// Decoding of ggml's block formats in the word-aligned GPU layout kernels::pack_rows() makes (WEIGHT_TYPE 3..10:
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; see kernels::WeightType). The including kernel declares
// WEIGHT_TYPE (weights.wgsl) and `fn block_word(i: u32) -> u32`, word i of its weight binding.
// A row of K elements is K / block_elements() blocks of block_words() words. Kernels read it in chunks of 32
// elements (a Q4_0 ... Q8_0 block, or an eighth of a K-quant super-block), chunk c = elements 32c .. 32c + 31,
// as 8 quads of 4 integer quants q (chunk_quad) and a ChunkScale: element 4 quad + i of the chunk is
//   scale[quad / 4] * q[i] - offset,
// every product exact in f32 (an f16 times integers of at most 25 bits together), so a kernel that computes that
// expression gets ggml's dequantized value bit for bit, and a dot product can take the scale out of its sum.
// Integers become floats through the 2^23 trick (byte_floats), integer and float adds only: GPUs convert
// integers to floats at a quarter of their add rate, which a 4-bit decode at memory speed cannot afford.

struct ChunkScale {
  scale: vec2<f32>,  // of elements 0..15 and 16..31 (only Q6_K's differ: its scales cover 16 elements)
  offset: f32,       // the block's minimum, negated for Q4_1 / Q5_1 (whose values are q * d + m)
}

fn block_elements() -> u32 {
  return select(32u, 256u, WEIGHT_TYPE >= 8u);
}

fn block_words() -> u32 {
  switch (WEIGHT_TYPE) {
    case 3u: { return 9u; }        // Q8_0: d, 32 int8
    case 4u, 5u: { return 5u; }    // Q4_0: d; Q4_1: d | m << 16; then 16 bytes of nibbles
    case 6u, 7u: { return 6u; }    // Q5_0 / Q5_1: as Q4_0 / Q4_1 with the fifth bits (a word) before the nibbles
    case 8u: { return 36u; }       // Q4_K: d | dmin << 16, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
    case 9u: { return 44u; }       // Q5_K: as Q4_K with 32 bytes of fifth bits before the nibbles
    default: { return 53u; }       // Q6_K: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales, d
  }
}

fn block_row_words(K: u32) -> u32 {
  return K / block_elements() * block_words();
}

// Whether values have an offset (a minimum): then a dot product needs the sum of x over the chunk.
fn blocks_have_offset() -> bool {
  return WEIGHT_TYPE == 5u || WEIGHT_TYPE == 7u || WEIGHT_TYPE == 8u || WEIGHT_TYPE == 9u;
}

// The four bytes of w as exact floats: (2^23 + b) - 2^23.
fn byte_floats(w: u32) -> vec4<f32> {
  let b = (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
  return bitcast<vec4<f32>>(b | vec4<u32>(0x4B000000u)) - vec4<f32>(8388608.0);
}

// Bits 0..3 of h moved to bit 4 of bytes 0..3 (Q5_0 / Q5_1's fifth bits of four consecutive elements).
fn spread_fifth_bits(h: u32) -> u32 {
  return ((h & 1u) | ((h & 2u) << 7u) | ((h & 4u) << 14u) | ((h & 8u) << 21u)) << 4u;
}

// Q4_K / Q5_K: sub-block j's 6-bit scale and minimum from the 12 bytes at word base + 1: bytes j % 4 of their
// three words, read once and combined without a branch (lanes of a team decode different sub-blocks).
fn k_scale_min(base: u32, j: u32) -> vec2<f32> {
  let shift = 8u * (j % 4u);
  let low = (vec2<u32>(block_word(base + 1u), block_word(base + 2u)) >> vec2<u32>(shift)) & vec2<u32>(0xFFu);
  let high = (block_word(base + 3u) >> shift) & 0xFFu;
  let upper = vec2<u32>(high & 0xFu, high >> 4u) | ((low >> vec2<u32>(6u)) << vec2<u32>(4u));
  return vec2<f32>(select(upper, low & vec2<u32>(63u), j < 4u));
}

// The word where chunk c's block starts, in a row starting at word `row`.
fn chunk_block(row: u32, c: u32) -> u32 {
  return row + c / (block_elements() / 32u) * block_words();
}

fn chunk_scale(row: u32, c: u32) -> ChunkScale {
  let base = chunk_block(row, c);
  let head = unpack2x16float(block_word(base));  // d (and m or dmin) for all but Q6_K
  switch (WEIGHT_TYPE) {
    case 3u, 4u, 6u: {
      return ChunkScale(vec2<f32>(head.x), 0.0);
    }
    case 5u, 7u: {
      return ChunkScale(vec2<f32>(head.x), -head.y);
    }
    case 8u, 9u: {
      let sm = k_scale_min(base, c % 8u);
      return ChunkScale(vec2<f32>(head.x * sm.x), head.y * sm.y);
    }
    default: {
      // Q6_K: chunk j = 4 half + quarter; its 16-element scales are 8 half + 2 quarter and the next.
      let j = c % 8u;
      let first = 8u * (j / 4u) + 2u * (j % 4u);
      let d = unpack2x16float(block_word(base + 52u)).x;
      // first is even: both int8 scales lie in one word.
      let word = block_word(base + 48u + first / 4u) >> (8u * (first % 4u));
      let scales = vec2<i32>(i32(word << 24u), i32(word << 16u)) >> vec2<u32>(24u);
      return ChunkScale(d * vec2<f32>(scales), 0.0);
    }
  }
}

// The integer quants of elements 4 quad .. 4 quad + 3 of chunk c (zero points already subtracted).
fn chunk_quad(row: u32, c: u32, quad: u32) -> vec4<f32> {
  let base = chunk_block(row, c);
  let j = c % 8u;
  switch (WEIGHT_TYPE) {
    case 3u: {
      // int8: flipping the sign bits makes b + 128.
      return byte_floats(block_word(base + 1u + quad) ^ 0x80808080u) - vec4<f32>(128.0);
    }
    case 4u, 5u: {
      // Byte i holds element i (low nibble) and i + 16 (high).
      let nibbles = (block_word(base + 1u + quad % 4u) >> (4u * (quad / 4u))) & 0x0F0F0F0Fu;
      return byte_floats(nibbles) - select(vec4<f32>(0.0), vec4<f32>(8.0), WEIGHT_TYPE == 4u);
    }
    case 6u, 7u: {
      let nibbles = (block_word(base + 2u + quad % 4u) >> (4u * (quad / 4u))) & 0x0F0F0F0Fu;
      let fifth = spread_fifth_bits(block_word(base + 1u) >> (4u * quad));
      return byte_floats(nibbles | fifth) - select(vec4<f32>(0.0), vec4<f32>(16.0), WEIGHT_TYPE == 6u);
    }
    case 8u, 9u: {
      // Sub-block j = 2 pair + half: the low (half 0) or high nibbles of bytes 32 pair .. 32 pair + 31.
      let quants = select(4u, 12u, WEIGHT_TYPE == 9u);
      var q = (block_word(base + quants + 8u * (j / 2u) + quad) >> (4u * (j % 2u))) & 0x0F0F0F0Fu;
      if (WEIGHT_TYPE == 9u) {
        q |= ((block_word(base + 4u + quad) >> j) & 0x01010101u) << 4u;  // bit j of fifth-bit bytes l
      }
      return byte_floats(q);
    }
    default: {
      // Q6_K chunk j = 4 half + quarter: elements 32 quarter + l of the half, l < 32, take the low (quarters
      // 0, 1) or high (2, 3) nibbles of ql[64 half + 32 (quarter % 2) + l] and bits 2 quarter.. of qh[32 half + l].
      let half = j / 4u;
      let quarter = j % 4u;
      let low = (block_word(base + 16u * half + 8u * (quarter % 2u) + quad) >> (4u * (quarter / 2u))) & 0x0F0F0F0Fu;
      let high = ((block_word(base + 32u + 8u * half + quad) >> (2u * quarter)) & 0x03030303u) << 4u;
      return byte_floats(low | high) - vec4<f32>(32.0);
    }
  }
}

// Elements 4 quad .. 4 quad + 3 of chunk c, as ggml dequantizes them.
fn chunk_values(row: u32, c: u32, quad: u32) -> vec4<f32> {
  let s = chunk_scale(row, c);
  return select(s.scale.x, s.scale.y, quad >= 4u) * chunk_quad(row, c, quad) - s.offset;
}
