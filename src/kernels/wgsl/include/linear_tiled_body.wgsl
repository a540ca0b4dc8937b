// The body of linear_tiled.wgsl, linear_tiled_f16.wgsl and linear_tiled_rows.wgsl (see their headers), which
// differ in the type the products are computed in and in the largest tile their arrays hold. The including
// kernel declares, before this:
//   alias Product = f32 or f16;  the type of the workgroup tiles, the multiplications and the per-slab sums;
//   const SLAB_SUMS: bool;       true: each slab's TILE_K products per output are summed in Product, then added
//                                to f32 sums (f16); false: Product sums the whole of K (f32).
//   const X_SLOTS, W_SLOTS: u32; vec4 slots of a slab's k row of x and of W: the tallest and widest tile / 4
//                                (TILE_M / 4, TILE_N / 4) the kernel serves;
//                                they size the workgroup arrays, so a kernel of wider tiles needs more memory.

//!include linear_params.wgsl
//!include weights.wgsl
//!include linear_shares.wgsl
//!include blocks.wgsl

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> W: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;

// Word i of W, for block types (blocks.wgsl).
fn block_word(i: u32) -> u32 {
  return W[i / 4u][i % 4u];
}

fn block_words4(i: u32) -> vec4<u32> {
  return W[i / 4u];
}

// Block-quantized weights (WEIGHT_TYPE >= 3): each thread loads the words of its 4 k of a slab with the slab
// before and decodes them when it stages them, after that slab's products.
fn is_block_weight() -> bool {
  return WEIGHT_TYPE >= 3u;
}
@group(0) @binding(6) var<uniform> params: Params;

// GROUP_ROWS, GROUP_COLS, ROW_GROUPS, COL_GROUPS, TILE_M, TILE_N, WORKERS and TILE_K: linear_shares.wgsl.
const WORKGROUP_SIZE: u32 = 256u;
const_assert TILE_K == 8u;  // main writes a whole tile's slab out, one multiply_k per k
// A group's threads: THREAD_ROWS rows of THREAD_COLS threads, each owning 4 x 4 of its outputs.
override THREAD_ROWS: u32 = GROUP_ROWS / 4u;
override THREAD_COLS: u32 = WORKGROUP_SIZE / THREAD_ROWS;
// The rows of W a pass of the 256 threads stages (two threads a row, 4 k each); a tile of TILE_N columns takes
// TILE_N / STAGE_ROWS passes: one, or two (linear_tiled_rows.wgsl's 256 columns).
const STAGE_ROWS: u32 = WORKGROUP_SIZE / 2u;
// x_s[buffer][k][m / 4][m % 4], w_s likewise for n, in the Product type (f16 halves their size). Three indices
// rather than one flat one because the bounds checks WebGPU adds clamp every index that is not a constant: k
// is one once multiply_k is inlined and the slot is the same in every slab, so a slab takes 5 clamps (the
// buffer and 4 slots) instead of 32.
var<workgroup> x_s: array<array<array<vec4<Product>, X_SLOTS>, TILE_K>, 2>;
var<workgroup> w_s: array<array<array<vec4<Product>, W_SLOTS>, TILE_K>, 2>;

// One thread's share of a slab, held in registers between its load and its store.
// Every thread stages 4 k of one row of x and of one row of W: row = lid / 2, k = 4 * (lid % 2) .. + 3; of a
// tile wider than 128 columns also of W's row 128 + lid / 2 (w2, header2).
struct Staged {
  x: vec4<f32>,  // x[row, k .. k + 3]
  w: vec4<u32>,  // f32: W[row, k .. k + 3] as f32 bits;
                 // 16-bit: the row's whole slab W[row, 0 .. 7], packed: both
                 // threads of the row load it (one address, one transaction) and each decodes its 4 k, so all
                 // 256 threads share the decoding (a thread per row decoding all 8 left half of them idle and
                 // took f16 products ~15 % longer than f32 ones on an H200, run 80);
                 // block types: the words of the thread's quad (blocks.wgsl's quad_words) in x, y
  header: vec4<u32>,  // block types: its chunk's header words (chunk_header)
  w2: vec4<u32>,
  header2: vec4<u32>,
}

// Block types: this thread's quad of a row in slab s, 2 s + lid % 2 (8 quads to a 32-element chunk).
fn slab_quad(s: u32, lid: u32) -> u32 {
  return 2u * s + lid % 2u;
}

// Where one thread's pieces of a tile's rows start (slab 0), in x and in W; rows past M or N read the last
// row again, whose products land in outputs that are never stored. Fixed for a tile, so the slab loop
// keeps two indices, not the tile's corner and the bounds.
struct RowStarts {
  x: u32,
  w: u32,
  w2: u32,  // W's row STAGE_ROWS + lid / 2 (tiles wider than STAGE_ROWS)
}

// Whether a slab of W takes a second pass (a tile wider than STAGE_ROWS): a function of the overrides alone, so
// that the narrower kernels' pipelines drop the second pass's loads and stores.
fn two_passes() -> bool {
  return TILE_N > STAGE_ROWS;
}

// Where one thread's piece of W's row n starts (slab 0).
fn w_row_start(n: u32, lid: u32) -> u32 {
  let row = min(n, params.N - 1u);
  if (WEIGHT_TYPE == 0u) {
    return row * (params.K / 4u) + lid % 2u;
  }
  if (is_block_weight()) {
    return row * block_row_words(params.K);  // the row's first word (block_row_at)
  }
  return row * (params.K / 8u);
}

fn row_starts(m0: u32, n0: u32, lid: u32) -> RowStarts {
  let row = lid / 2u;
  var starts: RowStarts;
  starts.x = min(m0 + row, params.M - 1u) * (params.K / 4u) + lid % 2u;
  starts.w = w_row_start(n0 + row, lid);
  starts.w2 = w_row_start(n0 + STAGE_ROWS + row, lid);
  return starts;
}

// The words of this thread's 4 k of slab s of the W row starting at `start`; block types also its chunk's
// header words.
struct WeightPiece {
  w: vec4<u32>,
  header: vec4<u32>,
}

fn load_w(start: u32, s: u32, lid: u32) -> WeightPiece {
  var piece: WeightPiece;
  if (is_block_weight()) {
    // Only the words are loaded here; stage() decodes them after the slab's products, so that no thread
    // waits on these loads before its FMAs, as with 16-bit weights. Decoded here instead, Q4_K's q|k|v at
    // M = 512 took 0.905 ms against Q4_0's 0.727 and f16's 0.673 (H200, 2026-12-02).
    let quad = slab_quad(s, lid);
    let row = block_row_at(start, params.K);
    piece.w = vec4<u32>(quad_words(row, quad / 8u, quad % 8u), 0u, 0u);
    piece.header = chunk_header(row, quad / 8u);
  } else {
    piece.w = W[start + select(s, 2u * s, WEIGHT_TYPE == 0u)];
  }
  return piece;
}

// Loads slab s of the tile whose rows start at `starts`.
fn load(starts: RowStarts, s: u32, lid: u32) -> Staged {
  var staged: Staged;
  let row = lid / 2u;
  if (row < TILE_M) {
    staged.x = x[starts.x + 2u * s];
  }
  if (row < TILE_N) {
    let piece = load_w(starts.w, s, lid);
    staged.w = piece.w;
    staged.header = piece.header;
  }
  if (two_passes() && STAGE_ROWS + row < TILE_N) {
    let piece = load_w(starts.w2, s, lid);
    staged.w2 = piece.w;
    staged.header2 = piece.header;
  }
  return staged;
}

fn put_x(buffer: u32, k: u32, m: u32, value: f32) {
  x_s[buffer][k][m / 4u][m % 4u] = Product(value);
}

fn put_w(buffer: u32, k: u32, n: u32, value: f32) {
  w_s[buffer][k][n / 4u][n % 4u] = Product(value);
}

// This thread's 4 weights of a staged piece (load_w's w and header), decoded.
fn piece_values(w: vec4<u32>, header: vec4<u32>, s: u32, lid: u32) -> vec4<f32> {
  if (WEIGHT_TYPE == 1u || WEIGHT_TYPE == 2u) {
    // Words x, y hold k 0..3, words z, w k 4..7; selects, not a branch, keep the warp's lanes together.
    let first = lid % 2u == 0u;
    return vec4<f32>(halves(select(w.z, w.x, first)), halves(select(w.w, w.y, first)));
  }
  if (is_block_weight()) {
    let quad = slab_quad(s, lid);
    return quad_values(header, w.xy, quad / 8u, quad % 8u);
  }
  return bitcast<vec4<f32>>(w);
}

// Stores staged slab s, transposed, into `buffer`.
fn stage(staged: Staged, s: u32, buffer: u32, lid: u32) {
  let row = lid / 2u;
  let k = 4u * (lid % 2u);
  if (row < TILE_M) {
    for (var j: u32 = 0u; j < 4u; j++) {
      put_x(buffer, k + j, row, staged.x[j]);
    }
  }
  if (row < TILE_N) {
    let w = piece_values(staged.w, staged.header, s, lid);
    for (var j: u32 = 0u; j < 4u; j++) {
      put_w(buffer, k + j, row, w[j]);
    }
  }
  if (two_passes() && STAGE_ROWS + row < TILE_N) {
    let w = piece_values(staged.w2, staged.header2, s, lid);
    for (var j: u32 = 0u; j < 4u; j++) {
      put_w(buffer, k + j, STAGE_ROWS + row, w[j]);
    }
  }
}

// c[r] += a[r] * b: the outer product of 4 rows and 4 columns.
fn outer(a: vec4<Product>, b: vec4<Product>, c: mat4x4<Product>) -> mat4x4<Product> {
  return mat4x4<Product>(fma(vec4<Product>(a.x), b, c[0]), fma(vec4<Product>(a.y), b, c[1]),
                         fma(vec4<Product>(a.z), b, c[2]), fma(vec4<Product>(a.w), b, c[3]));
}

// acc_ij: rows m0 + GROUP_ROWS i + 4ty + r (column r of the matrix), columns n0 + GROUP_COLS j + 4tx + 0..3 of
// the tile (main).
// Module-scope so that multiply_k can update them; each invocation has its own, starting at zero. With
// SLAB_SUMS they hold one slab's sums, which add_slab() moves into sum_ij after every slab; otherwise they
// hold the whole sums and sum_ij go unused (and are compiled out).
var<private> acc00: mat4x4<Product>;
var<private> acc01: mat4x4<Product>;
var<private> acc10: mat4x4<Product>;
var<private> acc11: mat4x4<Product>;
var<private> sum00: mat4x4<f32>;
var<private> sum01: mat4x4<f32>;
var<private> sum10: mat4x4<f32>;
var<private> sum11: mat4x4<f32>;

// SLAB_SUMS: adds a slab's sums to the f32 sums and starts the next slab's from zero.
fn add_slab() {
  sum00 += mat4x4<f32>(acc00);
  sum01 += mat4x4<f32>(acc01);
  sum10 += mat4x4<f32>(acc10);
  sum11 += mat4x4<f32>(acc11);
  acc00 = mat4x4<Product>();
  acc01 = mat4x4<Product>();
  acc10 = mat4x4<Product>();
  acc11 = mat4x4<Product>();
}

// The f32 sums of a block, from its accumulator and its f32 sum.
fn block_sums(acc: mat4x4<Product>, sum: mat4x4<f32>) -> mat4x4<f32> {
  if (SLAB_SUMS) {
    return sum;
  }
  return mat4x4<f32>(acc);
}

// Row k of the slab in `buffer` times the thread's accumulators: 4 vec4 reads, up to 64 FMAs. a1 and b1 are
// unused, and so not read, in a tile of one row or column group (where their index may lie past the arrays).
fn multiply_k(buffer: u32, k: u32, tx: u32, ty: u32) {
  let a0 = x_s[buffer][k][ty];
  let a1 = x_s[buffer][k][THREAD_ROWS + ty];
  let b0 = w_s[buffer][k][tx];
  let b1 = w_s[buffer][k][THREAD_COLS + tx];
  acc00 = outer(a0, b0, acc00);
  if (COL_GROUPS == 2u) {
    acc01 = outer(a0, b1, acc01);
  }
  if (ROW_GROUPS == 2u) {
    acc10 = outer(a1, b0, acc10);
  }
  if (ROW_GROUPS == 2u && COL_GROUPS == 2u) {
    acc11 = outer(a1, b1, acc11);
  }
}

//!include linear_store.wgsl

// Where a thread's 4x4 blocks go: through the epilogue (slot == FINAL) or into a slot of partial sums.
const FINAL: u32 = 0xffffffffu;

// Writes a thread's 4x4 block at rows r .. r + 3, columns c .. c + 3 of the tile at (m0, n0) (row i in acc[i]).
fn store_block(slot: u32, m0: u32, n0: u32, r: u32, c: u32, acc: mat4x4<f32>) {
  for (var i: u32 = 0u; i < 4u; i++) {
    if (m0 + r + i < params.M) {
      for (var j: u32 = 0u; j < 4u; j++) {
        if (n0 + c + j < params.N) {
          if (slot == FINAL) {
            store(m0 + r + i, n0 + c + j, acc[i][j]);
          } else {
            partials[(slot * TILE_M + r + i) * TILE_N + c + j] = acc[i][j];
          }
        }
      }
    }
  }
}

// One slab of multiply_slabs: slab s's products from `buffer` while slab s + 1 is loaded, then slab s + 1 staged
// into the other buffer (the last slab loads and stages itself again, unconditionally, which keeps the loop free
// of branches around its loads: no one reads that buffer before the barrier that follows).
fn slab_step(starts: RowStarts, s: u32, end_slab: u32, buffer: u32, lid: u32) {
  let tx = lid % THREAD_COLS;
  let ty = lid / THREAD_COLS;
  let next_slab = min(s + 1u, end_slab - 1u);
  let next = load(starts, next_slab, lid);
  // Written out, so that each read sits at a constant offset: see the header.
  multiply_k(buffer, 0u, tx, ty);
  multiply_k(buffer, 1u, tx, ty);
  multiply_k(buffer, 2u, tx, ty);
  multiply_k(buffer, 3u, tx, ty);
  multiply_k(buffer, 4u, tx, ty);
  multiply_k(buffer, 5u, tx, ty);
  multiply_k(buffer, 6u, tx, ty);
  multiply_k(buffer, 7u, tx, ty);
  if (SLAB_SUMS) {
    add_slab();
  }
  stage(next, next_slab, 1u - buffer, lid);
  workgroupBarrier();
}

// Slabs [first_slab, end_slab) of the tile at (m0, n0) into the accumulators, from zero. Returns with every
// thread past a barrier after its last read of the workgroup arrays, so the next call may stage into them.
// Two slabs a turn of the loop, one from each buffer, so that every workgroup address is a constant offset from
// a base the loop keeps: with the buffer computed from s, an H100 recomputed the addresses and moved ~30
// registers each slab, ~110 instructions beside the 512 FMAs (bench/sass, thirty-ninth session).
fn multiply_slabs(m0: u32, n0: u32, first_slab: u32, end_slab: u32, lid: u32) {
  acc00 = mat4x4<Product>();
  acc01 = mat4x4<Product>();
  acc10 = mat4x4<Product>();
  acc11 = mat4x4<Product>();
  if (SLAB_SUMS) {
    sum00 = mat4x4<f32>();
    sum01 = mat4x4<f32>();
    sum10 = mat4x4<f32>();
    sum11 = mat4x4<f32>();
  }
  let starts = row_starts(m0, n0, lid);
  stage(load(starts, first_slab, lid), first_slab, 0u, lid);
  workgroupBarrier();
  for (var s: u32 = first_slab; s < end_slab; s += 2u) {
    slab_step(starts, s, end_slab, 0u, lid);
    if (s + 1u < end_slab) {
      slab_step(starts, s + 1u, end_slab, 1u, lid);
    }
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  load_block_tables(lid);
  let t = tiling();
  let slabs = t.slabs;
  // This workgroup's iterations [begin, end): a whole tile, or its share. The whole workgroup shares them, so
  // the returns and the loop below keep the barriers in uniform control flow.
  let worker = wid.x + wid.y * nwg.x;
  var begin = worker * slabs;
  var end = begin + slabs;
  if (WORKERS == 0u) {
    if (worker >= t.tiles) {
      return;
    }
  } else {
    if (worker >= WORKERS) {
      return;
    }
    begin = share_start(worker, t.iterations);
    end = share_start(worker + 1u, t.iterations);
  }
  let r = 4u * (lid / THREAD_COLS);
  let c = 4u * (lid % THREAD_COLS);
  for (var i = begin; i < end;) {
    let tile = i / slabs;
    let first_slab = i % slabs;
    let end_slab = min(slabs, first_slab + (end - i));
    let corner = tile_corner(t, tile);
    let m0 = corner.x;
    let n0 = corner.y;
    multiply_slabs(m0, n0, first_slab, end_slab, lid);
    var slot = FINAL;
    if (first_slab != 0u || end_slab != slabs) {
      slot = partial_slot(worker, t.iterations, tile * slabs);
    }
    store_block(slot, m0, n0, r, c, block_sums(acc00, sum00));
    if (COL_GROUPS == 2u) {
      store_block(slot, m0, n0, r, c + GROUP_COLS, block_sums(acc01, sum01));
    }
    if (ROW_GROUPS == 2u) {
      store_block(slot, m0, n0, r + GROUP_ROWS, c, block_sums(acc10, sum10));
      if (COL_GROUPS == 2u) {
        store_block(slot, m0, n0, r + GROUP_ROWS, c + GROUP_COLS, block_sums(acc11, sum11));
      }
    }
    i += end_slab - first_slab;
  }
}
