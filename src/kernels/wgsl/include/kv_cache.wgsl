// The KV cache's element type (kernels::KvType), for the kernels that write the cache (qkv_rope_store.wgsl,
// linear_matvec_sg.wgsl's ROPE epilogue) and those that read it (the flash attention kernels). They bind the
// cache as array<u32> (or vec4<u32>) words: KV_TYPE 0 words are f32 bit patterns, KV_TYPE 1 words hold two f16
// (pack2x16float: the lower-indexed element in the low half), so no kernel needs shader-f16 and the arithmetic
// stays f32. An f16 cache reads half the bytes per key; values round to f16 as they are stored (2^-11
// relative; WGSL lets the conversion round either way, and magnitudes above 65504 become infinite).
// KV_TYPE 2 (q8, llama.cpp's q8_0 cache in spirit) keeps each (token, kv head) row of head_dim elements as
// signed 8-bit integers q with one f32 scale s = absmax(row) / 127 (q = round(x / s), ties to even, clamped to
// +-127; an all-zero row has s = 0 and q = 0), so x ~ q * s within s / 2. Four elements per word (pack4xI8: the
// lowest-indexed element in the lowest byte), so a word never spans two rows (head_dim a multiple of 4); the
// pool's row scales follow its data words in the same buffer, scale of row r (element e: r = e / head_dim) at
// word KV_SCALES + r (the host sets KV_SCALES = the pool's data words), so the readers need no new binding and
// element e stays in word e / 4 (a 16-byte reader takes piece p from u32 p % 4 of vec4 word p / 4, whatever row
// its neighbours belong to). One scale per
// row rather than per 32 elements: a writer reduces its row once and a reader scales a whole dot product once;
// rotated keys and values are spread evenly enough across a head that a per-row absmax costs little.
override KV_TYPE: u32 = 0u;
override KV_SCALES: u32 = 0u;  // KV_TYPE 2: the word of the pool's first row scale (its data words before it)

// Cache elements per u32 word: 1 (f32), 2 (f16) or 4 (q8); an override, so sizes derived from it are too.
override KV_PER_WORD: u32 = select(select(1u, 2u, KV_TYPE == 1u), 4u, KV_TYPE == 2u);

// The word that holds cache element e.
fn kv_word(e: u32) -> u32 {
  return e / KV_PER_WORD;
}

// The elements of a word, lowest-indexed first: KV_PER_WORD of them (q8: integers, not yet times the row's scale),
// zeros after them.
fn kv_unpack(word: u32) -> vec4<f32> {
  if (KV_TYPE == 0u) {
    return vec4<f32>(bitcast<f32>(word), 0.0, 0.0, 0.0);
  }
  if (KV_TYPE == 2u) {
    return vec4<f32>(unpack4xI8(word));
  }
  return vec4<f32>(unpack2x16float(word), 0.0, 0.0);
}

// Cache element e, from the word kv_word(e) holds.
// A q8 element is its integer, not yet times its row's scale (kv_scale_word).
fn kv_element(word: u32, e: u32) -> f32 {
  return kv_unpack(word)[e % KV_PER_WORD];
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
// (A q8 vec4 word holds pieces 4i .. 4i + 3, one per u32, decoded to integers not yet scaled.)
fn kv_piece_word(p: u32) -> u32 {
  return p / KV_PER_WORD;
}

fn kv_piece(word: vec4<u32>, p: u32) -> vec4<f32> {
  if (KV_TYPE == 0u) {
    return bitcast<vec4<f32>>(word);
  }
  if (KV_TYPE == 2u) {
    return vec4<f32>(unpack4xI8(word[p & 3u]));
  }
  let halves = select(word.xy, word.zw, (p & 1u) == 1u);
  return vec4<f32>(unpack2x16float(halves.x), unpack2x16float(halves.y));
}

// q8 (KV_TYPE 2): the word holding the scale of the row of element e, rows of head_dim elements.
fn kv_scale_word(e: u32, head_dim: u32) -> u32 {
  return KV_SCALES + e / head_dim;
}

// q8: the scale of a row whose absolute values are at most `absmax`.
fn kv_q8_scale(absmax: f32) -> f32 {
  return absmax / 127.0;
}

// q8: the word storing four neighbouring elements of a row with scale `scale` (zero: a zero row).
fn kv_quantize(values: vec4<f32>, scale: f32) -> u32 {
  var q = vec4<f32>(0.0);
  if (scale > 0.0) {
    q = clamp(round(values / scale), vec4<f32>(-127.0), vec4<f32>(127.0));
  }
  return pack4xI8(vec4<i32>(q));
}
