// Linear for decoding (M <= 4 rows) with block-quantized weights (WEIGHT_TYPE 3..18, include/blocks.wgsl): the
// contract of linear.wgsl,
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
// with W's rows in kernels::pack_rows()'s layout (K a multiple of the block size). No fusions: the graph
// normalises x and applies gate activations with their own dispatches for these weights (linear_can_fuse).
// Decoding streams every weight once, so the work is cut for memory: a team of TEAM threads serves COLS output
// columns, each lane taking whole 32-element chunks of the rows (lane l chunks l, l + TEAM, ...; IN_FLIGHT of them
// a pass, so that their loads are in flight together). A lane reads a chunk's quants of each column in one
// 16-byte load (pack_rows keeps a row's chunks of quants back to back, so a team's load reads 16 * TEAM
// contiguous bytes), decodes each quad in registers where its values lie in their word (field_quants; x staged
// scaled to match) and takes the chunk's scale out of its dot products
// (sum scale * q * x = scale * sum q * x, less offset * sum x for formats with a minimum, the sum of x shared by
// the COLS columns). x reaches the lanes through workgroup memory: a lane's own chunk of x lies in one cache
// line, so reading it from memory touches a line per lane and load instruction, while workgroup memory serves a
// quarter warp's 16-byte reads in one pass when they fall in different banks. The workgroup stages x a segment
// at a time (STAGE_QUADS vec4s for all ROWS rows), each chunk's quads rotated by its index (staged_quad), so that
// the 8 neighbouring lanes reading quad q of 8 consecutive chunks meet 8 different groups of banks. The lanes'
// sums meet in workgroup memory (the same array).
// On an H200 (2026-12-03, random GGUF files, tg128 tok/s, the same call) this layout took Llama-3-8B's shape from
// 228.8 to 252.2 in Q4_0 (bench kernels, down: 0.0330 -> 0.0298 ms) against the earlier kernel (4 lanes sharing
// a chunk, x and words read from memory); the same lanes reading x from memory instead of staging it ran at
// 167.9 (down 0.0431 ms). Qwen2.5-0.5B's, whose rows of 896 give a workgroup little to stage x for, lost 1.4 %
// (Q8_0 700.3 -> 690.3); staging only for teams of at most 32 or 64 lanes lost more there (677.4, 682.0).
// Decoding values in place (field_quants; 2026-12-04, same call) took the 8B's Q4_0 from 258.0 to 283.7
// (gate_up 0.0493 -> 0.0436 ms) and Q4_K_M from 230.6 to 247.1.
// Bindings (group 0): 0 x [M, K] read (as vec4), 1 W read (vec4<u32>: a chunk's quants in one 16-byte load; a
//                     header or high-bit word picked from its vector), 2 bias [N] read, 3 residual read,
//                     4 out [M, out_stride] read_write, 5 params uniform.
// Dispatch: ceil(N / (COLS * 256 / TEAM)) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

//!include linear_params.wgsl
//!include weights.wgsl

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> W: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

//!include linear_store.wgsl
//!include blocks.wgsl

fn block_word(i: u32) -> u32 {
  return W[i / 4u][i % 4u];
}

fn block_words4(i: u32) -> vec4<u32> {
  return W[i / 4u];
}

override ROWS: u32 = 1u;       // M, 1..4
override COLS: u32 = 1u;       // output columns per team, 1..4
override TEAM: u32 = 32u;      // threads per team, a power of two from 16 to 256
override IN_FLIGHT: u32 = 2u;  // chunks a lane takes per pass: 1 or 2

const WORKGROUP_SIZE: u32 = 256u;
// x staged for a segment: ROWS rows of segment_quads() vec4s each (16 KiB); at the end, the lanes' sums
// [thread][column] (as many vec4s).
const STAGE_QUADS: u32 = 4u * WORKGROUP_SIZE;
var<workgroup> staged_x: array<vec4<f32>, STAGE_QUADS>;

// Quads (vec4s) of x per row in a segment: whole chunks, ROWS rows in STAGE_QUADS.
fn segment_quads() -> u32 {
  return STAGE_QUADS / ROWS / 8u * 8u;
}

// Where quad q of the segment's chunk c of row m lies in staged_x: chunk c's quads rotated by c, so that lanes
// reading the same quad of 8 consecutive chunks hit 8 different 16-byte bank groups.
fn staged_quad(m: u32, c: u32, q: u32) -> u32 {
  return m * segment_quads() + 8u * c + (q + c) % 8u;
}

// Quants are decoded where they lie in a word: a field of `width` bits at bit p (p + width <= 23), with the
// exponent bits of 2^23 around it, is the float 2^23 + v 2^p, so one AND with (field mask << p | the sign and
// exponent bits) and one subtraction of 2^23 + zero 2^p give (v - zero) 2^p exactly; x staged times 2^-p makes
// each product (v - zero) x exactly. That takes one logic operation a value where moving each value down to the
// bottom of its word took three (a shift and two masks, in the H200's machine code). The word is the chunk's word
// of quants itself for 4-bit formats (Q4_0, Q4_1, Q4_K, Q4_G, Q4_G128: quad q < 4 the low nibbles of word q, else
// the high nibbles of word q - 4), and the quad's biased quants as bytes (quad_bytes) for the others. Fields that
// end above bit 22 are taken from the word shifted right by field_shift(). IQ4_NL's and IQ4_XS's codes pick
// levels (level_table), as do IQ3_XXS's and IQ3_S's, which need the code itself: their quads are quad_quants' values, at bit 0.
fn nibbles_in_place() -> bool {
  return chunk_quant_words() == 4u && chunk_high_words() == 0u && !has_levels();  // nibbles with no high bits
}

fn field_shift() -> u32 {
  return select(16u, 12u, nibbles_in_place());
}

// Whether each of quad `quad`'s values is taken from the shifted word, and at which bit of its word it lies:
// nibbles at bits 0, 8, 16, 24 (quads 0-3) or 4, 12, 20, 28 (quads 4-7), the last one or two shifted by 12;
// bytes at 0, 8, 16, 24, the last shifted by 16 (all of Q8_0's top two bytes, whose fields are 8 bits wide).
fn field_shifted(quad: u32) -> vec4<bool> {
  if (nibbles_in_place()) {
    return vec4<bool>(false, false, quad >= 4u, true);
  }
  return vec4<bool>(false, false, WEIGHT_TYPE == 3u, true);
}

fn field_bits(quad: u32) -> vec4<u32> {
  if (has_levels()) {
    return vec4<u32>(0u);
  }
  if (nibbles_in_place()) {
    return select(vec4<u32>(0u, 8u, 16u, 12u), vec4<u32>(4u, 12u, 8u, 16u), quad >= 4u);
  }
  return select(vec4<u32>(0u, 8u, 16u, 8u), vec4<u32>(0u, 8u, 0u, 8u), WEIGHT_TYPE == 3u);
}

// A value's bits: Q8_0's 8; a nibble and the chunk's high bits an element (none, Q5's one, Q6_K's two) otherwise.
fn field_mask() -> u32 {
  return select((16u << chunk_high_words()) - 1u, 0xFFu, WEIGHT_TYPE == 3u);
}

// 2^field_bits(quad) and its inverse, the x staged is scaled by, exact (the exponent field set directly).
fn field_place(quad: u32) -> vec4<f32> {
  return bitcast<vec4<f32>>((vec4<u32>(127u) + field_bits(quad)) << vec4<u32>(23u));
}

fn field_x_scale(quad: u32) -> vec4<f32> {
  return bitcast<vec4<f32>>((vec4<u32>(127u) - field_bits(quad)) << vec4<u32>(23u));
}

const FIELD_EXPONENT: u32 = 0x4B000000u;  // the bits of 2^23
const FIELD_HIGH_BITS: u32 = 0xFF800000u; // sign and exponent

// Quad `quad`'s values (v - quad_zero()) 2^field_bits(quad) from its words.
fn field_quants(quant: u32, high: u32, quad: u32) -> vec4<f32> {
  if (has_levels()) {
    return quad_quants(quant, high, quad);
  }
  let word = select(quad_bytes(quant, high, quad), quant, nibbles_in_place());
  let low = (word & 0x007FFFFFu) | FIELD_EXPONENT;
  let shifted = (word >> field_shift()) | FIELD_EXPONENT;
  let words = select(vec4<u32>(low), vec4<u32>(shifted), field_shifted(quad));
  let masks = (vec4<u32>(field_mask()) << field_bits(quad)) | vec4<u32>(FIELD_HIGH_BITS);
  return bitcast<vec4<f32>>(words & masks) - (vec4<f32>(8388608.0) + quad_zero() * field_place(quad));
}

// Copies quads [first, first + count) of every row of x into staged_x, times field_x_scale.
fn stage_x(first: u32, count: u32, lid: u32) {
  let row_quads = params.K / 4u;
  for (var m = 0u; m < ROWS; m++) {
    for (var i = lid; i < count; i += WORKGROUP_SIZE) {
      staged_x[staged_quad(m, i / 8u, i % 8u)] = x[m * row_quads + first + i] * field_x_scale(i % 8u);
    }
  }
}

// The words of chunk `chunk` of a row, loaded together: its quants (4 words, Q8_0 8) and the rest (chunk_side).
struct ChunkWords {
  quants: array<u32, 8>,
  side: ChunkSide,
}

fn chunk_words(r: BlockRow, chunk: u32) -> ChunkWords {
  var w: ChunkWords;
  let first = block_words4(r.quants + chunk * chunk_quant_words());
  w.quants[0] = first.x;
  w.quants[1] = first.y;
  w.quants[2] = first.z;
  w.quants[3] = first.w;
  if (chunk_quant_words() == 8u) {
    let second = block_words4(r.quants + chunk * 8u + 4u);
    w.quants[4] = second.x;
    w.quants[5] = second.y;
    w.quants[6] = second.z;
    w.quants[7] = second.w;
  }
  w.side = chunk_side(r, chunk);
  return w;
}

// Chunk `chunk`'s words of the COLS rows.
fn columns_words(rows: array<BlockRow, 4>, chunk: u32) -> array<ChunkWords, 4> {
  var words: array<ChunkWords, 4>;
  for (var c = 0u; c < COLS; c++) {
    words[c] = chunk_words(rows[c], chunk);
  }
  return words;
}

// Adds chunk `chunk` of the rows (the segment's chunk `local`, staged) to acc[column][row]: the quads' dot
// products with the integer quants are summed first and scaled once per chunk; offsets come out of the sum of
// x: sum (scale q - offset) x = scale sum q x - offset sum x.
fn add_chunk(chunk: u32, local: u32, words: array<ChunkWords, 4>, acc: ptr<function, array<vec4<f32>, 4>>) {
  var sums: array<vec4<f32>, 4>;  // [column][row]: sum of q x over the chunk (halves_scaled: scaled already)
  var x_sums = vec4<f32>(0.0);    // [row]: sum of x over it (formats with an offset; halves_offset: its first half)
  var x_sums_high = vec4<f32>(0.0);  // halves_offset: [row]: sum of x over the chunk's second half
  var scales: array<ChunkScale, 4>;
  for (var c = 0u; c < COLS; c++) {
    scales[c] = chunk_scale_of(words[c].side.header, chunk);
  }
  for (var quad = 0u; quad < 8u; quad++) {
    var xs: array<vec4<f32>, 4>;
    for (var m = 0u; m < ROWS; m++) {
      xs[m] = staged_x[staged_quad(m, local, quad)];
      if (blocks_have_offset()) {
        let x_sum = dot(xs[m], field_place(quad));  // the sum of x itself
        if (halves_offset() && quad >= 4u) {
          x_sums_high[m] += x_sum;
        } else {
          x_sums[m] += x_sum;
        }
      }
    }
    for (var c = 0u; c < COLS; c++) {
      let q = field_quants(words[c].quants[quad_quant_word(quad)], words[c].side.high[quad_high_word(quad)], quad);
      if (halves_scaled()) {
        // Q6_K's and Q3_K's two halves of a chunk have scales of their own: each quad's dot product is scaled by
        // its half's (one multiply-add a row, not a multiply per weight).
        let scale = select(scales[c].scale.x, scales[c].scale.y, quad >= 4u);
        for (var m = 0u; m < ROWS; m++) {
          sums[c][m] = fma(dot(xs[m], q), scale, sums[c][m]);
        }
      } else {
        for (var m = 0u; m < ROWS; m++) {
          sums[c][m] += dot(xs[m], q);
        }
      }
    }
  }
  for (var c = 0u; c < COLS; c++) {
    if (halves_scaled()) {
      (*acc)[c] += sums[c];
    } else {
      (*acc)[c] += scales[c].scale.x * sums[c];
    }
    if (blocks_have_offset()) {
      (*acc)[c] -= scales[c].offset.x * x_sums;
    }
    if (halves_offset()) {
      (*acc)[c] -= scales[c].offset.y * x_sums_high;
    }
  }
}

// Adds the lane's chunks `local`, `local + TEAM`, ... of the staged segment (`chunks` of them, the first of
// which is the rows' chunk `first`), IN_FLIGHT a pass with all their loads issued first.
fn add_segment(first: u32, chunks: u32, lane: u32, rows: array<BlockRow, 4>,
               acc: ptr<function, array<vec4<f32>, 4>>) {
  var local = lane;
  if (IN_FLIGHT == 2u) {
    for (; local + TEAM < chunks; local += 2u * TEAM) {
      let a = columns_words(rows, first + local);
      let b = columns_words(rows, first + local + TEAM);
      add_chunk(first + local, local, a, acc);
      add_chunk(first + local + TEAM, local + TEAM, b, acc);
    }
  }
  for (; local < chunks; local += TEAM) {
    add_chunk(first + local, local, columns_words(rows, first + local), acc);
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  load_block_tables(lid);
  let lane = lid % TEAM;
  let first = ((wid.x + wid.y * nwg.x) * (WORKGROUP_SIZE / TEAM) + lid / TEAM) * COLS;
  let N = params.N;
  // Columns past N read row N - 1 again and store nothing.
  var rows: array<BlockRow, 4>;
  for (var c = 0u; c < COLS; c++) {
    rows[c] = block_row(min(first + c, N - 1u), params.K);
  }
  var acc: array<vec4<f32>, 4>;  // acc[column][row]
  let row_quads = params.K / 4u;
  for (var start = 0u; start < row_quads; start += segment_quads()) {
    let count = min(segment_quads(), row_quads - start);
    workgroupBarrier();  // the previous segment's reads are done
    stage_x(start, count, lid);
    workgroupBarrier();
    add_segment(start / 8u, count / 8u, lane, rows, &acc);
  }
  workgroupBarrier();  // the last segment's reads are done: staged_x takes the sums
  for (var c = 0u; c < COLS; c++) {
    staged_x[4u * lid + c] = acc[c];
  }
  workgroupBarrier();
  for (var stride = TEAM / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      for (var c = 0u; c < COLS; c++) {
        staged_x[4u * lid + c] += staged_x[4u * (lid + stride) + c];
      }
    }
    workgroupBarrier();
  }
  // Lane c * ROWS + m stores column c of row m.
  let c = lane / ROWS;
  let m = lane % ROWS;
  if (c < COLS && first + c < N) {
    store(m, first + c, staged_x[4u * (lid - lane) + c][m]);
  }
}
