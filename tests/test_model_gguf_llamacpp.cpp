// GGUF files made by llama.cpp's own convert_hf_to_gguf.py and llama-quantize (tests/data/gguf/llamacpp, made
// by tools/make_gguf_fixtures.py: tiny random llama, qwen2, gemma and phi3 models in Q8_0, Q4_0, Q4_K_M and
// Q6_K), read through ModelFiles::open: matrices stay in their blocks (no f32 expansion), and a float64
// forward pass on the views, dequantized here, gives transformers' float64 logits on gguf-py's dequantized
// weights within 1e-4 relative with the same argmax at every position. That checks the block decoders against
// ggml's, the converter's Q/K permutation and Gemma's + 1 undone, and the config read from the metadata.
//
// The forward pass covers the sequential pre-norm blocks these fixtures have (RMSNorm, rotary, gated MLP,
// separate or fused q/k/v and gate/up); the GPU graph's run of the same files is test_graph_gguf's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/weights.h"
#include "reference/model.h"
#include "reference/reference.h"
#include "support/logits.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

std::filesystem::path data_dir() { return test::project_root() / "tests" / "data" / "gguf" / "llamacpp"; }

nlohmann::json references() { return nlohmann::json::parse(test::read_text(data_dir() / "references.json")); }

std::vector<double> doubles(const TensorView& view) {
  std::vector<float> values = tensor_floats(view);
  return {values.begin(), values.end()};
}

// A [T, rows] product with an optional bias: y = x W^T + b.
std::vector<double> linear(const std::vector<double>& x, const RoleTensors& t, size_t T) {
  size_t K = size_t(t.in_features), N = size_t(t.out_features);
  std::vector<double> bias = t.bias ? doubles(*t.bias) : std::vector<double>{};
  return reference::linear(x, doubles(*t.weight), bias, {}, T, K, N, N, 0, std::vector<double>(T * N));
}

std::vector<double> norm(const std::vector<double>& x, const RoleTensors& t, const ModelConfig& c, size_t T) {
  std::vector<double> w = doubles(*t.weight);
  if (c.arch->norm == NormKind::RmsNormPlusOne)
    for (double& v : w) v += 1.0;
  return reference::rmsnorm(x, w, T, w.size(), c.norm_eps);
}

// Rotate-half rotary embedding of every head's first rotary_dim dims, in place; X is [T, heads * head_dim].
void rotate(std::vector<double>& x, size_t T, size_t heads, const ModelConfig& c, int layer) {
  std::vector<float> inv_freq = rope_inv_freq(c, layer);
  size_t D = size_t(c.head_dim), half = size_t(c.rotary_dim) / 2;
  for (size_t t = 0; t < T; ++t)
    for (size_t h = 0; h < heads; ++h) {
      double* head = &x[(t * heads + h) * D];
      for (size_t i = 0; i < half; ++i) {
        double angle = double(t) * double(inv_freq[i]), a = head[i], b = head[i + half];
        head[i] = a * std::cos(angle) - b * std::sin(angle);
        head[i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
}

// Columns [first, first + count) of the [T, stride] matrix M.
std::vector<double> columns(const std::vector<double>& m, size_t T, size_t stride, size_t first, size_t count) {
  std::vector<double> out;
  for (size_t t = 0; t < T; ++t) out.insert(out.end(), &m[t * stride + first], &m[t * stride + first + count]);
  return out;
}

std::vector<double> forward(const ModelFiles& files, const std::vector<uint32_t>& ids) {
  const ModelConfig& c = files.config();
  const ArchitectureSpec& arch = files.arch();
  const ModelWeights& w = files.weights();
  if (arch.parallel_block || arch.norm == NormKind::LayerNorm || arch.sandwich_norms() || arch.qk_norm() ||
      arch.positions != PositionKind::Rotary || !arch.gated_mlp() || c.sliding_window > 0)
    throw std::runtime_error("the float64 forward of this test does not cover " + std::string(arch.name));
  const size_t T = ids.size(), H = size_t(c.hidden_size), I = size_t(c.intermediate_size);
  const size_t q_dim = size_t(c.num_heads * c.head_dim), kv_dim = size_t(c.num_kv_heads * c.head_dim);
  std::vector<double> x = reference::embedding(ids, doubles(*w.get(Role::Embed).weight), T, H);
  if (arch.embed_scale_sqrt_hidden)
    for (double& v : x) v *= std::sqrt(double(H));
  for (int layer = 0; layer < c.num_layers; ++layer) {
    std::vector<double> h = norm(x, w.get(layer, Role::AttnNorm), c, T);
    std::vector<double> q, k, v;
    if (arch.has(Role::Qkv)) {
      std::vector<double> qkv = linear(h, w.get(layer, Role::Qkv), T);
      size_t stride = q_dim + 2 * kv_dim;
      q = columns(qkv, T, stride, 0, q_dim);
      k = columns(qkv, T, stride, q_dim, kv_dim);
      v = columns(qkv, T, stride, q_dim + kv_dim, kv_dim);
    } else {
      q = linear(h, w.get(layer, Role::Q), T);
      k = linear(h, w.get(layer, Role::K), T);
      v = linear(h, w.get(layer, Role::V), T);
    }
    rotate(q, T, size_t(c.num_heads), c, layer);
    rotate(k, T, size_t(c.num_kv_heads), c, layer);
    std::vector<double> attention = reference::attention(q, k, v, T, T, size_t(c.num_heads),
                                                         size_t(c.num_kv_heads), size_t(c.head_dim), 0);
    x = reference::add(x, linear(attention, w.get(layer, Role::O), T));
    h = norm(x, w.get(layer, Role::MlpNorm), c, T);
    std::vector<double> gate_up(T * 2 * I);
    if (arch.has(Role::GateUp)) {
      gate_up = linear(h, w.get(layer, Role::GateUp), T);
    } else {
      std::vector<double> gate = linear(h, w.get(layer, Role::Gate), T), up = linear(h, w.get(layer, Role::Up), T);
      for (size_t t = 0; t < T; ++t) {
        std::copy_n(&gate[t * I], I, &gate_up[t * 2 * I]);
        std::copy_n(&up[t * I], I, &gate_up[t * 2 * I + I]);
      }
    }
    auto act = c.activation == Activation::SiLU ? reference::Activation::Silu : reference::Activation::GeluTanh;
    x = reference::add(x, linear(reference::gated_act(gate_up, T, I, act), w.get(layer, Role::Down), T));
  }
  return linear(norm(x, w.get(Role::FinalNorm), c, T), w.get(Role::LmHead), T);
}

class LlamaCppFixture : public ::testing::TestWithParam<std::string> {
 protected:
  nlohmann::json fixture() const {
    nlohmann::json all = references();
    for (const nlohmann::json& f : all["fixtures"])
      if (f["file"] == GetParam() + ".gguf") return f;
    throw std::runtime_error(GetParam() + " is not in references.json");
  }
};

// Matrices are block views of the file (or float views), never expanded: as many block views as the file
// has quantized matrices, each of the file's type.
TEST_P(LlamaCppFixture, MatricesStayInTheirBlocks) {
  std::filesystem::path path = data_dir() / (GetParam() + ".gguf");
  ModelFiles files = ModelFiles::open(path);
  Gguf gguf = Gguf::open(path);
  std::map<std::string, int> file_types, view_types;
  for (const GgufTensor& t : gguf.tensors())
    if (t.dims.size() == 2 && t.type != GgmlType::F32) ++file_types[std::string(ggml_type_name(t.type))];
  for (const auto& [name, view] : files.tensors().tensors())
    if (view.block_type) ++view_types[std::string(ggml_type_name(*view.block_type))];
  EXPECT_EQ(view_types, file_types);
  EXPECT_FALSE(file_types.empty());
  const TensorView& embed = *files.weights().get(Role::Embed).weight;
  ASSERT_TRUE(embed.block_type.has_value());
  EXPECT_EQ(embed.shape, (std::vector<int64_t>{files.config().vocab_size, files.config().hidden_size}));
  EXPECT_EQ(embed.bytes.size(), uint64_t(embed.shape[0]) * ggml_byte_size(*embed.block_type, uint64_t(embed.shape[1])));
  // The file's own bytes, as they are.
  std::span<const std::byte> stored = gguf.find_tensor("token_embd.weight")->bytes;
  ASSERT_EQ(embed.bytes.size(), stored.size());
  EXPECT_EQ(std::memcmp(embed.bytes.data(), stored.data(), stored.size()), 0);
}

TEST_P(LlamaCppFixture, Float64ForwardMatchesTransformers) {
  nlohmann::json f = fixture();
  ModelFiles files = ModelFiles::open(data_dir() / f["file"].get<std::string>());
  EXPECT_EQ(files.arch().name, f["hf_architecture"].get<std::string>());
  const size_t vocab = size_t(files.config().vocab_size);
  std::vector<float> want = test::read_f32(data_dir() / f["logits"].get<std::string>());
  size_t row = 0;
  for (const nlohmann::json& prompt : f["prompt_ids"]) {
    std::vector<uint32_t> ids = prompt.get<std::vector<uint32_t>>();
    std::vector<double> logits = forward(files, ids);
    ASSERT_LE((row + ids.size()) * vocab, want.size());
    for (size_t t = 0; t < ids.size(); ++t, ++row) {
      std::vector<float> got(logits.begin() + std::ptrdiff_t(t * vocab), logits.begin() + std::ptrdiff_t((t + 1) * vocab));
      std::span<const float> expected(want.data() + row * vocab, vocab);
      EXPECT_LT(test::relative_error(got, expected), 1e-4) << GetParam() << " row " << row;
      EXPECT_EQ(test::argmax(got), test::argmax(expected)) << GetParam() << " row " << row;
    }
  }
  EXPECT_EQ(row * vocab, want.size());
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaCppFixture,
                         ::testing::Values("llama-Q8_0", "llama-Q4_0", "llama-Q4_K_M", "llama-Q6_K", "qwen2-Q4_K_M",
                                           "gemma-Q4_K_M", "phi3-Q4_K_M"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace gerbil
