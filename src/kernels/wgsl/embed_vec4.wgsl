// Embed, vectorised: the contract of embed.wgsl for hidden sizes that are a multiple of 4 (the dispatcher
// runs embed.wgsl for others). One thread per 4 consecutive outputs of a token: one 8-byte piece of a 16-bit
// table row (two for f32) read, a vec4 written, where embed.wgsl's thread per element had two threads load
// each word of a 16-bit table and stored 4 bytes each (the f16 gather ran at 27 % of the copy bandwidth on
// an H200, llama T = 2048; run 79).
// Block-quantized tables (WEIGHT_TYPE >= 3, include/blocks.wgsl) always come here (their rows are whole blocks of
// 32 or 256 elements).
// Bindings (group 0): 0 ids [first_row + T] u32 read, 1 table [vocab_rows, hidden_size] read (WEIGHT_TYPE, as
//                     vec2<u32>), 2 positions [*, hidden_size] read, 3 out [first_row + T, hidden_size] read_write
//                     (both as vec4<f32>), 4 params uniform (scale as f32 bits).
// Dispatch: W = ceil(T * hidden_size / 4 / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

//!include embed_params.wgsl

@group(0) @binding(0) var<storage, read> ids: array<u32>;
@group(0) @binding(1) var<storage, read> table: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> positions: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;

//!include weights.wgsl
//!include blocks.wgsl
const WORKGROUP_SIZE: u32 = 256u;

fn block_word(i: u32) -> u32 {
  return table[i / 2u][i % 2u];
}

fn block_words4(i: u32) -> vec4<u32> {
  return vec4<u32>(table[i / 2u], table[i / 2u + 1u]);
}

// Elements 4 d4 .. 4 d4 + 3 of table row `row` (block types: ggml's dequantized values, exactly).
fn table_piece(row: u32, d4: u32) -> vec4<f32> {
  let p = row * (params.hidden_size / 4u) + d4;
  if (WEIGHT_TYPE == 0u) {
    return bitcast<vec4<f32>>(vec4<u32>(table[2u * p], table[2u * p + 1u]));
  }
  if (WEIGHT_TYPE >= 3u) {
    return chunk_values(block_row(row, params.hidden_size), d4 / 8u, d4 % 8u);
  }
  let words = table[p];
  return vec4<f32>(halves(words.x), halves(words.y));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  load_block_tables(lid);
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  let D4 = params.hidden_size / 4u;
  if (idx >= params.seq_len * D4) {
    return;
  }
  let i = idx / D4;  // the i-th token gathered
  let t = params.first_row + i;
  let d4 = idx % D4;
  // Unsigned wrap-around: ids below vocab_offset become huge and fail the same test as ids past the block.
  let row = ids[t] - params.vocab_offset;
  if (row >= params.vocab_rows) {
    return;
  }
  var value = bitcast<f32>(params.scale_bits) * table_piece(row, d4);
  if (params.use_positions != 0u) {
    value += positions[(params.position_offset + i) * D4 + d4];
  }
  out[t * D4 + d4] = value;
}
