// The KV cache's element type (kernels::KvType), for the kernels that write the cache (qkv_rope_store.wgsl,
// linear_matvec_sg.wgsl's ROPE epilogue) and those that read it (the flash attention kernels). They bind the
// cache as array<u32> (or vec4<u32>) words: KV_TYPE 0 words are f32 bit patterns, KV_TYPE 1 words hold two f16
// (pack2x16float: the lower-indexed element in the low half), so no kernel needs shader-f16 and the arithmetic
// stays f32. An f16 cache reads half the bytes per key; values round to f16 as they are stored (2^-11
// relative; WGSL lets the conversion round either way, and magnitudes above 65504 become infinite).
override KV_TYPE: u32 = 0u;

// Cache elements per u32 word: 1 (f32) or 2 (f16).
fn kv_per_word() -> u32 {
  return select(1u, 2u, KV_TYPE == 1u);
}

// The word that holds cache element e.
fn kv_word(e: u32) -> u32 {
  return select(e, e / 2u, KV_TYPE == 1u);
}

// Cache element e, from the word kv_word(e) holds.
fn kv_element(word: u32, e: u32) -> f32 {
  if (KV_TYPE == 0u) {
    return bitcast<f32>(word);
  }
  let pair = unpack2x16float(word);
  return select(pair.x, pair.y, (e & 1u) == 1u);
}

// The word to store for element e = first (f32), or for the neighbours e, e + 1 = (first, second) (f16; e even).
fn kv_pack(first: f32, second: f32) -> u32 {
  if (KV_TYPE == 0u) {
    return bitcast<u32>(first);
  }
  return pack2x16float(vec2<f32>(first, second));
}

// Vec4 pieces (4 elements) p of the cache bound as array<vec4<u32>>: the vec4 word that holds piece p (an f16
// word holds pieces 2i and 2i + 1), and the piece decoded from it.
fn kv_piece_word(p: u32) -> u32 {
  return select(p, p / 2u, KV_TYPE == 1u);
}

fn kv_piece(word: vec4<u32>, p: u32) -> vec4<f32> {
  if (KV_TYPE == 0u) {
    return bitcast<vec4<f32>>(word);
  }
  let halves = select(word.xy, word.zw, (p & 1u) == 1u);
  return vec4<f32>(unpack2x16float(halves.x), unpack2x16float(halves.y));
}
