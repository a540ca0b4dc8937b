// A float64 forward pass of the sequential pre-norm decoders GGUF fixtures hold (RMSNorm, rotary, gated MLP,
// separate or fused q/k/v and gate/up), on a model's weights as ModelFiles gives them (block views dequantized
// here): the reference for files whose logits no transformers run has given (test_graph_gguf), held to
// transformers' float64 logits on the llama.cpp fixtures by test_model_gguf_llamacpp.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/weights.h"
#include "reference/model.h"
#include "reference/reference.h"

namespace gerbil::test {

namespace float64_forward_detail {

inline std::vector<double> doubles(const TensorView& view) {
  std::vector<float> values = tensor_floats(view);
  return {values.begin(), values.end()};
}

// A [T, rows] product with an optional bias: y = x W^T + b.
inline std::vector<double> linear(const std::vector<double>& x, const RoleTensors& t, size_t T) {
  size_t K = size_t(t.in_features), N = size_t(t.out_features);
  std::vector<double> bias = t.bias ? doubles(*t.bias) : std::vector<double>{};
  return reference::linear(x, doubles(*t.weight), bias, {}, T, K, N, N, 0, std::vector<double>(T * N));
}

inline std::vector<double> norm(const std::vector<double>& x, const RoleTensors& t, const ModelConfig& c, size_t T) {
  std::vector<double> w = doubles(*t.weight);
  if (c.arch->norm == NormKind::RmsNormPlusOne)
    for (double& v : w) v += 1.0;
  return reference::rmsnorm(x, w, T, w.size(), c.norm_eps);
}

// Rotate-half rotary embedding of every head's first rotary_dim dims, in place; X is [T, heads * head_dim].
inline void rotate(std::vector<double>& x, size_t T, size_t heads, const ModelConfig& c, int layer) {
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
inline std::vector<double> columns(const std::vector<double>& m, size_t T, size_t stride, size_t first, size_t count) {
  std::vector<double> out;
  for (size_t t = 0; t < T; ++t) {
    auto row = m.begin() + std::ptrdiff_t(t * stride + first);
    out.insert(out.end(), row, row + std::ptrdiff_t(count));
  }
  return out;
}

}  // namespace float64_forward_detail

// The logits [ids.size(), vocab] of the prompt `ids`; throws for architectures the pass does not cover.
inline std::vector<double> float64_forward(const ModelFiles& files, const std::vector<uint32_t>& ids) {
  using namespace float64_forward_detail;
  const ModelConfig& c = files.config();
  const ArchitectureSpec& arch = files.arch();
  const ModelWeights& w = files.weights();
  if (arch.parallel_block || arch.norm == NormKind::LayerNorm || arch.sandwich_norms() || arch.qk_norm() ||
      arch.positions != PositionKind::Rotary || !arch.gated_mlp() || c.sliding_window > 0)
    throw std::runtime_error("the float64 forward does not cover " + std::string(arch.name));
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


}  // namespace gerbil::test
