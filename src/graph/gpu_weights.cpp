#include "graph/gpu_weights.h"

#include <algorithm>
#include <cstring>

#include "gerbil/error.h"
#include "gpu/staging.h"
#include "graph/parallel.h"
#include "model/dtype.h"

namespace gerbil::graph {
namespace {

using kernels::WeightType;
using kernels::is_block_type;

// Makes rows [first, first + count) of a matrix as the GPU stores them into `out` (that range's first byte).
// Rows are independent, so workers make ranges of them side by side, straight into a mapped buffer.
using RowFill = std::function<void(uint64_t first, uint64_t count, std::byte* out)>;

// A [rows, cols] linear weight as the kernels store it: its type and how to make its rows from the checkpoint
// (copied, converted, transposed or packed).
struct StoredMatrix {
  WeightType type = WeightType::F32;
  uint64_t rows = 0, cols = 0, row_bytes = 0;
  std::string name;  // the tensor, for errors
  RowFill fill;
};

WeightType element_type(DType dtype) {
  return dtype == DType::F32 ? WeightType::F32 : dtype == DType::F16 ? WeightType::F16 : WeightType::BF16;
}

// `rows` rows of `cols` elements of type `from` (at `source`) converted into `to` at `out`.
void convert_rows(DType from, const std::byte* source, DType to, uint64_t rows, uint64_t cols, std::byte* out) {
  std::vector<float> values(rows * cols);
  convert_to_f32(from, {source, values.size() * dtype_size(from)}, values);
  convert_from_f32(to, values, {out, values.size() * dtype_size(to)});
}

// The [out, in] matrix of a linear weight stored as `policy` says; STORED_TRANSPOSED (RoleTensors::weight_in_out:
// GPT-2's Conv1D, [in, out], never a block view) is transposed here.
StoredMatrix linear_rows(const TensorView& tensor, bool stored_transposed, WeightPolicy policy,
                         std::string_view linear) {
  if (tensor.shape.size() != 2) fail("tensor '{}' in {}: expected a matrix", tensor.name, tensor.file.string());
  StoredMatrix m{WeightType::F32, uint64_t(tensor.shape[0]), uint64_t(tensor.shape[1]), 0, tensor.name, {}};
  std::span<const std::byte> bytes = tensor.bytes;
  if (tensor.block_type) {
    GgmlType file_type = *tensor.block_type;
    m.type = block_weight_type(file_type, tensor.name);
    const GgmlTypeInfo& info = ggml_type_info(file_type);
    uint64_t ggml_row = m.cols / info.block_size * info.block_bytes;
    if (m.cols % info.block_size != 0 || bytes.size() != m.rows * ggml_row)
      fail("tensor '{}': {} bytes of {} blocks are not {} rows of {} elements", tensor.name, bytes.size(), info.name,
           m.rows, m.cols);
    m.row_bytes = kernels::weight_row_bytes(m.type, m.cols);
    m.fill = [m, bytes, ggml_row](uint64_t first, uint64_t count, std::byte* out) {
      kernels::pack_rows(m.type, bytes.subspan(first * ggml_row, count * ggml_row), count, m.cols, m.name,
                         {out, count * m.row_bytes});
    };
    return m;
  }
  DType from = tensor.dtype;
  DType stored = policy == WeightPolicy::F16 ? DType::F16 : from;
  if (from != DType::F32 && from != DType::F16 && from != DType::BF16)
    fail("linear weight '{}' has dtype {}, which gerbil cannot run", linear, dtype_name(from));
  m.type = element_type(stored);
  uint64_t element = dtype_size(from);
  if (stored_transposed) std::swap(m.rows, m.cols);
  m.row_bytes = m.cols * dtype_size(stored);
  uint64_t cols = m.cols, rows = m.rows;
  if (stored_transposed) {
    // Row r of [out, in] gathers element r of every stored row, then is converted as a whole.
    m.fill = [=](uint64_t first, uint64_t count, std::byte* out) {
      std::vector<std::byte> gathered(count * cols * element);
      for (uint64_t r = 0; r < count; ++r)
        for (uint64_t c = 0; c < cols; ++c)
          std::memcpy(&gathered[(r * cols + c) * element], &bytes[(c * rows + first + r) * element], element);
      if (stored == from)
        std::memcpy(out, gathered.data(), gathered.size());
      else
        convert_rows(from, gathered.data(), stored, count, cols, out);
    };
  } else if (stored == from) {
    m.fill = [=](uint64_t first, uint64_t count, std::byte* out) {
      std::memcpy(out, bytes.data() + first * cols * element, count * cols * element);
    };
  } else {
    m.fill = [=](uint64_t first, uint64_t count, std::byte* out) {
      convert_rows(from, bytes.data() + first * cols * element, stored, count, cols, out);
    };
  }
  return m;
}

// The [out, in] rows of a GPTQ (or AWQ, repacked to GPTQ at load) layer as int4 group blocks (pack_gptq_rows), so
// that the layer takes the block types' kernels (decode, batched and prompt products alike). An act-order layer's
// groups are scattered over its inputs, which no int4 block can hold: its rows are requantized to Q8_0 (8.5 bits
// a weight; each block's step is 1/127 of its largest weight), or stored in f16 under WeightPolicy::F16 (16 bits,
// each weight within f16's rounding of its value).
StoredMatrix gptq_rows(const RoleTensors& role, WeightPolicy policy) {
  const GptqLinear& g = *role.gptq;
  Int4Shape shape{role.in_features, role.out_features, g.group_size};
  WeightType act_order_type = policy == WeightPolicy::F16 ? WeightType::F16 : WeightType::Q8_0;
  StoredMatrix m{g.act_order ? act_order_type : gptq_block_type(shape), uint64_t(shape.out), uint64_t(shape.in), 0,
                 g.qweight.name, {}};
  m.row_bytes = kernels::weight_row_bytes(m.type, m.cols);
  std::span<const std::byte> scales = g.scales.bytes;
  std::shared_ptr<std::vector<std::byte>> f16_scales;  // scales stored in another float dtype, as f16
  if (g.scales.dtype != DType::F16) {
    uint64_t count = uint64_t(g.scales.numel());
    f16_scales = std::make_shared<std::vector<std::byte>>(2 * count);
    convert_rows(g.scales.dtype, g.scales.bytes.data(), DType::F16, 1, count, f16_scales->data());
    scales = *f16_scales;
  }
  std::span<const std::byte> qweight = g.qweight.bytes, qzeros = g.qzeros.bytes, g_idx = g.g_idx.bytes;
  if (g.act_order) {
    m.fill = [m, shape, qweight, qzeros, scales, g_idx, f16_scales](uint64_t first, uint64_t count, std::byte* out) {
      std::vector<float> rows(count * m.cols);
      gptq_act_order_rows(qweight, qzeros, scales, g_idx, shape, first, count, rows, m.name);
      if (m.type == WeightType::F16)
        convert_from_f32(DType::F16, rows, {out, count * m.row_bytes});
      else
        kernels::pack_rows(m.type, quantize(GgmlType::Q8_0, rows), count, m.cols, m.name, {out, count * m.row_bytes});
    };
    return m;
  }
  m.fill = [m, shape, qweight, qzeros, scales, f16_scales](uint64_t first, uint64_t count, std::byte* out) {
    pack_gptq_rows(qweight, qzeros, scales, shape, first, count, {out, count * m.row_bytes}, m.name);
  };
  return m;
}

// Groups matrices with equal column counts (q, k, v -> qkv; gate, up -> gate_up) into runs of one type each,
// stored one after the other: one run, unless quantized parts differ in type (they keep theirs: never
// requantized).
std::vector<std::vector<StoredMatrix>> stack_rows(std::vector<StoredMatrix> parts) {
  std::vector<std::vector<StoredMatrix>> runs;
  for (StoredMatrix& part : parts) {
    if (part.cols != parts.front().cols)
      fail("cannot fuse linear layers with different input sizes ('{}': {}, '{}': {})", parts.front().name,
           parts.front().cols, part.name, part.cols);
    if (!runs.empty() && runs.back().front().type == part.type) {
      runs.back().push_back(std::move(part));
      continue;
    }
    const StoredMatrix* last = runs.empty() ? nullptr : &runs.back().front();
    if (last && !is_block_type(last->type) && !is_block_type(part.type))
      fail("cannot fuse linear layers with different dtypes ('{}': {}, '{}': {})", last->name,
           kernels::weight_type_name(last->type), part.name, kernels::weight_type_name(part.type));
    runs.push_back({});
    runs.back().push_back(std::move(part));
  }
  return runs;
}

std::vector<float> to_f32(const TensorView& tensor) {
  std::vector<float> values(size_t(tensor.numel()));
  convert_to_f32(tensor.dtype, tensor.bytes, values);
  return values;
}

// Checkpoint bytes of some roles' tensors (what reading them costs), for progress reports.
uint64_t checkpoint_bytes(std::span<const RoleTensors> roles) {
  uint64_t bytes = 0;
  for (const RoleTensors& role : roles) {
    for (const auto* tensor : {&role.weight, &role.bias})
      if (*tensor) bytes += (*tensor)->bytes.size();
    if (const auto& g = role.gptq)
      for (const TensorView* part : {&g->qweight, &g->qzeros, &g->scales, &g->g_idx}) bytes += part->bytes.size();
  }
  return bytes;
}

// One part of a weight buffer: `rows` rows of `row_bytes` bytes at `offset`, made by `fill`.
struct Part {
  uint64_t offset = 0, rows = 0, row_bytes = 0;
  RowFill fill;
};

// Creates each weight buffer and hands its parts to a staging ring, which makes them on every core into its
// windows as they fill, and the GPU copies each window into the buffers while the host makes the next (one pass over
// the checkpoint; the only host memory written is the ring's, allocated once).
class Uploader {
 public:
  Uploader(gpu::Device& device, const ModelFiles& files, WeightPolicy policy)
      : device_(device), files_(files), policy_(policy),
        ring_(device, std::clamp<uint64_t>(gpu::padded_bytes(files.weight_bytes()), 2 * kPieceBytes, kWindowBytes), 3,
              [](size_t count, const std::function<void(size_t)>& body) { parallel_for(count, body); }) {}

  uint64_t bytes() const { return bytes_; }

  // A buffer of `size` bytes made of `parts` (zeros wherever no part writes), in pieces of about kPieceBytes.
  gpu::Buffer upload(const std::string& label, uint64_t size, std::vector<Part> parts) {
    gpu::Buffer buffer = device_.create_buffer(label, size);
    std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.offset < b.offset; });
    std::vector<gpu::StagingRing::Piece> pieces;
    auto zeros = [&](uint64_t from, uint64_t to) {
      for (; from < to; from += kPieceBytes) pieces.push_back({std::min(kPieceBytes, to - from), {}});
    };
    uint64_t end = 0;
    for (Part& part : parts) {
      if (part.offset < end) fail("weight '{}': a part at byte {} overlaps the one before", label, part.offset);
      zeros(end, part.offset);
      auto fill = std::make_shared<RowFill>(std::move(part.fill));
      uint64_t step = std::max<uint64_t>(1, kPieceBytes / std::max<uint64_t>(1, part.row_bytes));
      for (uint64_t first = 0; first < part.rows; first += step) {
        uint64_t count = std::min(step, part.rows - first);
        pieces.push_back({count * part.row_bytes, [fill, first, count](std::byte* out) { (*fill)(first, count, out); }});
      }
      end = part.offset + part.rows * part.row_bytes;
    }
    zeros(end, buffer.padded_size());
    ring_.write(buffer, std::move(pieces));
    bytes_ += size;
    return buffer;
  }
  gpu::Buffer upload_f32(const std::string& label, std::vector<float> values) {
    auto owned = std::make_shared<std::vector<float>>(std::move(values));
    uint64_t count = owned->size();
    return upload(label, count * 4, {{0, count, 4, [owned](uint64_t first, uint64_t rows, std::byte* out) {
                                        std::memcpy(out, owned->data() + first, rows * 4);
                                      }}});
  }

  // Makes and sends what the ring holds: the buffers uploaded so far are then on their way to the GPU.
  void flush() { ring_.flush(); }

  GpuNorm norm(const RoleTensors& tensors, const std::string& label) {
    std::vector<float> weight = to_f32(*tensors.weight);
    if (files_.arch().norm == NormKind::RmsNormPlusOne)
      for (float& w : weight) w += 1.0f;
    GpuNorm norm{upload_f32(label, std::move(weight)), {}};
    if (tensors.bias) norm.bias = upload_f32(label + ".bias", to_f32(*tensors.bias));
    return norm;
  }

  // The linear layer made of `roles` stacked in order (one role, or q/k/v, or gate/up).
  GpuLinear linear(const std::vector<const RoleTensors*>& roles, const std::string& label) {
    GpuLinear linear;
    linear.name = label;
    std::vector<StoredMatrix> parts;
    for (auto* role : roles)
      parts.push_back(role->gptq ? gptq_rows(*role, policy_) : linear_rows(*role->weight, role->weight_in_out, policy_, label));
    place_weight(linear, stack_rows(std::move(parts)));
    linear.bias = bias(roles, label);
    return linear;
  }

  // A [rows, cols] table (embeddings) as a linear layer's weight.
  GpuLinear table(const TensorView& tensor, const std::string& label) {
    GpuLinear linear;
    linear.name = label;
    std::vector<std::vector<StoredMatrix>> runs(1);
    runs[0].push_back(linear_rows(tensor, false, policy_, label));
    place_weight(linear, runs);
    return linear;
  }

 private:
  static constexpr uint64_t kPieceBytes = uint64_t(1) << 20;
  // A staging window: small enough that the ring's host memory stays small and the first copy starts early, large
  // enough for each copy's fixed costs to vanish (the ring holds three; small models' are their weights' size).
  static constexpr uint64_t kWindowBytes = uint64_t(32) << 20;

  // One buffer holding the runs of rows one after the other, each starting at a binding-offset boundary and
  // cut into row blocks of its own type.
  void place_weight(GpuLinear& linear, const std::vector<std::vector<StoredMatrix>>& runs) {
    uint64_t align = std::max<uint64_t>(256, device_.limits().minStorageBufferOffsetAlignment);
    // Kernels read W as arrays of 8- and 16-byte pieces: a block's binding is a whole number of 16 bytes.
    uint64_t max_binding = device_.limits().maxStorageBufferBindingSize / 16 * 16;
    std::vector<Part> parts;
    uint64_t size = 0;
    linear.in = uint32_t(runs.front().front().cols);
    linear.out = 0;
    for (const std::vector<StoredMatrix>& run : runs) {
      WeightType type = run.front().type;
      uint64_t row_bytes = run.front().row_bytes, rows = 0;
      if (is_block_type(type) || linear.blocks.empty()) linear.type = type;
      size = (size + align - 1) / align * align;
      for (const StoredMatrix& matrix : run) {
        parts.push_back({size + rows * row_bytes, matrix.rows, row_bytes, matrix.fill});
        rows += matrix.rows;
      }
      for (RowBlock block : row_blocks(rows, row_bytes, max_binding - 16)) {
        block.first_row += linear.out;
        block.byte_offset += size;
        block.byte_size = (block.byte_size + 15) / 16 * 16;
        block.type = type;
        linear.blocks.push_back(block);
      }
      size += rows * row_bytes;
      linear.out += uint32_t(rows);
    }
    size = (size + 15) / 16 * 16;
    linear.weight = std::make_shared<gpu::Buffer>(upload(linear.name, size, std::move(parts)));
  }

  std::optional<gpu::Buffer> bias(const std::vector<const RoleTensors*>& roles, const std::string& label) {
    if (!roles.front()->bias) return std::nullopt;
    std::vector<float> all;
    for (auto* role : roles) {
      if (!role->bias) fail("linear layer '{}': some fused parts have a bias and some do not", label);
      auto part = to_f32(*role->bias);
      all.insert(all.end(), part.begin(), part.end());
    }
    return upload_f32(label + ".bias", std::move(all));
  }

  gpu::Device& device_;
  const ModelFiles& files_;
  WeightPolicy policy_;
  uint64_t bytes_ = 0;
  gpu::StagingRing ring_;
};

}  // namespace

WeightType gptq_block_type(const Int4Shape& shape) {
  return int4_block_elements(uint64_t(shape.group_size)) == 128 ? WeightType::Q4_G128 : WeightType::Q4_G;
}

void pack_gptq_rows(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                    std::span<const std::byte> scales, const Int4Shape& shape, uint64_t first, uint64_t count,
                    std::span<std::byte> out, std::string_view what) {
  uint64_t elements = int4_block_elements(uint64_t(shape.group_size));
  std::vector<std::byte> blocks(count * uint64_t(shape.in) / elements * int4_block_bytes(elements));
  gptq_group_blocks(qweight, qzeros, scales, shape, first, count, blocks, what);
  kernels::pack_rows(gptq_block_type(shape), blocks, count, uint64_t(shape.in), what, out);
}

WeightType block_weight_type(GgmlType type, std::string_view tensor) {
  switch (type) {
    case GgmlType::Q8_0: return WeightType::Q8_0;
    case GgmlType::Q4_0: return WeightType::Q4_0;
    case GgmlType::Q4_1: return WeightType::Q4_1;
    case GgmlType::Q5_0: return WeightType::Q5_0;
    case GgmlType::Q5_1: return WeightType::Q5_1;
    case GgmlType::Q4_K: return WeightType::Q4_K;
    case GgmlType::Q5_K: return WeightType::Q5_K;
    case GgmlType::Q6_K: return WeightType::Q6_K;
    case GgmlType::Q3_K: return WeightType::Q3_K;
    case GgmlType::Q2_K: return WeightType::Q2_K;
    case GgmlType::IQ4_NL: return WeightType::IQ4_NL;
    case GgmlType::IQ4_XS: return WeightType::IQ4_XS;
    case GgmlType::IQ3_XXS: return WeightType::IQ3_XXS;
    case GgmlType::IQ3_S: return WeightType::IQ3_S;
    default: break;
  }
  fail("tensor '{}' is quantized as {}, which gerbil's GPU kernels do not decode (they do Q8_0, Q4_0, Q4_1, Q5_0, "
       "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, IQ3_XXS and IQ3_S)", tensor, ggml_type_name(type));
}

std::vector<RowBlock> row_blocks(uint64_t rows, uint64_t row_bytes, uint64_t max_binding_bytes) {
  uint64_t max_rows = max_binding_bytes / row_bytes;
  if (max_rows >= rows) return {{0, uint32_t(rows), 0, rows * row_bytes}};
  max_rows = max_rows / 128 * 128;
  if (max_rows == 0) fail("one weight row of {} bytes exceeds the storage binding limit of {}", row_bytes, max_binding_bytes);
  std::vector<RowBlock> blocks;
  for (uint64_t first = 0; first < rows; first += max_rows) {
    uint64_t count = std::min(max_rows, rows - first);
    blocks.push_back({uint32_t(first), uint32_t(count), first * row_bytes, count * row_bytes});
  }
  return blocks;
}

GpuWeights upload_weights(gpu::Device& device, const ModelFiles& files, WeightPolicy policy,
                          const LoadProgress& progress) {
  const ModelConfig& config = files.config();
  const ArchitectureSpec& arch = files.arch();
  const ModelWeights& w = files.weights();
  Uploader up(device, files, policy);
  GpuWeights gpu;
  // Each report sends what the staging ring holds, so the progress counts bytes on their way to the GPU.
  uint64_t done = 0;
  auto report = [&](uint64_t bytes) {
    up.flush();
    done = std::min(files.weight_bytes(), done + bytes);
    if (progress) progress(done, files.weight_bytes());
  };
  if (progress) progress(0, files.weight_bytes());

  gpu.embed = up.table(*w.get(Role::Embed).weight, "embed_tokens");
  if (arch.positions == PositionKind::Learned) gpu.positions = up.upload_f32("position_embeddings", to_f32(*w.get(Role::PosEmbed).weight));
  gpu.final_norm = up.norm(w.get(Role::FinalNorm), "final_norm");
  if (w.tied) {
    // The LM head is the embedding table itself: share its buffer and row blocks.
    gpu.lm_head.name = "lm_head (tied)";
    gpu.lm_head.in = gpu.embed.in;
    gpu.lm_head.out = gpu.embed.out;
    gpu.lm_head.type = gpu.embed.type;
    gpu.lm_head.weight = gpu.embed.weight;
    gpu.lm_head.blocks = gpu.embed.blocks;
  } else {
    gpu.lm_head = up.linear({&w.get(Role::LmHead)}, "lm_head");
  }
  if (w.get(Role::LmHead).bias && !gpu.lm_head.bias)
    gpu.lm_head.bias = up.upload_f32("lm_head.bias", to_f32(*w.get(Role::LmHead).bias));
  // A tied LM head is the embedding tensor: count it once.
  report(checkpoint_bytes(w.globals) - (w.tied ? w.get(Role::Embed).weight->bytes.size() : 0));

  for (int l = 0; l < int(config.num_layers); ++l) {
    auto label = [l](const char* what) { return fmt::format("layer {} {}", l, what); };
    auto role = [&](Role r) { return &w.get(l, r); };
    auto optional_norm = [&](Role r, const char* what) -> std::optional<GpuNorm> {
      if (!arch.has(r)) return std::nullopt;
      return up.norm(*role(r), label(what));
    };
    GpuLayer layer;
    layer.attn_norm = up.norm(*role(Role::AttnNorm), label("attn_norm"));
    layer.q_norm = optional_norm(Role::QNorm, "q_norm");
    layer.k_norm = optional_norm(Role::KNorm, "k_norm");
    layer.attn_post_norm = optional_norm(Role::AttnPostNorm, "attn_post_norm");
    layer.mlp_norm = optional_norm(Role::MlpNorm, "mlp_norm");
    layer.mlp_post_norm = optional_norm(Role::MlpPostNorm, "mlp_post_norm");
    if (arch.has(Role::Qkv))
      layer.qkv = up.linear({role(Role::Qkv)}, label("qkv"));
    else
      layer.qkv = up.linear({role(Role::Q), role(Role::K), role(Role::V)}, label("qkv"));
    layer.o = up.linear({role(Role::O)}, label("o"));
    if (arch.has(Role::GateUp))
      layer.up = up.linear({role(Role::GateUp)}, label("gate_up"));
    else if (arch.has(Role::Gate))
      layer.up = up.linear({role(Role::Gate), role(Role::Up)}, label("gate_up"));
    else
      layer.up = up.linear({role(Role::Up)}, label("up"));
    layer.down = up.linear({role(Role::Down)}, label("down"));
    gpu.layers.push_back(std::move(layer));
    report(checkpoint_bytes(w.layers[size_t(l)]));
  }
  gpu.bytes = up.bytes();
  // Loading ends with the weights in GPU memory: the first request does not wait behind their copies (on an H200,
  // PCIe-bound: about 0.3 s for an 8B model in f16).
  device.wait_idle();
  return gpu;
}

}  // namespace gerbil::graph
