// Kernels the model graphs need beyond the twelve seed kernels: they read Hugging Face weight layouts
// directly ([out, in] rows, f32 / f16 / bf16, or ggml's and GPTQ's int blocks), fuse the steps that only move data
// (QKV split + q/k norm + rotary + KV-cache store), and compute attention in parallel with an online
// softmax, a sliding window and a configurable scale. Each has a float64 reference in
// src/reference/model.h and a check in kernels::kernel_checks().
//
// Conventions shared by all of them: activations are f32, row-major; weights are bound as array<u32>
// and decoded in the shader according to WeightType (f32 bit patterns, or two f16 / bf16 values per
// u32 with the lower-indexed element in the low 16 bits, as they lie in a safetensors file).
#pragma once

#include "kernels/dispatch.h"

namespace gerbil::kernels {

// F32 / F16 / BF16 are elements as in a safetensors file; the others are ggml's block formats (GGUF files), kept
// quantized on the GPU in the layout pack_rows() makes (the same for every kernel that reads them: decode and
// prompt products, embedding gathers). Each row of K elements is repacked, by 32-element chunks, into three runs
// (the row padded to 16 bytes), so that a kernel reads a chunk's quants with 16-byte loads and every 4- to
// 6-bit type decodes its low bits alike:
//   quants   per chunk, 16 bytes: byte i holds element i's low 4 bits and element i + 16's in its high nibble
//            (ggml's Q4_0 order; K-quants' sub-block pairs are split into their chunks); Q8_0: 32 int8 bytes;
//   high     per chunk: Q5_0 / Q5_1 / Q5_K a word whose bit 8 i + q is element 4 q + i's fifth bit (q < 8,
//            i < 4); Q6_K two words, element 4 q + i's top two bits at bits 8 i + 2 (q % 4) of word q / 4;
//   headers  per block, ggml's scales: Q8_0 / Q4_0 / Q5_0 d (f16, two to a word); Q4_1 / Q5_1 d, m; Q4_K /
//            Q5_K d, dmin and the 12 bytes of 6-bit scales and mins; Q6_K its 16 int8 scales, then d and 2 bytes;
//            Q3_K its 12 bytes of 6-bit scales, then d and 2 bytes; Q2_K its 16 bytes of 4-bit scales and mins, then
//            d and dmin; Q4_G / Q4_G128 d and the zero point z (an f16 integer); IQ4_NL d; IQ4_XS d, scales_h
//            and scales_l (8 bytes); IQ3_XXS / IQ3_S d, 2 zero bytes, then sub-block s's 4-bit scale in nibble s
//            of a word (8 bytes).
// Q3_K's 3-bit codes (2 low bits and ggml's separate high bit) and Q2_K's 2-bit ones are kept as nibbles: 4.5 and
// 4.625 bits a weight on the GPU against the file's 3.44 and 2.63, for one decode shared with the 4-bit types (a
// 2- or 3-bit layout would need a decode of its own in every product kernel).
// IQ4_NL's and IQ4_XS's 4-bit codes pick one of 16 non-uniform levels (ggml's kvalues_iq4nl), which blocks.wgsl
// looks up in workgroup memory (level_table): 4.5 and 4.25 bits a weight, as in the file. IQ3_XXS and IQ3_S take
// the same path: each element's grid magnitude (one of 8) and sign become a 4-bit code of 16 signed levels
// (model/iq3.h's iq3_codes), under a header of d and the 8 sub-blocks' 4-bit scales (8 bytes): 4.25 bits a
// weight on the GPU against the file's 3.06 and 3.44, for no decode of their own (their grids of 256 and 512
// entries would be tables of 1 and 2 KiB in every product kernel's workgroup memory).
// Q4_G and Q4_G128 are not ggml's: GPTQ and AWQ layers repacked at load into blocks of their groups
// (model/quant.h's gptq_group_blocks), element d (q - z), so that they take the block types' kernels: blocks of
// 128 elements (4 chunks under one header, 4.25 bits a weight) where the group size is a multiple of 128, else
// of 32 (5 bits a weight).
// Kernels decode it with include/blocks.wgsl (one 32-element chunk of a block at a time, scale times integer
// quants, exactly ggml's dequantized values).
enum class WeightType : uint32_t {
  F32 = 0, F16 = 1, BF16 = 2,
  Q8_0 = 3, Q4_0 = 4, Q4_1 = 5, Q5_0 = 6, Q5_1 = 7, Q4_K = 8, Q5_K = 9, Q6_K = 10, Q4_G = 11,
  Q4_G128 = 12, Q3_K = 13, Q2_K = 14, IQ4_NL = 15, IQ4_XS = 16, IQ3_XXS = 17, IQ3_S = 18,
};

// The linear kernels take their decoding (matrix-vector) paths up to this many rows M (linear.wgsl's MATVEC_ROWS);
// more rows are a prompt.
constexpr uint32_t kMatvecRows = 4;
// From kLinearRowsMin up to kLinearRowsMax rows (a batched decode step) with K % 8 == 0, a product without fusions
// runs linear_rows.wgsl, which reads each weight once for all rows: its threads hold the sums of all M rows for up
// to 4 columns (block types dequantized a quad at a time). Up to kMatvecRows rows it replaces the matrix-vector
// kernels (whose column groups each re-read all M rows of x: on an H200, Llama-3-8B's 4-row f16 products took
// twice one row's time) only for large products (use_linear_rows). On an H200 the tiled prompt kernel overtakes
// it between 16 and 32 rows (bench kernels' batch_projection_shapes).
constexpr uint32_t kLinearRowsMin = 2;
constexpr uint32_t kLinearRowsMax = 16;
// From kLinearRowsMax + 1 to kBatchTileRows rows (a batched decode step of 17 to 64 sequences, or a short prompt
// chunk) a product with K % 8 == 0 whose tiles make enough work runs linear_tiled_rows.wgsl's tiles of 32 x 256
// (up to 32 rows) or 64 x 256, where the adapter's workgroup memory holds them (linear_split_k; the rule is
// model.cpp's use_batch_tiles).
constexpr uint32_t kBatchTileRows = 64;

uint32_t weight_bytes(WeightType type);  // 4, 2, 2 (element types only; throws for block types)
bool is_block_type(WeightType type);
const char* weight_type_name(WeightType type);  // "f32", "f16", "bf16", "Q8_0", ..., "Q2_K", "IQ4_NL", "IQ4_XS"
// The block geometry of a block type: elements per block, bytes per block in a ggml file (Q4_G, Q4_G128: as
// gptq_group_blocks makes them), and the GPU layout's bytes per 32-element chunk (quants, high bits) and per
// block (header); see WeightType.
struct BlockLayout {
  uint32_t elements, ggml_bytes, quant_bytes, high_bytes, header_bytes;
};
BlockLayout block_layout(WeightType type);  // throws for element types
// Bytes of one weight row of K elements as the kernels read it (block types: K a multiple of the block size,
// else this throws naming the row length).
uint64_t weight_row_bytes(WeightType type, uint64_t K);
// The GPU layout of `rows` rows of K elements of block type `type`, from ggml's blocks (`ggml`, rows * K /
// elements blocks, as a GGUF file stores them). `what` names the tensor in errors.
std::vector<std::byte> pack_rows(WeightType type, std::span<const std::byte> ggml, uint64_t rows, uint64_t K,
                                 std::string_view what);
// The same into `out` (rows * weight_row_bytes(type, K) bytes), for filling a mapped buffer in place.
void pack_rows(WeightType type, std::span<const std::byte> ggml, uint64_t rows, uint64_t K, std::string_view what,
               std::span<std::byte> out);

// The KV cache's element type (kv_cache.wgsl): F32, or F16 stored two per u32 word (the lower-indexed element in
// the low half), which needs no shader-f16: values are rounded to f16 as they are stored (2^-11 relative; up to
// 2^-10 where the adapter rounds the other way, which WGSL allows) and widened to f32 as they are read, so the
// arithmetic stays f32 while decoding at depth reads half the bytes. An f16 cache needs an even head_dim.
// Q8 keeps each (token, kv head) row of head_dim elements as int8 with one f32 scale (absmax / 127), four to a
// word, the pool's row scales after its data (kv_cache.wgsl): a quarter of f32's bytes plus 4 per row, each
// value within half its row's scale; head_dim a multiple of 4. No fused writer (linear_qkv_rope) and no
// subgroup reader (flash_attention_sg) takes it: qkv_rope_store and flash_attention.wgsl serve it instead.
enum class KvType : uint32_t { F32 = 0, F16 = 1, Q8 = 2 };
uint32_t kv_bytes(KvType type);  // 4, 2, 1 (q8: its data bytes; the row scales come on top, kv_pool_bytes)
const char* kv_type_name(KvType type);  // "f32", "f16", "q8"
// The bytes of a pool of `elements` elements in rows of head_dim: elements * kv_bytes, plus 4 per row for q8.
uint64_t kv_pool_bytes(KvType type, uint64_t elements, uint32_t head_dim);
// The cache kernels' override constants (kv_cache.wgsl): KV_TYPE, and for q8 KV_SCALES, the word where the row
// scales of a pool of `pool` elements start (0 otherwise, so the other types' pipelines do not depend on the pool).
gpu::Constants kv_constants(KvType kv, uint64_t pool);
// Throws, naming `kernel` and its shapes, for a type that is none of the above or a head_dim it cannot store.
void check_kv_type(std::string_view kernel, const std::string& shapes, KvType kv, uint32_t head_dim);

// The KV cache in blocks (kv_blocks.wgsl): each layer's K and V pools hold `blocks` blocks of `block_tokens` rows
// (one token's Hkv * head_dim elements each, of type KvType), and a sequence's block table (u32 block ids) says
// which blocks hold its tokens: token j lies in pool row table[j / block_tokens] * block_tokens + j % block_tokens.
// Every kernel that writes or reads the cache addresses it through a table, so sequences of any lengths share one
// pool. The kernels that serve one sequence bind its table (from its first entry); the row kernels
// (kernels/batched.h) bind every sequence's tables and find each one's first entry in the row table.
// kKvBlockTokens = 256: the attention kernels read the table once per tile of keys and need a tile's keys in at
// most two blocks, so a block is at least (and, for whole tiles, a multiple of) every key tile: flash_attention.wgsl
// and attention_rows.wgsl walk 256 keys a tile, flash_attention_block.wgsl 16, 32 or 64, flash_attention_sg.wgsl 4 per
// row group, and split-KV chunks are multiples of 128 keys (so at 256 a chunk's tiles cross at most one block edge).
// Larger blocks waste more of a short sequence's last block (at most 255 tokens).
constexpr uint32_t kKvBlockTokens = 256;
struct KvBlocks {
  BufferBinding table;  // u32 block ids (see above)
  uint32_t blocks = 0;  // blocks in each pool
  uint32_t block_tokens = kKvBlockTokens;
};
// For the cache kernels' dispatchers: checks that blocks hold whole key tiles of `tile` keys and that the pools'
// element indices fit u32, and returns the pools' elements (rows of kv_width); the table operand for `tokens`.
uint64_t kv_pool_elements(std::string_view kernel, const std::string& shapes, const KvBlocks& blocks, uint32_t tile,
                          uint64_t kv_width);
Operand kv_table_operand(const KvBlocks& blocks, uint64_t tokens);
// A K or V pool of `pool` elements in rows of head_dim, as a kernel operand (its bytes, q8 scales included).
Operand kv_pool_operand(std::string_view name, BufferBinding binding, uint64_t pool, KvType kv, uint32_t head_dim);
// A cache kernel's override constants: the cache's (kv_constants), its blocks' (KV_BLOCK_TOKENS), then `more`.
gpu::Constants cache_constants(KvType kv, uint64_t pool, const KvBlocks& blocks, const gpu::Constants& more = {});

// embed.wgsl: out[t, d] = scale * table[ids[t] - vocab_offset, d]  (+ positions[position_offset + t - first_row, d])
// for the tokens t in [first_row, first_row + seq_len) whose ids lie in the vocabulary block [vocab_offset,
// vocab_offset + vocab_rows); other tokens are left untouched, so a table split into blocks is gathered by one
// dispatch per block. embed_vec4.wgsl (four elements per thread) serves hidden sizes that are a multiple of 4.
// A batched step of a model with learned positions (GPT-2) gathers each sequence's rows with its own
// first_row and position_offset.
// Bindings: 0 ids [first_row + T] u32, 1 table [vocab_rows, D] (WeightType), 2 positions [*, D] f32 (bind any
// buffer when unused), 3 out [first_row + T, D] f32, 4 params.
struct EmbedParams {
  uint32_t seq_len, hidden_size, vocab_offset, vocab_rows;
  uint32_t scale_bits;       // f32 multiplier (Gemma: sqrt(hidden)); 1.0f otherwise
  uint32_t position_offset;  // row of `positions` for t = first_row
  uint32_t use_positions;    // 1: add learned position embeddings (GPT-2)
  uint32_t first_row = 0;    // the first token gathered
};
Dispatch embed(gpu::Device& device, BufferBinding ids, BufferBinding table, BufferBinding positions,
               BufferBinding out, const EmbedParams& p, WeightType type, uint32_t position_rows);

// linear.wgsl: out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n])
// for n in [0, N) — W is the row block [N, K] of a larger [*, K] weight; out has out_stride columns.
// Bindings: 0 x [M, K], 1 W [N, K] (WeightType), 2 bias [N] f32, 3 residual [M, out_stride] f32,
// 4 out [M, out_stride] f32, 5 params (the decode variant: 5 norm_weight [K] f32, 6 and 7 unused here,
// 8 params). Unused bias / residual / norm_weight: bind any buffer, flag 0.
// Batched decode steps (kLinearRowsMin <= M <= kLinearRowsMax, K % 8 == 0; use_linear_rows) run linear_rows.wgsl
// (same bindings and params; linear_rows_blocking()), which fuses a gate activation (gate_act, below) and no
// norm; other prompts with K % 8 == 0 run linear_tiled.wgsl (same
// bindings and params; 64/128-square tiles chosen by linear_grid()'s shape rule; linear_split_k() may take larger
// ones to share out) or, of up to kBatchTileRows rows, linear_tiled_rows.wgsl; other K linear.wgsl's 64 x 64
// tiles.
// Block-quantized weights (is_block_type) decode in linear_q_matvec.wgsl (no fusions; linear_q_matvec_blocking)
// where linear_rows.wgsl does not take the product, and prompts run linear_tiled.wgsl decoding each slab's weights
// as it loads them.
// Other decoding (M <= 4) on adapters with subgroups runs linear_matvec_sg.wgsl, which can also fuse the steps
// around the projection (linear_can_fuse() says when): norm_x applies an RMSNorm with eps to x first,
// either with the norm's weight (kNormWeighted) or to an x that already holds x * weight (kNormPrepared,
// written by the product before with norm_out), the rms then coming from the raw x; norm_out also writes
// out * the next RMSNorm's weight; gate_act 1 / 2 makes it a gated MLP's gate|up projection: W's N rows are
// N / 2 gate rows then N / 2 up rows, and out[m, out_col + j] = act(gate_j) * up_j for j < N / 2 (SiLU /
// GELU-tanh; biases added before the activation; no residual). The operands of the norms: LinearNorm.
struct LinearParams {
  uint32_t M, K, N;
  uint32_t out_stride, out_col;
  uint32_t has_bias, has_residual;
  uint32_t gate_act = 0;  // 0: none, 1: SiLU-gated, 2: GELU-tanh-gated output
  uint32_t norm_x = 0;    // kNormNone, kNormWeighted or kNormPrepared
  uint32_t eps_bits = 0;
  uint32_t position = 0;  // linear_qkv_rope only: the rotary position (and cache row) of row 0
  uint32_t norm_out = 0;  // 1: also write out * LinearNorm::weight to LinearNorm::prepared
};
constexpr uint32_t kNormNone = 0, kNormWeighted = 1, kNormPrepared = 2;
// The operands of linear()'s norm fusions (unused ones left empty).
struct LinearNorm {
  BufferBinding weight;    // norm_x kNormWeighted: the RMSNorm's weight [K]; norm_out: the next one's [out_stride]
  BufferBinding raw_x;     // norm_x kNormPrepared: x before the norm [M, K] (x itself holds x * weight)
  BufferBinding prepared;  // norm_out: receives out * weight [M, out_stride]
};
// The subgroup decode variant's blocking: output columns per column group (1..4), subgroups sharing one
// group's dot products (a power of two), 16-byte weight loads each lane has in flight per column (1..8), and
// the most workgroups to launch (each loops over the units of column groups past the grid); 0 leaves the
// choice to linear_matvec_blocking() (workgroups 0 there: one per unit).
struct MatvecBlocking {
  uint32_t columns = 0, split = 0, unroll = 0, workgroups = 0;
};
// The grid of the matrix-vector (M <= kMatvecRows) or tiled kernels on an adapter of `resident_tiles`
// (tuning().resident_tiles: the tiles' shape rule, tiled_fill()); linear_rows.wgsl's is linear_rows_grid(), and
// linear_tiled_rows.wgsl's (one workgroup per 32 or 64 x 256 tile, or per share) is counted where it is prepared.
Grid linear_grid(const LinearParams& p, uint32_t resident_tiles);
// Whether linear() and linear_split_k() run linear_rows.wgsl for this shape when it fuses nothing (any weight type,
// block types with rows of whole blocks): all products of kMatvecRows + 1 to kLinearRowsMax rows, and from
// kLinearRowsMin rows those whose weights (in their own bytes: a block type's packed rows) give each of the
// adapter's resident workgroups (tuning().resident_workgroups) at least 24 KiB. On an H200 (1,056 resident
// workgroups; 2026-12-02, bench model --batch 2,4 --profile) Llama-3-8B's f16 products (31 to 995 KiB a
// workgroup) gained with it although their norms and gate activation then run as dispatches of their own (batch 4:
// 383 -> 421 tok/s; o 38 -> 26 us, down 92 -> 65 us); Qwen2.5-0.5B's (1.5 to 16.5 KiB) did about as well as the
// fused matrix-vector kernel, so those dispatches made its steps slower (batch 4: 2,705 -> 2,490 tok/s). Block
// types fuse nothing in either kernel; of 2 to 4 rows only K-quants at kMatvecRows rows take the same rule (the
// H200 figures that chose this are in model.cpp), the others stay on linear_q_matvec.wgsl. A product with a fused
// norm (norm_x, norm_out) never takes it.
bool use_linear_rows(const gpu::Device& device, const LinearParams& p, WeightType type);
// linear_rows.wgsl's blocking for M rows and N columns of `type` weights: columns per thread (4 up to 8 rows,
// else 2), 8 columns per slice of k (`lanes`), then fewer columns per thread (down to 1) while the workgroups are
// fewer than half the adapter's tuning().resident_tiles, and pieces a slice takes at a time (`unroll`: 4 loads in
// flight a thread of element weights, 1 piece a column of block weights), and 1 team a workgroup (`teams`: teams
// of slices with their own columns, which share the workgroup's reads of x). Fields of
// `requested` that are not 0 are kept (benchmarks compare blockings; a requested `lanes` or `columns` also keeps
// the other); throws naming one out of range. A `gated` projection (gate_act) keeps at least 2 columns a thread,
// a gate row and its up row. Its grid: linear_rows_grid.
struct RowsBlocking {
  uint32_t columns = 0, lanes = 0, unroll = 0, teams = 0;
};
RowsBlocking linear_rows_blocking(const gpu::Device& device, uint32_t M, uint32_t N, WeightType type,
                                  RowsBlocking requested = {}, bool gated = false);
Grid linear_rows_grid(const gpu::Device& device, const LinearParams& p, WeightType type, RowsBlocking requested = {});
Dispatch linear(gpu::Device& device, BufferBinding x, BufferBinding weight, BufferBinding bias,
                BufferBinding residual, BufferBinding out, const LinearParams& p, WeightType type,
                const LinearNorm& norm = {}, MatvecBlocking blocking = {});
// The arithmetic of the prompt products linear_split_k() runs on linear_tiled.wgsl: F32, or F16 on adapters
// with shader-f16 (linear_tiled_f16.wgsl: x and W rounded to f16, each slab of 8 products summed in f16 and
// added to f32 sums; its header says what that loses). Other products stay f32.
enum class Arithmetic : uint32_t { F32, F16 };
// linear() for prompts, with the work shared out over linear_split_workers() workgroups where whole tiles
// would leave SMs idle (see linear_shares.wgsl): linear_tiled.wgsl finishes the tiles a share holds whole and
// writes the partial sums of the tiles cut between shares to `scratch`, then linear_split_sum.wgsl adds those
// up with bias and residual into out. A product shared out may take larger tiles than linear() would, where its
// K makes a wave of long shares of them. Returns the dispatches to record in order (one when not split, the
// plain linear()). `scratch` holds linear_split_scratch_floats(device, p, workers) floats; no fused norm or gate
// (those are decode-only). `workers`: see linear_split_workers(); the products linear_rows.wgsl takes
// (use_linear_rows) are never shared out, and requested workers for them throw. Throws for Arithmetic::F16 on an
// adapter without shader-f16.
std::vector<Dispatch> linear_split_k(gpu::Device& device, BufferBinding x, BufferBinding weight, BufferBinding bias,
                                     BufferBinding residual, BufferBinding out, const LinearParams& p,
                                     WeightType type, BufferBinding scratch, uint32_t workers = 0,
                                     Arithmetic arithmetic = Arithmetic::F32);
// The workgroups a prompt product's work is shared out over, 0 for one whole tile per workgroup: `requested`
// when not 0 (benchmarks and tests compare counts; for a prompt product, at most one per slab of 8 k, 4096
// and 128 MiB of partial sums, else this throws naming it), else the dispatcher's choice.
uint32_t linear_split_workers(const gpu::Device& device, const LinearParams& p, uint32_t requested = 0);
uint64_t linear_split_scratch_floats(const gpu::Device& device, const LinearParams& p, uint32_t workers = 0);
// Scratch floats enough for the dispatcher's choice for every prompt product (33 MiB).
uint64_t linear_split_scratch_bound(const gpu::Device& device);
// The blocking the subgroup decode variant uses for this shape on this device (fields of `requested`
// that are not 0 are kept; benchmarks compare blockings), `norm_x` whether the product fuses an RMSNorm.
// Throws naming the limit if one is out of range.
MatvecBlocking linear_matvec_blocking(const gpu::Device& device, uint32_t K, uint32_t N, WeightType type,
                                      MatvecBlocking requested = {}, bool norm_x = false);
// The blocking linear() decodes block-quantized weights with (linear_q_matvec.wgsl; M <= kMatvecRows): `columns`
// output columns (1..4) per team of `split` lanes (a power of two, 16..256); 0 leaves the choice to the rule;
// `unroll` the chunks a lane has in flight (1 or 2; 0: 2, 1 at 4 columns); `workgroups` is unused. Throws naming the
// field out of range.
MatvecBlocking linear_q_matvec_blocking(const gpu::Device& device, uint32_t N, WeightType type,
                                        MatvecBlocking requested = {});
// A decode step's fused q|k|v projection with qkv_rope_store's work (without q/k norm) as its epilogue:
// out = x' W^T + bias as linear() (p.N = (q_heads + 2 kv_heads) * head_dim, p.out_stride and p.out_col
// unused, no residual, no gate, no norm_out; its norm_x as linear()'s), then each q / k head rotated in rotate-half style over its first
// rotary_dim dims at angle (p.position + m) * rope_table[i] (cos and sin scaled as qkv_rope_store's), q heads written to q_out [M, q_heads * head_dim],
// k and v heads to the pool rows of positions p.position + m in k_cache / v_cache (of type `kv`; the block table
// `blocks` covers `capacity` tokens, kv_blocks.wgsl). Needs
// linear_can_fuse() for the shape and qkv_rope_fusable() for the heads; head_dim and rotary_dim even, rotary_dim
// <= head_dim (0: no rotary; bind any buffer as rope_table). Spares the qkv_rope_store dispatch of each layer.
struct QkvHeads {
  uint32_t q_heads, kv_heads, head_dim, rotary_dim, capacity;
  KvType kv = KvType::F32;
};
// Whether linear_qkv_rope can store these heads: an f16 cache's words hold two neighbouring dims, which the
// kernel stores from one lane, in column groups of two rotary pairs: head_dim and rotary_dim multiples of 4.
bool qkv_rope_fusable(const QkvHeads& heads);
// The fused kernel binds nine storage buffers; adapters that allow fewer per stage store with qkv_rope_store.
bool linear_qkv_rope_fits(const gpu::Device& device);
Dispatch linear_qkv_rope(gpu::Device& device, BufferBinding x, BufferBinding weight, BufferBinding bias,
                         BufferBinding rope_table, BufferBinding q_out, BufferBinding k_cache, BufferBinding v_cache,
                         const KvBlocks& blocks, const LinearParams& p, WeightType type, const LinearNorm& norm, const QkvHeads& heads,
                         MatvecBlocking blocking = {});

// Whether linear() can fuse an RMSNorm into its input or a gate activation into its output for this shape
// on this device.
bool linear_can_fuse(const gpu::Device& device, uint32_t M, uint32_t K, WeightType type);
// Whether a model's step should fuse them: where it can, except for products that linear_rows.wgsl takes unfused
// (use_linear_rows), whose single read of x for all rows saves more than the norm and activation dispatches cost.
bool linear_fuses(const gpu::Device& device, uint32_t M, uint32_t K, uint32_t N, WeightType type);
// Whether linear() applies a gate activation to this gate|up projection (N rows: both halves) itself: where the
// subgroup decode variant can fuse (linear_can_fuse) or linear_rows.wgsl takes the product.
bool linear_gates(const gpu::Device& device, uint32_t M, uint32_t K, uint32_t N, WeightType type);

// gated_act.wgsl: out[t, i] = act(gate_up[t, i]) * gate_up[t, I + i], act = SiLU (0) or GELU-tanh (1);
// gated_act_vec4.wgsl (a vec4 per thread) where I % 4 == 0. Bindings: 0 gate_up [T, 2I], 1 out [T, I], 2 params.
struct GatedActParams {
  uint32_t seq_len, intermediate, activation, _pad = 0;
};
Dispatch gated_act(gpu::Device& device, BufferBinding gate_up, BufferBinding out, const GatedActParams& p);

// The rotary table the rope-applying kernels read (qkv_rope_store, rope_store_rows, linear_qkv_rope): rotary_dim / 2
// inverse frequencies, then the factor that scales cos and sin (YaRN's and LongRoPE's attention factor, else 1).
inline uint32_t rope_table_length(uint32_t rotary_dim) { return rotary_dim / 2 + 1; }

// qkv_rope_store.wgsl: splits the fused projection qkv [T, (Hq + 2 Hkv) * D] into heads; optionally
// RMS-normalises each q and k head (weights q_norm [D], k_norm [D], eps); rotates the first
// rotary_dim dims of q and k heads in rotate-half style (pair (i, i + rotary_dim/2), angle
// (position_offset + t) * rope_table[i], cos and sin scaled by rope_table[rotary_dim / 2]); writes q to q_out [T, Hq * D] and k, v to rows
// position_offset + t of the sequence whose block table `blocks` covers `capacity` tokens, in the cache pools of
// type `kv` (f16: head_dim even; q8: a multiple of 4, each row's scale from the workgroup's absmax).
// Bindings: 0 qkv, 1 q_norm, 2 k_norm, 3 rope_table [rope_table_length(rotary_dim)], 4 q_out, 5 k_cache, 6 v_cache, 7 kv_table,
// 8 params.
// One workgroup per (t, head) over Hq + Hkv heads (v heads are copied by the k-head workgroups).
struct QkvRopeParams {
  uint32_t seq_len, num_q_heads, num_kv_heads, head_dim;
  uint32_t rotary_dim;  // 0: no rotary (GPT-2); else even and <= head_dim
  uint32_t position_offset;
  uint32_t use_qk_norm;
  uint32_t eps_bits;
};
Dispatch qkv_rope_store(gpu::Device& device, BufferBinding qkv, BufferBinding q_norm, BufferBinding k_norm,
                        BufferBinding rope_table, BufferBinding q_out, BufferBinding k_cache, BufferBinding v_cache,
                        const KvBlocks& blocks, const QkvRopeParams& p, uint32_t cache_capacity, KvType kv = KvType::F32);

// Flash attention: causal GQA attention over the cache with an online softmax, K/V processed in tiles;
// query t (position p = position_offset + t) attends keys j with max(0, p - window + 1) <= j <= p
// (window 0: no window), scores scaled by `scale`. Operands: Q [T, Hq * D], the K and V pools (of type `kv`)
// with the sequence's block table `blocks` (covering S keys, or `capacity` for the split overload), out [T, Hq * D]. Variants, picked by T, the heads, head_dim and the device (never by S or position_offset,
// so a graph may rewrite those in the dispatches' uniforms between runs):
// - flash_attention_block.wgsl (T >= kFlashBlockMinQueries, prefill, when a blocking fits the device's
//   workgroup memory): one workgroup per block of (query, q head) rows of one kv head's group, so all q
//   heads sharing a kv head share each K/V tile staged in workgroup memory;
// - otherwise one workgroup per (t, q head): flash_attention_sg.wgsl where the adapter has subgroups (of 4
//   lanes or more), the cache is not q8 (which it does not decode) and head_dim is a multiple of 4 and at most 32 x the smallest subgroup size (a subgroup
//   reads a K / V row together; an f16 cache's head_dim a multiple of 8), else flash_attention.wgsl (a thread
//   scores one key);
// - split-KV, only through the overload with a scratch buffer: decoding (T <= kFlashSplitMaxQueries), either
//   per-query kernel in split mode writes one partial result per (t, q head, key chunk) to the scratch buffer,
//   and flash_attention_combine.wgsl merges them, so a long cache keeps the whole GPU busy; a prompt chunk
//   (the block kernel) likewise cuts each block's keys into chunks when its blocks are too few to fill the
//   GPU and the capacity is long.
struct FlashAttentionParams {
  uint32_t T, S, num_q_heads, num_kv_heads, head_dim, position_offset;
  uint32_t window;
  uint32_t scale_bits;
};
constexpr uint32_t kFlashBlockMinQueries = 16;
constexpr uint32_t kFlashSplitMaxQueries = 4;
// flash_attention_block.wgsl's register blocking: each of its 128 threads (8 row threads x 16 key threads) owns
// rows_per_thread rows (query, q head) of a block of 8 * rows_per_thread and keys_per_thread keys of a tile of
// 16 * keys_per_thread, each 1, 2 or 4. Both zero leave it to the dispatcher; a requested one (checks and
// benchmarks compare blockings, including those the dispatcher takes only on larger GPUs) must fit the device and
// needs T >= kFlashBlockMinQueries, else the call throws naming it.
struct FlashBlocking {
  uint32_t rows_per_thread = 0, keys_per_thread = 0;
};

Dispatch flash_attention(gpu::Device& device, BufferBinding Q, BufferBinding K, BufferBinding V, BufferBinding out,
                         const KvBlocks& blocks, const FlashAttentionParams& p, KvType kv = KvType::F32,
                         FlashBlocking requested = {});

// The same attention, with the split-KV variant where it applies: T <= kFlashSplitMaxQueries and a
// `capacity` (the most keys S will ever be while the dispatches are reused) of more than one key chunk, or a
// prompt chunk of the block kernel with few blocks and a long capacity.
// The split grid is sized by `capacity`, so both dispatches serve any S <= capacity once their uniforms
// (each holds `p`) are rewritten. `scratch` must hold flash_attention_scratch_bytes(device, p, capacity) bytes.
// Returns the dispatches to record in order (one or two).
std::vector<Dispatch> flash_attention(gpu::Device& device, BufferBinding Q, BufferBinding K, BufferBinding V,
                                      BufferBinding out, const KvBlocks& blocks, const FlashAttentionParams& p,
                                      BufferBinding scratch,
                                      uint32_t capacity, KvType kv = KvType::F32, FlashBlocking requested = {});

// The keys per tile of the variant flash_attention() runs for `p` on this device: KV blocks must hold whole tiles.
uint32_t flash_attention_key_tile(const gpu::Device& device, const FlashAttentionParams& p, KvType kv = KvType::F32,
                                  FlashBlocking requested = {});

// The key chunks the decoding split variant uses for up to `capacity` keys (1: the split variant is not used).
uint32_t flash_attention_splits(uint32_t capacity);
// Whether a step of shape `p` (its T) whose queries see `keys` keys should run the split variant the overload
// above returned (two dispatches) rather than the single dispatch: decoding past one key chunk, prompt chunks
// from 2,048 keys on (below, the combine dispatch costs more than the split gains).
bool flash_attention_split_serves(const FlashAttentionParams& p, uint32_t keys);
// Scratch bytes the overload above needs on this device for shape `p` (its T, up to the longest step's: prompt
// chunks may split too; heads and head_dim) and `capacity`; at least 4.
uint64_t flash_attention_scratch_bytes(const gpu::Device& device, const FlashAttentionParams& p,
                                       uint32_t capacity);

// A token id argmax and sample write when every logit is NaN (a broken model): the host stops on it.
constexpr uint32_t kNoToken = 0xFFFFFFFF;

// argmax.wgsl: greedy sampling on the GPU, for each of `rows` rows of `count` logits (row r from element
// r * row_stride: a batched step's sequences). Row r's largest logit's index (lowest index on ties, NaN never
// wins; every logit NaN: kNoToken) goes to next_ids[r] — the next decode step's input — and to history[slot + r].
// Two dispatches (record both, in order): kArgmaxPartials workgroups per row reduce chunks of the logits to
// (value, index) pairs in `partials`, then one workgroup per row reduces those.
// Bindings: 0 logits [(rows - 1) * row_stride + count], 1 next_ids [>= rows] u32, 2 history [>= slot + rows]
// u32, 3 partials [2 * kArgmaxPartials * rows] u32 (scratch), 4 params. Throws for no logits, no rows, more
// rows than a grid dimension holds, or rows that overlap (row_stride < count with several rows).
struct ArgmaxParams {
  uint32_t count, slot;
  uint32_t rows = 1, row_stride = 0;
};
constexpr uint32_t kArgmaxPartials = 256;  // argmax.wgsl PARTIALS
std::vector<Dispatch> argmax(gpu::Device& device, BufferBinding logits, BufferBinding next_ids, BufferBinding history,
                             BufferBinding partials, const ArgmaxParams& p);

// mask_tokens.wgsl: sets logits[logits_offset + i] (i < count) to NaN where bit i of `allowed` from word
// allowed_offset on (bit i % 32 of word allowed_offset + i / 32) is clear, so that argmax and sample, which never
// pick NaN, pick only allowed ids (constrained decoding without the logits read back; a batched step masks each
// sequence's row with its own words). Bindings: 0 logits [logits_offset + count] read_write, 1 allowed
// [allowed_offset + ceil(count / 32)] u32, 2 params. Throws for no logits.
uint32_t token_mask_words(uint32_t count);  // ceil(count / 32)
Dispatch mask_tokens(gpu::Device& device, BufferBinding logits, BufferBinding allowed, uint32_t count,
                     uint32_t logits_offset = 0, uint32_t allowed_offset = 0);

// sample.wgsl: sampling on the GPU (top-k of any size or off, then top-p and min-p, at a temperature), with
// generate/sampler.cpp's rule (integer weights, the cut as a prefix of sampling order, the draw in index order)
// and random numbers hashed from (seed, position). One chain of dispatches draws for every row of a step at once
// (a batched step's sequences), each row with its own SampleParams: its logits (count of them from
// logits_offset), its settings, its counts, and the slot its token goes to (next_ids[slot] and history[slot]).
// The caller writes the rows' settings into `rows` with write_sample_rows() before the chain runs (a step writes
// them before each run: the positions move). 3 + kSampleLevels dispatches (recorded in order): chunk maxima, a
// histogram of the weights, the levels that narrow the tokens around the cut down to at most kSampleGathered and
// gather them (each over every chunk; those with nothing left to do return at once), then one workgroup a row
// finds the cut among the gathered tokens and draws. Levels from the largest sample_levels() of the rows on may
// be left out (dispatches 2 + that up to the draw, which stays): settings without a cut need level 0 alone.
// Penalties as the host sampler's: the row's counts[i] (from counts_offset) is how often token i was generated,
// plus kSeenInPrompt where the prompt holds it; the repetition penalty applies to every token with counts[i] != 0,
// the presence and frequency penalties to those generated. The drawn token's count goes up by one.
// Bindings: 0 logits, 1 next_ids u32, 2 history u32, 3 scratch [rows * sample_candidates_words(count)] u32,
// 4 counts u32, 5 rows [rows] SampleParams; no uniform.
constexpr uint32_t kSeenInPrompt = 1u << 31;
struct SampleParams {
  uint32_t count;       // logits in the row: at most the chain's count
  uint32_t slot;        // where the drawn id goes
  uint32_t top_k;       // 0: off
  uint32_t position;    // of the step: with the seed, picks the random number
  float top_p = 1.0f;   // (0, 1]
  float min_p = 0.0f;   // [0, 1]
  float inv_temperature = 1.0f;
  uint32_t seed_lo = 0, seed_hi = 0;
  float repetition_penalty = 1.0f;  // > 0; 1: off
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  uint32_t logits_offset = 0;  // the row's first logit
  uint32_t counts_offset = 0;  // the row's first count (its sequence's)
  bool penalized() const { return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f; }
};
struct SampleBuffers {
  BufferBinding logits, next_ids, history, candidates, counts, rows;
};
constexpr uint32_t kSampleChunk = 2048;       // sample.wgsl CHUNK
constexpr uint32_t kSampleLevels = 10;        // sample.wgsl LEVELS: the worst case, 51 bits of position, both cuts
// The levels one cut needs at most (top-k or top-p alone): a bounds level, 4 refinements of 11 bits (51 bits of
// position down to aligned blocks of 2^7, at most 128 tokens), then the gather.
constexpr uint32_t kSampleLevelsOneCut = 6;
constexpr uint32_t kMaxSampleCount = 524288;  // 256 chunks: the drawing workgroup's invocations
uint64_t sample_candidates_words(uint32_t count);
// The levels a step with settings `p` needs (level L is dispatch 2 + L of sample()): 1 without a top-k or top-p
// cut (temperature and min-p alone), kSampleLevelsOneCut with one of them, kSampleLevels with both (the top-k
// cut's order key is narrowed down first, then top-p's cut from the top-k total).
uint32_t sample_levels(const SampleParams& p);
// Throws naming the setting when sample() cannot take `p`.
void check_sample_params(const SampleParams& p);
// The chain for `rows` rows of at most `count` logits each.
std::vector<Dispatch> sample(gpu::Device& device, const SampleBuffers& buffers, uint32_t count, uint32_t rows);
// Writes the settings of a chain for `count` logits (as sample() was given) into buffers.rows, row r's from
// ROWS[r], after checking each (its settings, its count, and that its logits, counts and slot lie inside the
// buffers) and that the scratch holds them all; throws naming the row and what is wrong.
void write_sample_rows(gpu::Device& device, const SampleBuffers& buffers, uint32_t count,
                       std::span<const SampleParams> rows);
// The uniform number in [0, 1) of draw ROUND (0: the walk over the best candidates; 1, 2, ...: the rounds of
// the rejection draw) at POSITION for SEED: sample.wgsl's random_unit(), a lowbias32 hash chain, 24 bits. The host
// sampler draws with it too, so a seeded sequence gets the same tokens on either.
double sample_unit(uint64_t seed, uint32_t position, uint32_t round);

static_assert(sizeof(EmbedParams) == 32 && sizeof(LinearParams) == 48);
static_assert(sizeof(ArgmaxParams) == 16 && sizeof(SampleParams) == 56);
static_assert(sizeof(GatedActParams) == 16 && sizeof(QkvRopeParams) == 32 && sizeof(FlashAttentionParams) == 32);

}  // namespace gerbil::kernels
