// The KV cache in blocks (kernels::KvBlocks): each layer's K (and V) pool is cut into blocks of KV_BLOCK_TOKENS
// rows, one row (num_kv_heads * head_dim elements) per token, and a sequence's block table lists the blocks that
// hold its tokens, KV_BLOCK_TOKENS each: token j of the sequence whose table starts at entry table_base lies in
// pool row
//   kv_table[table_base + j / KV_BLOCK_TOKENS] * KV_BLOCK_TOKENS + j % KV_BLOCK_TOKENS.
// The including kernel binds `kv_table: array<u32>` (block ids). KV_BLOCK_TOKENS is at least the kernel's tile of
// keys (its dispatcher checks), so a tile's keys lie in at most two blocks: a kernel reads the table once per tile
// (tile_rows) and then turns each key into its row with an add and a select (tile_row), never a table read per key.
override KV_BLOCK_TOKENS: u32 = 256u;  // kernels::kKvBlockTokens unless a test asks for other blocks

// The pool row of token j.
fn kv_row(table_base: u32, j: u32) -> u32 {
  return kv_table[table_base + j / KV_BLOCK_TOKENS] * KV_BLOCK_TOKENS + j % KV_BLOCK_TOKENS;
}

// The rows of a tile's keys: key j < boundary lies in row j + low, from boundary on in row j + high (u32
// arithmetic wraps, so the offsets may be "negative").
struct TileRows {
  boundary: u32,
  low: u32,
  high: u32,
}

// The rows of keys [first, last], last - first < KV_BLOCK_TOKENS; reads no entry past last's.
fn tile_rows(table_base: u32, first: u32, last: u32) -> TileRows {
  let boundary = (first / KV_BLOCK_TOKENS + 1u) * KV_BLOCK_TOKENS;
  let low = kv_row(table_base, first) - first;
  var high = low;
  if (last >= boundary) {
    high = kv_row(table_base, boundary) - boundary;
  }
  return TileRows(boundary, low, high);
}

fn tile_row(rows: TileRows, j: u32) -> u32 {
  return j + select(rows.low, rows.high, j >= rows.boundary);
}
