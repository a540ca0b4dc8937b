#include "model/weights.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

#include "gerbil/error.h"
#include "model/gguf_model.h"

namespace gerbil {

namespace fs = std::filesystem;

namespace {

struct LinearShape {
  int64_t in = 0, out = 0;
};

LinearShape linear_shape(const ModelConfig& c, Role role) {
  int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  int64_t h = c.hidden_size, inter = c.intermediate_size;
  switch (role) {
    case Role::Q: return {h, q};
    case Role::K:
    case Role::V: return {h, kv};
    case Role::Qkv: return {h, q + 2 * kv};
    case Role::O: return {q, h};
    case Role::Gate:
    case Role::Up: return {h, inter};
    case Role::GateUp: return {h, 2 * inter};
    case Role::Down: return {inter, h};
    case Role::LmHead: return {h, c.vocab_size};
    default: fail("{} is not a linear layer", role_name(role));
  }
}

bool has_bias(const ModelConfig& c, Role role) {
  switch (role) {
    case Role::Q:
    case Role::K:
    case Role::V:
    case Role::Qkv: return c.qkv_bias;
    case Role::O: return c.o_bias;
    case Role::Gate:
    case Role::Up:
    case Role::GateUp:
    case Role::Down: return c.mlp_bias;
    case Role::LmHead: return c.lm_head_bias;
    default: return is_norm_role(role) && c.arch->norm_has_bias();
  }
}

std::string_view part_suffix(Part part) {
  switch (part) {
    case Part::Weight: return "weight";
    case Part::Bias: return "bias";
    case Part::QWeight: return "qweight";
    case Part::QZeros: return "qzeros";
    case Part::Scales: return "scales";
    case Part::GIdx: return "g_idx";
  }
  return "";
}

bool is_int_part(Part part) { return part == Part::QWeight || part == Part::QZeros || part == Part::GIdx; }

// Tensors a checkpoint may carry that no computation uses: cached rotary frequencies, and GPT-2's
// causal-mask buffers. A tied model's redundant lm_head.weight is ignored as transformers does.
bool is_harmless(const std::string& name, const ModelConfig& config) {
  for (std::string_view suffix : {".rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias"})
    if (name.ends_with(suffix)) return true;
  return config.tie_word_embeddings && config.arch->has(Role::LmHead) &&
         name == config.arch->tensor_name(Role::LmHead, -1, "weight");
}

class ExpectedList {
 public:
  explicit ExpectedList(const ModelConfig& config) : config_(config), arch_(*config.arch) {}

  void add(int layer, Role role, Part part, std::vector<int64_t> shape) {
    list_.push_back({arch_.tensor_name(role, layer, part_suffix(part)), std::move(shape), layer, role, part});
  }

  void add_norm(int layer, Role role) {
    int64_t dim = role == Role::QNorm || role == Role::KNorm ? config_.head_dim : config_.hidden_size;
    add(layer, role, Part::Weight, {dim});
    if (has_bias(config_, role)) add(layer, role, Part::Bias, {dim});
  }

  void add_linear(int layer, Role role, bool quantized) {
    LinearShape s = linear_shape(config_, role);
    if (quantized)
      add_gptq(layer, role, s);
    else
      add(layer, role, Part::Weight, stored_in_out(arch_, role) ? std::vector{s.in, s.out} : std::vector{s.out, s.in});
    if (has_bias(config_, role)) add(layer, role, Part::Bias, {s.out});
  }

  std::vector<ExpectedTensor> take() { return std::move(list_); }

 private:
  // GPTQ v1 or AWQ GEMM tensors (their layouts: model/quant.h), checked against the kernels' needs.
  void add_gptq(int layer, Role role, LinearShape s) {
    int64_t group = config_.gptq->group_size > 0 ? config_.gptq->group_size : s.in;
    std::string base = arch_.tensor_name(role, layer, "qweight");
    bool awq = config_.gptq->format == Int4Format::Awq;
    // Inputs in whole groups of whole 32-input blocks (kernels::WeightType::Q4_G), outputs in words of 8.
    if (s.out % 8 != 0 || group % 32 != 0 || s.in % group != 0)
      fail(
          "{}: {} layer {} has {} inputs and {} outputs; gerbil needs outputs a multiple of 8, and inputs a "
          "multiple of group_size {}, itself a multiple of 32",
          config_.file.string(), awq ? "AWQ" : "GPTQ", base, s.in, s.out, group);
    int64_t groups = s.in / group;
    add(layer, role, Part::QWeight, awq ? std::vector{s.in, s.out / 8} : std::vector{s.in / 8, s.out});
    add(layer, role, Part::QZeros, {groups, s.out / 8});
    add(layer, role, Part::Scales, {groups, s.out});
    if (!awq) add(layer, role, Part::GIdx, {s.in});
  }

  const ModelConfig& config_;
  const ArchitectureSpec& arch_;
  std::vector<ExpectedTensor> list_;
};

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// A list of names for an error message, cut after a few.
std::string name_list(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 6;
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(names.size(), kShown));
  std::string text = fmt::format("{}", fmt::join(shown, ", "));
  if (names.size() > kShown) text += fmt::format(" (and {} more)", names.size() - kShown);
  return text;
}

// Block views (GGUF's quantized matrices) stand for embeddings and linear weights, always as [out, in].
void check_block_view(const ExpectedTensor& expected, const TensorView& view, const ModelConfig& config) {
  bool matrix = expected.part == Part::Weight && (expected.role == Role::Embed || is_linear_role(expected.role));
  if (!matrix)
    fail("{}: tensor \"{}\" is stored in ggml blocks ({}); only embeddings and linear weights may be",
         view.file.string(), view.name, ggml_type_name(*view.block_type));
  std::vector<int64_t> want = expected.shape;
  if (stored_in_out(*config.arch, expected.role)) std::swap(want[0], want[1]);
  if (view.shape != want)
    fail("{}: tensor \"{}\" has shape {} ({} blocks, [out, in]), but {} implies {}", view.file.string(), view.name,
         shape_string(view.shape), ggml_type_name(*view.block_type), config.file.string(), shape_string(want));
  uint64_t row_bytes = ggml_byte_size(*view.block_type, uint64_t(want[1]));
  if (view.bytes.size() != row_bytes * uint64_t(want[0]))
    fail("{}: tensor \"{}\" holds {} bytes, but {} rows of {} {} elements take {}", view.file.string(), view.name,
         view.bytes.size(), want[0], want[1], ggml_type_name(*view.block_type), row_bytes * uint64_t(want[0]));
}

void check_tensor(const ExpectedTensor& expected, const TensorView& view, const ModelConfig& config) {
  if (view.block_type) return check_block_view(expected, view, config);
  if (view.shape != expected.shape)
    fail("{}: tensor \"{}\" has shape {}, but {} implies {}", view.file.string(), view.name,
         shape_string(view.shape), config.file.string(), shape_string(expected.shape));
  bool dtype_ok = is_int_part(expected.part)
                      ? view.dtype == DType::I32
                      : (view.dtype == DType::F32 || view.dtype == DType::F16 || view.dtype == DType::BF16);
  if (!dtype_ok)
    fail("{}: tensor \"{}\" has dtype {}, expected {}", view.file.string(), view.name, dtype_name(view.dtype),
         is_int_part(expected.part) ? "I32" : "F32, F16 or BF16");
}

void place(RoleTensors& slot, Part part, const TensorView& view) {
  switch (part) {
    case Part::Weight: slot.weight = view; return;
    case Part::Bias: slot.bias = view; return;
    default: break;
  }
  if (!slot.gptq) slot.gptq.emplace();
  switch (part) {
    case Part::QWeight: slot.gptq->qweight = view; return;
    case Part::QZeros: slot.gptq->qzeros = view; return;
    case Part::Scales: slot.gptq->scales = view; return;
    case Part::GIdx: slot.gptq->g_idx = view; return;
    default: return;
  }
}

// Whether every input row k sits in group k / group_size (act-order off); throws for a group that does not exist.
bool groups_in_order(const GptqLinear& gptq) {
  const TensorView& g_idx = gptq.g_idx;
  const int64_t groups = g_idx.numel() / gptq.group_size;
  bool in_order = true;
  for (int64_t k = 0; k < g_idx.numel(); ++k) {
    int32_t group;
    std::memcpy(&group, g_idx.bytes.data() + 4 * k, 4);
    if (group < 0 || group >= groups)
      fail("{}: tensor \"{}\" puts input row {} in group {}, outside the layer's {} groups (group_size {})",
           g_idx.file.string(), g_idx.name, k, group, groups, gptq.group_size);
    in_order &= group == k / gptq.group_size;
  }
  return in_order;
}

// Replaces an AWQ layer's views (shapes checked against the config) with views of its GPTQ repacking,
// kept alive by STORE.
void repack_awq(GptqLinear& layer, LinearShape s, std::vector<std::shared_ptr<const GptqInt4>>& store) {
  auto repacked = std::make_shared<const GptqInt4>(
      repack_awq_gemm(layer.qweight.bytes, layer.qzeros.bytes, layer.scales.bytes, layer.scales.dtype,
                      {s.in, s.out, layer.group_size}, layer.qweight.name));
  layer.qweight.shape = {s.in / 8, s.out};
  layer.qweight.bytes = std::as_bytes(std::span(repacked->qweight));
  layer.qzeros.bytes = std::as_bytes(std::span(repacked->qzeros));
  layer.scales.bytes = repacked->scales;
  store.push_back(std::move(repacked));
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config) {
  const ArchitectureSpec& arch = *config.arch;
  ExpectedList list(config);
  list.add(-1, Role::Embed, Part::Weight, {config.vocab_size, config.hidden_size});
  if (arch.has(Role::PosEmbed))
    list.add(-1, Role::PosEmbed, Part::Weight, {config.max_position_embeddings, config.hidden_size});
  list.add_norm(-1, Role::FinalNorm);
  if (!config.tie_word_embeddings) {
    list.add_linear(-1, Role::LmHead, false);
  } else if (config.lm_head_bias) {
    list.add(-1, Role::LmHead, Part::Bias, {config.vocab_size});
  }
  for (int layer = 0; layer < config.num_layers; ++layer) {
    for (int r = int(Role::AttnNorm); r < int(Role::Count); ++r) {
      Role role = Role(r);
      if (!arch.has(role)) continue;
      if (is_norm_role(role))
        list.add_norm(layer, role);
      else
        list.add_linear(layer, role, config.gptq.has_value());
    }
  }
  return list.take();
}

void check_model_folder(const fs::path& dir) {
  std::error_code error;
  fs::file_status status = fs::status(dir, error);
  if (error && error != std::errc::no_such_file_or_directory) fail("{}: {}", dir.string(), error.message());
  if (!fs::is_directory(status) && !is_gguf_file(dir)) fail("{}: no such model folder or GGUF file", dir.string());
}

ModelFiles ModelFiles::open(const fs::path& dir) {
  check_model_folder(dir);
  ModelFiles files;
  files.dir_ = dir;
  if (is_gguf_file(dir)) {  // one .gguf file: config and tensors converted from its metadata and blocks
    Gguf gguf = Gguf::open(dir);
    nlohmann::json config = gguf_config_json(gguf);
    files.config_ = parse_config(config, dir);
    files.tensors_ = gguf_tensors(gguf, config);
  } else {
    files.config_ = load_config(dir);
    files.tensors_ = Safetensors::open(dir);
  }
  const ModelConfig& config = files.config_;
  ModelWeights& weights = files.weights_;
  weights.layers.resize(std::size_t(config.num_layers));
  weights.tied = config.tie_word_embeddings;

  std::set<std::string> used;
  std::vector<std::string> missing;
  for (const ExpectedTensor& expected : expected_tensors(config)) {
    const TensorView* view = files.tensors_.find(expected.name);
    if (!view) {
      missing.push_back(fmt::format("{} {}", expected.name, shape_string(expected.shape)));
      continue;
    }
    check_tensor(expected, *view, config);
    used.insert(expected.name);
    files.weight_bytes_ += view->bytes.size();
    auto& slots = expected.layer < 0 ? weights.globals : weights.layers[std::size_t(expected.layer)];
    place(slots[std::size_t(expected.role)], expected.part, *view);
  }
  if (!missing.empty())
    fail("{}: {} tensor(s) that {} calls for are missing: {}", dir.string(), missing.size(),
         config.file.string(), name_list(missing));

  std::vector<std::string> unexpected;
  for (const std::string& name : files.tensors_.names())
    if (!used.contains(name) && !is_harmless(name, config)) unexpected.push_back(name);
  if (!unexpected.empty())
    fail("{}: {} unexpected tensor(s) that {} ({}) does not use: {}", dir.string(), unexpected.size(),
         config.file.string(), config.arch->name, name_list(unexpected));

  if (weights.tied) weights.globals[std::size_t(Role::LmHead)].weight = weights.get(Role::Embed).weight;
  auto finish_linear = [&](RoleTensors& slot, Role role) {
    LinearShape s = linear_shape(config, role);
    slot.in_features = s.in;
    slot.out_features = s.out;
    slot.weight_in_out = slot.weight && !slot.weight->block_type && stored_in_out(*config.arch, role);
    if (slot.gptq) {
      slot.gptq->group_size = config.gptq->group_size > 0 ? config.gptq->group_size : s.in;
      if (config.gptq->format == Int4Format::Awq)
        repack_awq(*slot.gptq, s, files.repacked_);
      else
        slot.gptq->act_order = !groups_in_order(*slot.gptq);
    }
  };
  finish_linear(weights.globals[std::size_t(Role::LmHead)], Role::LmHead);
  for (auto& layer : weights.layers)
    for (int r = int(Role::Q); r < int(Role::Count); ++r)
      if (layer[std::size_t(r)].present()) finish_linear(layer[std::size_t(r)], Role(r));
  return files;
}

void check_token_id(const ModelConfig& config, int64_t id, std::string_view where) {
  if (id < 0 || id >= config.vocab_size)
    fail("token id {} ({}) is outside the vocabulary of {} (vocab_size {})", id, where, config.file.string(),
         config.vocab_size);
}

}  // namespace gerbil
