// Decoding of ggml's block formats in the GPU layout kernels::pack_rows() makes (WEIGHT_TYPE 3..18: Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q4_G / Q4_G128 (GPTQ / AWQ groups in blocks of 32 / 128), Q3_K and Q2_K, whose 3- and
// 2-bit codes are kept as nibbles, IQ4_NL, IQ4_XS, and IQ3_XXS and IQ3_S, whose grid entries are kept as nibble
// codes of signed levels; see kernels::WeightType for the layout). The including kernel
// declares WEIGHT_TYPE (weights.wgsl), `fn block_word(i: u32) -> u32`, word i of its weight binding, and
// `fn block_words4(i: u32) -> vec4<u32>`, words i .. i + 3 for i a multiple of 4 (one 16-byte load).
// A row of K elements is three runs of words (BlockRow): the quants of its 32-element chunks, their high bits and the
// headers (scales) of its blocks (32, 128 or 256 elements). Chunk c = elements 32c .. 32c + 31 is 8 quads of 4 integer
// quants q (quad_quants) and a ChunkScale: element 4 quad + i of the chunk is
//   scale[quad / 4] * q[i] - offset[quad / 4],
// every product exact in f32 (an f16 times integers of at most 25 bits together; IQ4_XS's d (scale - 32) times a
// level rounds once, as ggml's does), so a kernel that computes that expression gets ggml's dequantized value bit for
// bit, and a dot product can take the scale out of its sum. IQ4_NL's, IQ4_XS's, IQ3_XXS's and IQ3_S's q are the
// levels their codes pick (level_table). A kernel that includes this calls load_block_tables() at the start of its
// entry point.
// Integers become floats through the 2^23 trick (byte_floats), integer and float adds only: GPUs convert
// integers to floats at a quarter of their add rate, which a 4-bit decode at memory speed cannot afford.

struct ChunkScale {
  scale: vec2<f32>,   // of elements 0..15 and 16..31 (only Q6_K's, Q3_K's and Q2_K's differ: theirs cover 16)
  offset: vec2<f32>,  // the same halves' minimum, negated for Q4_1 / Q5_1 (whose values are q * d + m); Q4_G(128)
                      // d z (only Q2_K's halves differ)
}

// Where a row's runs start, in words of the weight binding.
struct BlockRow {
  quants: u32,
  high: u32,
  headers: u32,
}

fn block_elements() -> u32 {
  switch (WEIGHT_TYPE) {
    case 8u, 9u, 10u, 13u, 14u, 16u, 17u, 18u: { return 256u; }
    case 12u: { return 128u; }
    default: { return 32u; }
  }
}

// Words of quants per chunk: 32 int8 (Q8_0) or 32 nibbles.
fn chunk_quant_words() -> u32 {
  return select(4u, 8u, WEIGHT_TYPE == 3u);
}

// Words of high bits per chunk: one fifth bit (Q5_0, Q5_1, Q5_K) or two top bits (Q6_K) an element.
fn chunk_high_words() -> u32 {
  switch (WEIGHT_TYPE) {
    case 6u, 7u, 9u: { return 1u; }
    case 10u: { return 2u; }
    default: { return 0u; }
  }
}

// Bytes of a block's header: d (f16); d, m (Q4_G / Q4_G128: d, z); d, dmin and 12 bytes of 6-bit scales and
// mins; Q6_K's 16 int8 scales, d and 2 bytes of padding; Q3_K's 12 bytes of 6-bit scales, d and 2 bytes of padding;
// Q2_K's 16 bytes of 4-bit scales and mins, d and dmin; IQ4_NL's d; IQ4_XS's d, scales_h and scales_l; IQ3_XXS's and
// IQ3_S's d, 2 zero bytes and the 8 4-bit scales of their sub-blocks.
fn header_bytes() -> u32 {
  switch (WEIGHT_TYPE) {
    case 3u, 4u, 6u, 15u: { return 2u; }
    case 5u, 7u, 11u, 12u: { return 4u; }
    case 16u, 17u, 18u: { return 8u; }
    case 8u, 9u, 13u: { return 16u; }
    default: { return 20u; }
  }
}

// A row's words: its runs padded to 16 bytes (kernels::weight_row_bytes).
fn block_row_words(K: u32) -> u32 {
  let bytes = K / 32u * 4u * (chunk_quant_words() + chunk_high_words()) + K / block_elements() * header_bytes();
  return (bytes + 15u) / 16u * 4u;
}

// Row `row` (of K elements) of the weight.
fn block_row(row: u32, K: u32) -> BlockRow {
  return block_row_at(row * block_row_words(K), K);
}

// The row (of K elements) whose quants start at word `quants`.
fn block_row_at(quants: u32, K: u32) -> BlockRow {
  let high = quants + K / 32u * chunk_quant_words();
  return BlockRow(quants, high, high + K / 32u * chunk_high_words());
}

// Whether each 16 elements of a chunk have a scale of their own (Q6_K, Q3_K, Q2_K): then a dot product scales each
// half's sum apart.
fn halves_scaled() -> bool {
  return WEIGHT_TYPE == 10u || WEIGHT_TYPE == 13u || WEIGHT_TYPE == 14u;
}

// Whether each 16 elements of a chunk have a minimum of their own (Q2_K).
fn halves_offset() -> bool {
  return WEIGHT_TYPE == 14u;
}

// Whether values have an offset (a minimum): then a dot product needs the sum of x over the chunk.
fn blocks_have_offset() -> bool {
  return WEIGHT_TYPE == 5u || WEIGHT_TYPE == 7u || WEIGHT_TYPE == 8u || WEIGHT_TYPE == 9u || WEIGHT_TYPE == 11u ||
         WEIGHT_TYPE == 12u || WEIGHT_TYPE == 14u;
}

// The four bytes of w less `zero`, as exact floats: (2^23 + b) - (2^23 + zero), the zero point folded into the
// one subtraction.
fn byte_floats(w: u32, zero: f32) -> vec4<f32> {
  let b = (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
  return bitcast<vec4<f32>>(b | vec4<u32>(0x4B000000u)) - vec4<f32>(8388608.0 + zero);
}

// The word of a chunk's quants holding quad `quad` (nibbles: its low or high nibbles), and of its high bits.
fn quad_quant_word(quad: u32) -> u32 {
  return select(quad % 4u, quad, WEIGHT_TYPE == 3u);
}

fn quad_high_word(quad: u32) -> u32 {
  return select(0u, quad / 4u, WEIGHT_TYPE == 10u);
}

// The integer quants of quad `quad` of a chunk, biased to be unsigned, as the four bytes of a word (quad_bytes; from
// its words quad_quant_word, quad_high_word; `high` unused for types without high bits), and the bias (quad_zero):
// the quants are the bytes less the bias (quad_quants).
fn quad_bytes(quant: u32, high: u32, quad: u32) -> u32 {
  if (WEIGHT_TYPE == 3u) {
    return quant ^ 0x80808080u;  // int8: flipping the sign bits makes b + 128
  }
  var bits = (quant >> (4u * (quad / 4u))) & 0x0F0F0F0Fu;
  if (chunk_high_words() == 1u) {
    bits |= ((high >> quad) & 0x01010101u) << 4u;
  }
  if (WEIGHT_TYPE == 10u) {
    bits |= ((high >> (2u * (quad % 4u))) & 0x03030303u) << 4u;
  }
  return bits;
}

fn quad_zero() -> f32 {
  switch (WEIGHT_TYPE) {
    case 3u: { return 128.0; }
    case 4u: { return 8.0; }
    case 13u: { return 4.0; }
    case 6u: { return 16.0; }
    case 10u: { return 32.0; }
    default: { return 0.0; }
  }
}

fn quad_quants(quant: u32, high: u32, quad: u32) -> vec4<f32> {
  let bytes = quad_bytes(quant, high, quad);
  if (has_levels()) {
    return vec4<f32>(level_table[bytes & 0xFu], level_table[(bytes >> 8u) & 0xFu],
                     level_table[(bytes >> 16u) & 0xFu], level_table[bytes >> 24u]);
  }
  return byte_floats(bytes, quad_zero());
}

// Types whose 4-bit codes pick one of 16 levels: IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S.
fn has_levels() -> bool {
  return WEIGHT_TYPE >= 15u && WEIGHT_TYPE <= 18u;
}

// The levels of each type's codes: IQ4_NL / IQ4_XS ggml's kvalues_iq4nl, a grid denser near zero; IQ3_XXS / IQ3_S
// their grids' 8 magnitudes, negated below code 8 (model/iq3.h's iq3_level). Kept in workgroup memory, 16 words in
// 16 banks, so that a warp's lookups never conflict (WGSL has no other cheap table: a constant array indexed at run
// time becomes memory private to each thread). Declared private here, unused; kernels::wgsl_for() makes it a
// workgroup variable in these types' pipelines only: Dawn counts a workgroup variable against the adapter's limit
// even where only a branch an override rules out touches it, and the product kernels' own arrays already take
// WebGPU's guaranteed 16 KiB.
const IQ4_LEVELS = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0,
                                  53.0, 69.0, 89.0, 113.0);
const IQ3_XXS_LEVELS = array<f32, 16>(-62.0, -52.0, -44.0, -36.0, -28.0, -20.0, -12.0, -4.0, 4.0, 12.0, 20.0, 28.0,
                                      36.0, 44.0, 52.0, 62.0);
const IQ3_S_LEVELS = array<f32, 16>(-15.0, -13.0, -11.0, -9.0, -7.0, -5.0, -3.0, -1.0, 1.0, 3.0, 5.0, 7.0, 9.0, 11.0,
                                    13.0, 15.0);
var<private> level_table: array<f32, 16>;

// Every kernel that decodes blocks calls this first, in uniform control flow: the level types' table is filled
// (and a barrier passed) before any lookup.
fn load_block_tables(lid: u32) {
  if (has_levels()) {
    if (lid < 16u) {
      switch (WEIGHT_TYPE) {
        case 17u: { level_table[lid] = IQ3_XXS_LEVELS[lid]; }
        case 18u: { level_table[lid] = IQ3_S_LEVELS[lid]; }
        default: { level_table[lid] = IQ4_LEVELS[lid]; }
      }
    }
    workgroupBarrier();
  }
}

// Q4_K / Q5_K: sub-block j's 6-bit scale and minimum from the 12 bytes of words w (a block's words 1..3): bytes
// j % 4 of the three words, combined without a branch (lanes of a team decode different sub-blocks).
fn k_scale_min(w: vec3<u32>, j: u32) -> vec2<f32> {
  let shift = 8u * (j % 4u);
  let low = (w.xy >> vec2<u32>(shift)) & vec2<u32>(0xFFu);
  let high = (w.z >> shift) & 0xFFu;
  let upper = vec2<u32>(high & 0xFu, high >> 4u) | ((low >> vec2<u32>(6u)) << vec2<u32>(4u));
  return vec2<f32>(select(upper, low & vec2<u32>(63u), j < 4u));
}

// The header words chunk c's scale is decoded from (chunk_scale_of), in the first components: Q8_0 / Q4_0 / Q5_0 /
// IQ4_NL the word holding the block's d; IQ4_XS d | scales_h << 16 and scales_l; Q4_1 / Q5_1 d, m (Q4_G / Q4_G128
// d, z); Q4_K / Q5_K / Q3_K the block's 4 words; Q6_K the word of the chunk's two int8 scales and the word of d (Q2_K:
// of its two scale bytes, and of d and dmin).
// Reading them apart from decoding them lets a kernel issue the loads early and decode once they have arrived
// (linear_tiled_body.wgsl decodes after a slab's products).
fn chunk_header(r: BlockRow, c: u32) -> vec4<u32> {
  let b = c / (block_elements() / 32u);
  switch (WEIGHT_TYPE) {
    case 3u, 4u, 6u, 15u: {
      return vec4<u32>(block_word(r.headers + b / 2u), 0u, 0u, 0u);
    }
    case 16u, 17u, 18u: {
      return vec4<u32>(block_word(r.headers + 2u * b), block_word(r.headers + 2u * b + 1u), 0u, 0u);
    }
    case 5u, 7u, 11u, 12u: {
      return vec4<u32>(block_word(r.headers + b), 0u, 0u, 0u);
    }
    case 8u, 9u, 13u: {
      // A K-quant's 16-byte header starts a multiple of 16 bytes into its row (rows start at multiples of 16
      // bytes, their quants and high bits are whole 16-byte pieces): one load, not four.
      return block_words4(r.headers + 4u * b);
    }
    default: {
      let base = r.headers + 5u * b;
      return vec4<u32>(block_word(base + (c % 8u) / 2u), block_word(base + 4u), 0u, 0u);
    }
  }
}

// Q3_K: sub-block s's scale, ggml's 6-bit value less 32, from the 12 bytes of words w (a block's words 0..2): its low
// 4 bits are nibble s / 8 of byte s % 8, its top 2 bits bits 2 (s / 4) of byte 8 + s % 4.
fn q3k_scale(w: vec3<u32>, s: u32) -> f32 {
  let low = (select(w.y, w.x, s % 8u < 4u) >> (8u * (s % 4u) + 4u * (s / 8u))) & 0xFu;
  let high = (w.z >> (8u * (s % 4u) + 2u * (s / 4u))) & 3u;
  return f32(i32(low | (high << 4u)) - 32);
}

// Chunk c's scale from its header words (chunk_header).
fn chunk_scale_of(h: vec4<u32>, c: u32) -> ChunkScale {
  switch (WEIGHT_TYPE) {
    case 3u, 4u, 6u, 15u: {
      return ChunkScale(vec2<f32>(unpack2x16float(h.x)[c % 2u]), vec2<f32>(0.0));  // 32-element blocks: b = c
    }
    case 16u: {
      // IQ4_XS: sub-block j's 6-bit scale has its low 4 bits in nibble j of scales_l and its top 2 in bits 2 j
      // of scales_h; d (scale - 32) is exact in f32 (11 and 6 bits).
      let j = c % 8u;
      let scale = ((h.y >> (4u * j)) & 0xFu) | (((h.x >> (16u + 2u * j)) & 3u) << 4u);
      return ChunkScale(vec2<f32>(unpack2x16float(h.x).x * f32(i32(scale) - 32)), vec2<f32>(0.0));
    }
    case 17u, 18u: {
      // IQ3_XXS: d (ls + 1/2) / 2, IQ3_S: d (2 ls + 1), ls the 4-bit scale in nibble j of the second word; exact
      // in f32 (11 and 5 bits), as ggml's.
      let ls = f32((h.y >> (4u * (c % 8u))) & 0xFu);
      let d = unpack2x16float(h.x).x;
      return ChunkScale(vec2<f32>(select(d * (2.0 * ls + 1.0), d * (2.0 * ls + 1.0) * 0.25, WEIGHT_TYPE == 17u)),
                        vec2<f32>(0.0));
    }
    case 5u, 7u: {
      let head = unpack2x16float(h.x);
      return ChunkScale(vec2<f32>(head.x), vec2<f32>(-head.y));
    }
    case 11u, 12u: {
      let head = unpack2x16float(h.x);  // d (q - z) = d q - d z, d z exact in f32 (z at most 16)
      return ChunkScale(vec2<f32>(head.x), vec2<f32>(head.x * head.y));
    }
    case 8u, 9u: {
      let head = unpack2x16float(h.x);
      let sm = k_scale_min(h.yzw, c % 8u);
      return ChunkScale(vec2<f32>(head.x * sm.x), vec2<f32>(head.y * sm.y));
    }
    case 13u: {
      let j = 2u * (c % 8u);  // the chunk's two sub-blocks of 16
      return ChunkScale(unpack2x16float(h.w).x * vec2<f32>(q3k_scale(h.xyz, j), q3k_scale(h.xyz, j + 1u)),
                        vec2<f32>(0.0));
    }
    case 14u: {
      // Q2_K: chunk j's 16-element halves take bytes 2j and 2j + 1 of the scales, a scale in the low nibble and a
      // minimum in the high one, times d and dmin.
      let dm = unpack2x16float(h.y);
      let word = h.x >> (16u * ((c % 8u) % 2u));
      let bytes = vec2<u32>(word & 0xFFu, (word >> 8u) & 0xFFu);
      return ChunkScale(dm.x * vec2<f32>(bytes & vec2<u32>(15u)), dm.y * vec2<f32>(bytes >> vec2<u32>(4u)));
    }
    default: {
      // Q6_K: chunk j's 16-element scales are int8 scales 2j and 2j + 1, one half of word j / 2.
      let d = unpack2x16float(h.y).x;
      let word = h.x >> (16u * ((c % 8u) % 2u));
      let scales = vec2<i32>(i32(word << 24u), i32(word << 16u)) >> vec2<u32>(24u);
      return ChunkScale(d * vec2<f32>(scales), vec2<f32>(0.0));
    }
  }
}

// What a chunk's quants need beside them, loaded together: its header words (chunk_header) and high-bit words
// (Q5_0, Q5_1, Q5_K: one; Q6_K: two, quad_high_word; zeros for types without high bits).
struct ChunkSide {
  header: vec4<u32>,
  high: vec2<u32>,
}

fn chunk_side(r: BlockRow, c: u32) -> ChunkSide {
  var side = ChunkSide(chunk_header(r, c), vec2<u32>(0u));
  let words = chunk_high_words();
  if (words > 0u) {
    side.high.x = block_word(r.high + c * words);
  }
  if (words > 1u) {
    side.high.y = block_word(r.high + c * words + 1u);
  }
  return side;
}

// The words quad `quad` of chunk c is decoded from (quad_quants): its quants' word and its high bits' word (0
// for types without high bits).
fn quad_words(r: BlockRow, c: u32, quad: u32) -> vec2<u32> {
  let quant = block_word(r.quants + c * chunk_quant_words() + quad_quant_word(quad));
  var high = 0u;
  if (chunk_high_words() != 0u) {
    high = block_word(r.high + c * chunk_high_words() + quad_high_word(quad));
  }
  return vec2<u32>(quant, high);
}

// Elements 4 quad .. 4 quad + 3 of chunk c, as ggml dequantizes them, from the chunk's header words
// (chunk_header) and the quad's words (quad_words).
fn quad_values(header: vec4<u32>, words: vec2<u32>, c: u32, quad: u32) -> vec4<f32> {
  return scaled_quad(chunk_scale_of(header, c), quad_quants(words.x, words.y, quad), quad);
}

// Elements 4 quad .. 4 quad + 3 of a chunk, as ggml dequantizes them, from its scale and the quad's integer quants
// (quad_quants).
fn scaled_quad(s: ChunkScale, quants: vec4<f32>, quad: u32) -> vec4<f32> {
  return select(s.scale.x, s.scale.y, quad >= 4u) * quants - select(s.offset.x, s.offset.y, quad >= 4u);
}

// Elements 4 quad .. 4 quad + 3 of chunk c, as ggml dequantizes them.
fn chunk_values(r: BlockRow, c: u32, quad: u32) -> vec4<f32> {
  return quad_values(chunk_header(r, c), quad_words(r, c, quad), c, quad);
}
