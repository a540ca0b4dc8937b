#include "kernels/vector.h"

#include "gerbil/error.h"

namespace gerbil::kernels {
namespace {

// elementwise_vec4.wgsl's OP override.
enum class Op : uint32_t { Add = 0, Mul = 1, Silu = 2, Gelu = 3 };

const char* op_name(Op op) {
  switch (op) {
    case Op::Add: return "add";
    case Op::Mul: return "mul";
    case Op::Silu: return "silu";
    case Op::Gelu: return "gelu";
  }
  return "?";
}

// Unary operations bind their input as b too: the shader never reads it, but the layout has the binding.
Dispatch elementwise(gpu::Device& device, Op op, BufferBinding a, BufferBinding b, BufferBinding output,
                     const ElementwiseParams& p) {
  auto shapes = fmt::format("op={} count={}", op_name(op), p.count);
  return prepare(device, "elementwise_vec4", shapes, {{"a", a, p.count}, {"b", b, p.count}, {"output", output, p.count}},
                 p, elementwise_vec4_grid(p), {{"OP", double(op)}});
}

}  // namespace

Grid rmsnorm_vec4_grid(const RmsNormParams& p) { return fold(p.seq_len); }

Dispatch rmsnorm_vec4(gpu::Device& device, BufferBinding input, BufferBinding weight, BufferBinding output,
                      const RmsNormParams& p) {
  if (!vec4_fits(p.hidden_size)) return rmsnorm(device, input, weight, output, p);
  auto shapes = fmt::format("T={} D={}", p.seq_len, p.hidden_size);
  uint64_t n = count_of(p.seq_len, p.hidden_size);
  return prepare(device, "rmsnorm_vec4", shapes,
                 {{"input", input, n}, {"weight", weight, p.hidden_size}, {"output", output, n}}, p,
                 rmsnorm_vec4_grid(p));
}

Grid layernorm_welford_grid(const LayerNormParams& p) { return fold(p.seq_len); }

Dispatch layernorm_welford(gpu::Device& device, BufferBinding input, BufferBinding weight, BufferBinding bias,
                           BufferBinding output, const LayerNormParams& p) {
  if (!vec4_fits(p.hidden_size)) return layernorm(device, input, weight, bias, output, p);
  auto shapes = fmt::format("T={} D={}", p.seq_len, p.hidden_size);
  // Welford's counts are f32 in the shader: exact up to 2^24 elements per row.
  if (p.hidden_size > (1u << 24)) fail("kernel 'layernorm_welford' ({}): rows over 2^24 elements", shapes);
  uint64_t n = count_of(p.seq_len, p.hidden_size);
  return prepare(device, "layernorm_welford", shapes,
                 {{"input", input, n}, {"weight", weight, p.hidden_size}, {"bias", bias, p.hidden_size},
                  {"output", output, n}},
                 p, layernorm_welford_grid(p));
}

Grid elementwise_vec4_grid(const ElementwiseParams& p) { return fold(ceil_div(p.count / 4, kWorkgroupSize)); }

Dispatch silu_vec4(gpu::Device& device, BufferBinding input, BufferBinding output, const ElementwiseParams& p) {
  if (!vec4_fits(p.count)) return silu(device, input, output, p);
  return elementwise(device, Op::Silu, input, input, output, p);
}

Dispatch gelu_vec4(gpu::Device& device, BufferBinding input, BufferBinding output, const ElementwiseParams& p) {
  if (!vec4_fits(p.count)) return gelu(device, input, output, p);
  return elementwise(device, Op::Gelu, input, input, output, p);
}

Dispatch add_vec4(gpu::Device& device, BufferBinding a, BufferBinding b, BufferBinding output,
                  const ElementwiseParams& p) {
  if (!vec4_fits(p.count)) return add(device, a, b, output, p);
  return elementwise(device, Op::Add, a, b, output, p);
}

Dispatch mul_vec4(gpu::Device& device, BufferBinding a, BufferBinding b, BufferBinding output,
                  const ElementwiseParams& p) {
  if (!vec4_fits(p.count)) return mul(device, a, b, output, p);
  return elementwise(device, Op::Mul, a, b, output, p);
}

}  // namespace gerbil::kernels
