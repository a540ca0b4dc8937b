// Weight decoding shared by the kernels that read checkpoint weights as u32 words (WEIGHT_TYPE 0: f32 bits,
// 1: f16, 2: bf16, the latter two packed two per word with the lower-indexed element in the low half).
override WEIGHT_TYPE: u32 = 0u;

// The two 16-bit weights packed in one word, lower index first.
fn halves(word: u32) -> vec2<f32> {
  if (WEIGHT_TYPE == 1u) {
    return unpack2x16float(word);
  }
  return bitcast<vec2<f32>>(vec2<u32>(word << 16u, word & 0xFFFF0000u));
}

// The word that holds weight element e.
fn weight_word(e: u32) -> u32 {
  return select(e / 2u, e, WEIGHT_TYPE == 0u);
}

// Weight element e, from the word weight_word(e) holds.
fn weight_element(word: u32, e: u32) -> f32 {
  if (WEIGHT_TYPE == 0u) {
    return bitcast<f32>(word);
  }
  let pair = halves(word);
  return select(pair.x, pair.y, (e & 1u) == 1u);
}
