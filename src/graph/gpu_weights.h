// A checked model folder (model/weights.h) uploaded in the form the kernels read: linear weights as [out, in]
// rows in their checkpoint dtype (f32, or f16 / bf16 packed two per u32; never converted with loss unless asked;
// GGUF tensors kept quantized, TensorView::block_type, in kernels::pack_rows()'s layout), q/k/v and gate/up
// concatenated into one fused projection each, GPT-2's Conv1D weights transposed, norm weights and biases as f32
// (Gemma's 1 + w folded in), GPTQ and AWQ layers as int4 blocks of their groups (kernels::WeightType::Q4_G,
// Q4_G128).
// Weights larger than the adapter's maxStorageBufferBindingSize are bound as row blocks, never refused.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "kernels/dispatch.h"
#include "kernels/model.h"
#include "model/quant.h"
#include "model/weights.h"

namespace gerbil::graph {

// How linear weights are stored on the GPU.
enum class WeightPolicy {
  Checkpoint,  // as in the checkpoint: f32 stays f32, f16 f16, bf16 bf16 (no precision lost); act-order GPTQ
               // layers, which no int4 block holds, are requantized to Q8_0 (gptq_rows)
  F16,         // f32 and bf16 checkpoints converted to f16 (half the memory and bandwidth of f32)
};

// Rows [first_row, first_row + rows) of a weight, bound on their own, in their own type: the parts of a fused
// projection may differ (a Q4_K_M file's q|k|v: q and k Q4_K, v Q6_K), and each part is then its own blocks.
struct RowBlock {
  uint32_t first_row = 0, rows = 0;
  uint64_t byte_offset = 0, byte_size = 0;
  kernels::WeightType type = kernels::WeightType::F32;
};

// One linear layer y = x W^T + b with W [out, in].
struct GpuLinear {
  std::string name;
  uint32_t in = 0, out = 0;
  // The blocks' type where they share one; where the parts of a fused layer differ, a block type among them
  // (linear_can_fuse() refuses those, so the graph runs such a layer's norm and gate unfused).
  kernels::WeightType type = kernels::WeightType::F32;
  std::shared_ptr<gpu::Buffer> weight;  // shared: a tied LM head is the embedding table
  std::vector<RowBlock> blocks;
  std::optional<gpu::Buffer> bias;  // f32 [out]
};

struct GpuNorm {
  gpu::Buffer weight;             // f32 [dim], with Gemma's + 1 folded in
  std::optional<gpu::Buffer> bias;  // LayerNorm only
};

struct GpuLayer {
  GpuNorm attn_norm;
  std::optional<GpuNorm> q_norm, k_norm, attn_post_norm, mlp_norm, mlp_post_norm;
  GpuLinear qkv, o, up, down;  // up: [gate; up] rows for gated MLPs, the plain up projection otherwise
};

struct GpuWeights {
  GpuLinear embed;  // the token table as a "linear" [vocab, hidden] so a tied LM head can share it
  std::optional<gpu::Buffer> positions;  // learned position table [max_positions, hidden] f32 (GPT-2)
  GpuNorm final_norm;
  GpuLinear lm_head;
  std::vector<GpuLayer> layers;
  uint64_t bytes = 0;  // GPU bytes of all weights
};

// Called during upload with the checkpoint bytes handled so far and in all (ModelFiles::weight_bytes());
// the last call has done == total.
using LoadProgress = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;

GpuWeights upload_weights(gpu::Device& device, const ModelFiles& files, WeightPolicy policy,
                          const LoadProgress& progress = {});

// GPTQ (and AWQ, repacked into GPTQ's layout) layers on the GPU: the block type their groups are cut into
// (model/quant.h's int4_block_elements: Q4_G128 for groups of whole 128s, else Q4_G), and outputs [first,
// first + count) of a layer as that type's rows in kernels::pack_rows()'s layout (count rows of
// kernels::weight_row_bytes at `out`); `what` names the layer in errors.
kernels::WeightType gptq_block_type(const Int4Shape& shape);
void pack_gptq_rows(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                    std::span<const std::byte> scales, const Int4Shape& shape, uint64_t first, uint64_t count,
                    std::span<std::byte> out, std::string_view what);

// Splits `rows` rows of `row_bytes` each into blocks that fit one storage binding; block starts are
// multiples of 128 rows so their byte offsets meet the binding-offset alignment.
std::vector<RowBlock> row_blocks(uint64_t rows, uint64_t row_bytes, uint64_t max_binding_bytes);

// The kernels' type for a GGUF tensor's ggml block type; throws naming `tensor` and the type for the block types no
// kernel decodes.
kernels::WeightType block_weight_type(GgmlType type, std::string_view tensor);

}  // namespace gerbil::graph
