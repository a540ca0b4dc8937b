#include "graph/gpu_weights.h"

#include <algorithm>
#include <cstring>

#include "gerbil/error.h"
#include "model/dtype.h"

namespace gerbil::graph {
namespace {

using kernels::WeightType;
using kernels::is_block_type;

// A host-side [rows, cols] matrix of one dtype, or of ggml blocks (`block`, then `dtype` is ignored), as raw bytes.
struct HostMatrix {
  DType dtype = DType::F32;
  uint64_t rows = 0, cols = 0;
  std::vector<std::byte> bytes;
  std::optional<WeightType> block;
  std::string name;  // the tensor (of the first part, once stacked), for errors

  bool same_type(const HostMatrix& other) const {
    return block == other.block && (block || dtype == other.dtype);
  }
};

// The [out, in] matrix of a linear weight; GPT-2's Conv1D stores [in, out] and is transposed here.
HostMatrix linear_rows(const TensorView& tensor, bool stored_transposed) {
  if (tensor.shape.size() != 2) fail("tensor '{}' in {}: expected a matrix", tensor.name, tensor.file.string());
  HostMatrix m{tensor.dtype, uint64_t(tensor.shape[0]), uint64_t(tensor.shape[1]), {}, {}, tensor.name};
  if (tensor.block_type) {
    m.block = block_weight_type(*tensor.block_type, tensor.name);
    if (stored_transposed)
      fail("tensor '{}' in {}: a quantized ({}) weight stored [in, out] cannot be transposed", tensor.name,
           tensor.file.string(), ggml_type_name(*tensor.block_type));
  }
  if (!stored_transposed) {
    m.bytes.assign(tensor.bytes.begin(), tensor.bytes.end());
    return m;
  }
  std::swap(m.rows, m.cols);
  size_t element = dtype_size(tensor.dtype);
  m.bytes.resize(tensor.bytes.size());
  for (uint64_t r = 0; r < m.rows; ++r)
    for (uint64_t c = 0; c < m.cols; ++c)
      std::memcpy(&m.bytes[(r * m.cols + c) * element], &tensor.bytes[(c * m.rows + r) * element], element);
  return m;
}

// Stacks matrices with equal column counts (q, k, v -> qkv; gate, up -> gate_up) into runs of one type each:
// one run, unless quantized parts differ in type (they keep theirs: never requantized).
std::vector<HostMatrix> stack_rows(std::vector<HostMatrix> parts) {
  std::vector<HostMatrix> runs;
  for (HostMatrix& part : parts) {
    if (part.cols != parts.front().cols)
      fail("cannot fuse linear layers with different input sizes ('{}': {}, '{}': {})", parts.front().name,
           parts.front().cols, part.name, part.cols);
    if (!runs.empty() && runs.back().same_type(part)) {
      runs.back().rows += part.rows;
      runs.back().bytes.insert(runs.back().bytes.end(), part.bytes.begin(), part.bytes.end());
      continue;
    }
    if (!runs.empty() && !runs.back().block && !part.block)
      fail("cannot fuse linear layers with different dtypes ('{}': {}, '{}': {})", runs.back().name,
           dtype_name(runs.back().dtype), part.name, dtype_name(part.dtype));
    runs.push_back(std::move(part));
  }
  return runs;
}

// Places matrices with equal row counts side by side (GPTQ tensors are [K-ish, N]: fusing concatenates N).
HostMatrix join_columns(const std::vector<HostMatrix>& parts) {
  HostMatrix all{parts.front().dtype, parts.front().rows, 0, {}};
  for (auto& part : parts) all.cols += part.cols;
  size_t element = dtype_size(all.dtype);
  all.bytes.reserve(all.rows * all.cols * element);
  for (uint64_t r = 0; r < all.rows; ++r)
    for (auto& part : parts) {
      auto row = part.bytes.begin() + std::ptrdiff_t(r * part.cols * element);
      all.bytes.insert(all.bytes.end(), row, row + std::ptrdiff_t(part.cols * element));
    }
  return all;
}

HostMatrix as_matrix(const TensorView& tensor) {
  uint64_t rows = tensor.shape.size() == 2 ? uint64_t(tensor.shape[0]) : 1;
  return {tensor.dtype, rows, uint64_t(tensor.numel()) / rows, {tensor.bytes.begin(), tensor.bytes.end()}};
}

std::vector<float> to_f32(const TensorView& tensor) {
  std::vector<float> values(size_t(tensor.numel()));
  convert_to_f32(tensor.dtype, tensor.bytes, values);
  return values;
}

std::vector<std::byte> convert(const HostMatrix& m, DType to) {
  std::vector<float> values(m.rows * m.cols);
  convert_to_f32(m.dtype, m.bytes, values);
  std::vector<std::byte> out(values.size() * dtype_size(to));
  convert_from_f32(to, values, out);
  return out;
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

class Uploader {
 public:
  Uploader(gpu::Device& device, const ModelFiles& files, WeightPolicy policy)
      : device_(device), files_(files), policy_(policy) {}

  uint64_t bytes() const { return bytes_; }

  gpu::Buffer upload(const std::string& label, std::span<const std::byte> data) {
    gpu::Buffer buffer = device_.create_buffer(label, data.size());
    device_.write(buffer, data);
    bytes_ += data.size();
    return buffer;
  }
  gpu::Buffer upload_f32(const std::string& label, const std::vector<float>& values) {
    return upload(label, std::as_bytes(std::span(values)));
  }

  GpuNorm norm(const RoleTensors& tensors, const std::string& label) {
    std::vector<float> weight = to_f32(*tensors.weight);
    if (files_.arch().norm == NormKind::RmsNormPlusOne)
      for (float& w : weight) w += 1.0f;
    GpuNorm norm{upload_f32(label, weight), {}};
    if (tensors.bias) norm.bias = upload_f32(label + ".bias", to_f32(*tensors.bias));
    return norm;
  }

  // The linear layer made of `roles` stacked in order (one role, or q/k/v, or gate/up).
  GpuLinear linear(const std::vector<const RoleTensors*>& roles, const std::string& label) {
    GpuLinear linear;
    linear.name = label;
    bool conv1d = files_.arch().conv1d_weights;
    if (roles.front()->gptq) return gptq_linear(roles, label);
    std::vector<HostMatrix> parts;
    for (auto* role : roles) parts.push_back(linear_rows(*role->weight, conv1d));
    place_weight(linear, stack_rows(std::move(parts)));
    linear.bias = bias(roles, label);
    return linear;
  }

  // A [rows, cols] table (embeddings) as a linear layer's weight.
  GpuLinear table(const TensorView& tensor, const std::string& label) {
    GpuLinear linear;
    linear.name = label;
    place_weight(linear, {linear_rows(tensor, false)});
    return linear;
  }

 private:
  // The bytes of one run of rows as the kernels read them, in its type (set here).
  std::vector<std::byte> stored_bytes(const GpuLinear& linear, const HostMatrix& w, WeightType& type) const {
    if (w.block) {
      type = *w.block;
      return kernels::pack_rows(type, w.bytes, w.rows, w.cols, w.name);
    }
    DType stored = w.dtype;
    if (policy_ == WeightPolicy::F16 && stored != DType::F16) stored = DType::F16;
    if (stored != DType::F32 && stored != DType::F16 && stored != DType::BF16)
      fail("linear weight '{}' has dtype {}, which gerbil cannot run", linear.name, dtype_name(w.dtype));
    type = stored == DType::F32 ? WeightType::F32 : stored == DType::F16 ? WeightType::F16 : WeightType::BF16;
    return stored == w.dtype ? w.bytes : convert(w, stored);
  }

  // One buffer holding the runs of rows one after the other, each starting at a binding-offset boundary and
  // cut into row blocks of its own type.
  void place_weight(GpuLinear& linear, const std::vector<HostMatrix>& runs) {
    uint64_t align = std::max<uint64_t>(256, device_.limits().minStorageBufferOffsetAlignment);
    // Kernels read W as arrays of 8- and 16-byte pieces: a block's binding is a whole number of 16 bytes.
    uint64_t max_binding = device_.limits().maxStorageBufferBindingSize / 16 * 16;
    std::vector<std::byte> data;
    linear.in = uint32_t(runs.front().cols);
    linear.out = 0;
    for (const HostMatrix& run : runs) {
      WeightType type;
      std::vector<std::byte> bytes = stored_bytes(linear, run, type);
      if (is_block_type(type) || linear.blocks.empty()) linear.type = type;
      data.resize((data.size() + align - 1) / align * align);
      for (RowBlock block : row_blocks(run.rows, bytes.size() / run.rows, max_binding - 16)) {
        block.first_row += linear.out;
        block.byte_offset += data.size();
        block.byte_size = (block.byte_size + 15) / 16 * 16;
        block.type = type;
        linear.blocks.push_back(block);
      }
      data.insert(data.end(), bytes.begin(), bytes.end());
      linear.out += uint32_t(run.rows);
    }
    data.resize((data.size() + 15) / 16 * 16);
    linear.weight = std::make_shared<gpu::Buffer>(upload(linear.name, data));
  }

  std::optional<gpu::Buffer> bias(const std::vector<const RoleTensors*>& roles, const std::string& label) {
    if (!roles.front()->bias) return std::nullopt;
    std::vector<float> all;
    for (auto* role : roles) {
      if (!role->bias) fail("linear layer '{}': some fused parts have a bias and some do not", label);
      auto part = to_f32(*role->bias);
      all.insert(all.end(), part.begin(), part.end());
    }
    return upload_f32(label + ".bias", all);
  }

  GpuLinear gptq_linear(const std::vector<const RoleTensors*>& roles, const std::string& label) {
    std::vector<HostMatrix> qweight, qzeros, scales;
    GpuLinear linear;
    linear.name = label;
    for (auto* role : roles) {
      const GptqLinear& g = *role->gptq;
      qweight.push_back(as_matrix(g.qweight));
      qzeros.push_back(as_matrix(g.qzeros));
      HostMatrix s = as_matrix(g.scales);
      if (s.dtype != DType::F16) s = {DType::F16, s.rows, s.cols, convert(s, DType::F16)};
      scales.push_back(std::move(s));
      linear.in = uint32_t(role->in_features);
      linear.out += uint32_t(role->out_features);
    }
    GpuGptq gptq;
    gptq.group_size = uint32_t(roles.front()->gptq->group_size);
    gptq.qweight = upload(label + ".qweight", join_columns(qweight).bytes);
    gptq.qzeros = upload(label + ".qzeros", join_columns(qzeros).bytes);
    gptq.scales = upload(label + ".scales", join_columns(scales).bytes);
    linear.gptq = std::move(gptq);
    linear.bias = bias(roles, label);
    return linear;
  }

  gpu::Device& device_;
  const ModelFiles& files_;
  WeightPolicy policy_;
  uint64_t bytes_ = 0;
};

}  // namespace

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
    default: break;
  }
  fail("tensor '{}' is quantized as {}, which gerbil's GPU kernels do not decode (they do Q8_0, Q4_0, Q4_1, Q5_0, "
       "Q5_1, Q4_K, Q5_K, Q6_K)", tensor, ggml_type_name(type));
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
  uint64_t done = 0;
  auto report = [&](uint64_t bytes) {
    done = std::min(files.weight_bytes(), done + bytes);
    if (progress) progress(done, files.weight_bytes());
  };
  report(0);

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
  return gpu;
}

}  // namespace gerbil::graph
