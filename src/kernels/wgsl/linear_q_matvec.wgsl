// Linear for decoding (M <= 4 rows) with block-quantized weights (WEIGHT_TYPE 3..12, include/blocks.wgsl): the
// contract of linear.wgsl,
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
// with W's rows in kernels::pack_rows()'s layout (K a multiple of the block size). No fusions: the graph
// normalises x and applies gate activations with their own dispatches for these weights (linear_can_fuse).
// Decoding streams every weight once, so the work is cut for memory: a team of TEAM threads serves COLS output
// columns, its lanes taking the 32-element chunks of the rows in steps of TEAM / CHUNK_LANES consecutive chunks,
// CHUNK_LANES lanes to a chunk, so that each load instruction of a team reads a contiguous run of quants and of
// x (pack_rows keeps a row's chunks of quants back to back); each quad of a chunk is decoded in registers and
// the chunk's scale taken out of the lane's dot products (sum scale * q * x = scale * sum q * x, less
// offset * sum x for formats with a minimum, the sum of x shared by the COLS columns). The lanes' sums meet in
// workgroup memory.
// Bindings (group 0): 0 x [M, K] read (as vec4), 1 W read (u32 words), 2 bias [N] read, 3 residual read,
//                     4 out [M, out_stride] read_write, 5 params uniform.
// Dispatch: ceil(N / (COLS * 256 / TEAM)) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

//!include linear_params.wgsl
//!include weights.wgsl

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

//!include linear_store.wgsl
//!include blocks.wgsl

fn block_word(i: u32) -> u32 {
  return W[i];
}

// Four word loads: W bound as vec4<u32> (a K-quant header in one 16-byte load, the quants picked out of
// vectors) made this kernel slower on an H200 (bench kernels, llama down M=1, two calls of 2026-12-02 whose
// f16 rows agree: Q4_K 0.0383 -> 0.0406 ms with the same passes).
fn block_words4(i: u32) -> vec4<u32> {
  return vec4<u32>(W[i], W[i + 1u], W[i + 2u], W[i + 3u]);
}

override ROWS: u32 = 1u;         // M, 1..4
override COLS: u32 = 1u;         // output columns per team, 1..4
override TEAM: u32 = 32u;        // threads per team, a power of two up to 256
override CHUNK_LANES: u32 = 4u;  // lanes sharing a chunk: 1, 2, 4 or 8 (at most TEAM)

const WORKGROUP_SIZE: u32 = 256u;
var<workgroup> partial_sums: array<array<vec4<f32>, 4>, WORKGROUP_SIZE>;  // [thread][column][row]

// Adds this lane's quads of chunk `chunk` (part, part + CHUNK_LANES, ...) of the rows to acc[column][row]. The
// quads' dot products with the integer quants are summed first and scaled once per chunk; offsets come out of
// the sum of x: sum (scale q - offset) x = scale sum q x - offset sum x.
fn add_chunk(chunk: u32, part: u32, rows: array<BlockRow, 4>, acc: ptr<function, array<vec4<f32>, 4>>) {
  var scales: array<ChunkScale, 4>;
  for (var c = 0u; c < COLS; c++) {
    scales[c] = chunk_scale(rows[c], chunk);
  }
  var sums: array<vec4<f32>, 4>;  // [column][row]: sum of q x over the lane's quads (Q6_K: scaled already)
  var x_sums = vec4<f32>(0.0);    // [row]: sum of x over them (formats with an offset)
  for (var j = 0u; j < 8u / CHUNK_LANES; j++) {
    let quad = part + j * CHUNK_LANES;
    var xs: array<vec4<f32>, 4>;
    for (var m = 0u; m < ROWS; m++) {
      xs[m] = x[(m * params.K + 32u * chunk) / 4u + quad];
      if (blocks_have_offset()) {
        x_sums[m] += dot(xs[m], vec4<f32>(1.0));
      }
    }
    for (var c = 0u; c < COLS; c++) {
      let q = chunk_quad(rows[c], chunk, quad);
      if (WEIGHT_TYPE == 10u) {
        // Only Q6_K's two halves of a chunk have scales of their own: each quad's dot product is scaled by its
        // half's (one multiply-add a row, not a multiply per weight).
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
    if (WEIGHT_TYPE == 10u) {
      (*acc)[c] += sums[c];
    } else {
      (*acc)[c] += scales[c].scale.x * sums[c];
    }
    if (blocks_have_offset()) {
      (*acc)[c] -= scales[c].offset * x_sums;
    }
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let lane = lid % TEAM;
  let first = ((wid.x + wid.y * nwg.x) * (WORKGROUP_SIZE / TEAM) + lid / TEAM) * COLS;
  let N = params.N;
  let chunks = params.K / 32u;
  // Columns past N read row N - 1 again and store nothing.
  var rows: array<BlockRow, 4>;
  for (var c = 0u; c < COLS; c++) {
    rows[c] = block_row(min(first + c, N - 1u), params.K);
  }
  // CHUNK_LANES neighbouring lanes share a chunk: a load instruction of the team then reads x and the quants of
  // its TEAM / CHUNK_LANES chunks contiguously (a lane per whole chunk would touch a cache line of x per lane,
  // which bounds the product by the cache's line rate instead of memory).
  let part = lane % CHUNK_LANES;
  let chunk_step = TEAM / CHUNK_LANES;
  var acc: array<vec4<f32>, 4>;  // acc[column][row]
  var chunk = lane / CHUNK_LANES;
  // Two chunks a pass, so that a lane has the loads of both in flight at once. (Four a pass at 4 lanes a chunk,
  // with W bound as vec4<u32>, was slower on an H200: llama down M=1, Q4_0 0.0330 -> 0.0426 ms, Q8_0 0.0360 ->
  // 0.0460, f16's unchanged kernel 0.0360 / 0.0361 in the two calls, 2026-12-02.)
  for (; chunk + chunk_step < chunks; chunk += 2u * chunk_step) {
    add_chunk(chunk, part, rows, &acc);
    add_chunk(chunk + chunk_step, part, rows, &acc);
  }
  if (chunk < chunks) {
    add_chunk(chunk, part, rows, &acc);
  }
  partial_sums[lid] = acc;
  workgroupBarrier();
  for (var stride = TEAM / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      for (var c = 0u; c < COLS; c++) {
        partial_sums[lid][c] += partial_sums[lid + stride][c];
      }
    }
    workgroupBarrier();
  }
  // Lane c * ROWS + m stores column c of row m.
  let c = lane / ROWS;
  let m = lane % ROWS;
  if (c < COLS && first + c < N) {
    store(m, first + c, partial_sums[lid - lane][c][m]);
  }
}
