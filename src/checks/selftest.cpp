#include "checks/selftest.h"


#include "gerbil/error.h"
#include "checks/check_support.h"
#include "kernels/seed.h"
#include "kernels/vector.h"
#include "reference/reference.h"

namespace gerbil::kernels {
namespace {

using namespace check;

// --- the checks ---------------------------------------------------------------------------------------

struct EmbeddingShape { uint32_t T, D, vocab; };
struct MatmulShape { uint32_t M, K, N; };
struct Int4Shape { uint32_t M, K, N, group; };
struct RowShape {
  uint32_t T, D;
  float offset = 0;  // LayerNorm: x drawn from [offset - 1, offset + 1] instead of [-1, 3]
};
struct RopeShape { uint32_t T, q_heads, kv_heads, head_dim; float base; uint32_t offset; };
struct AttentionShape { uint32_t T, S, q_heads, kv_heads, head_dim, offset; };

KernelCheck embedding_check(bool quick) {
  std::vector<EmbeddingShape> shapes = {{1, 64, 50}, {7, 33, 100}, {50, 896, 300}};
  if (!quick) shapes.push_back({300, 257, 1000});
  constexpr double bound = 1e-12;  // a copy: exact
  return make_check<EmbeddingShape>(
      "embedding", bound, "a gather copies f32 values exactly", shapes,
      [](auto& s) { return fmt::format("T={} D={} vocab={}", s.T, s.D, s.vocab); },
      [](gpu::Device& device, Rng& rng, const EmbeddingShape& s) {
        auto ids = random_ints(rng, s.T, s.vocab);
        auto weight = random_floats(rng, size_t(s.vocab) * s.D);
        Buffers b{device};
        auto& out = b.poisoned("output", size_t(s.T) * s.D);
        run(device, embedding(device, {&b.input("ids", ids)}, {&b.input("weight", weight)}, {&out}, {s.T, s.D}, s.vocab));
        auto ref = reference::embedding(ids, widen(weight), s.T, s.D);
        return result("embedding", fmt::format("T={} D={}", s.T, s.D), b.read(out, ref.size()), ref, bound);
      });
}

KernelCheck matmul_check(bool quick) {
  std::vector<MatmulShape> shapes = {{1, 64, 48}, {3, 17, 5}, {1, 896, 896}, {50, 96, 130}, {33, 129, 67}};
  if (!quick) shapes.push_back({64, 896, 257});
  constexpr double bound = 1e-5;
  return make_check<MatmulShape>(
      "matmul", bound, "f32 sums of K products: rounding grows like sqrt(K) * 6e-8, ~2e-6 at K=896", shapes,
      [](auto& s) { return fmt::format("M={} K={} N={}", s.M, s.K, s.N); },
      [](gpu::Device& device, Rng& rng, const MatmulShape& s) {
        auto A = random_floats(rng, size_t(s.M) * s.K), B = random_floats(rng, size_t(s.K) * s.N);
        Buffers b{device};
        auto& C = b.poisoned("C", size_t(s.M) * s.N);
        run(device, matmul(device, {&b.input("A", A)}, {&b.input("B", B)}, {&C}, {s.M, s.K, s.N}));
        auto ref = reference::matmul(widen(A), widen(B), s.M, s.K, s.N);
        return result("matmul", fmt::format("M={} K={} N={}", s.M, s.K, s.N), b.read(C, ref.size()), ref, bound);
      });
}

KernelCheck matmul_int4_check(bool quick) {
  std::vector<Int4Shape> shapes = {{1, 64, 32, 32}, {5, 48, 40, 16}, {3, 33, 17, 7}, {1, 896, 128, 128}};
  if (!quick) shapes.push_back({17, 256, 96, 32});
  constexpr double bound = 1e-5;
  return make_check<Int4Shape>(
      "matmul_int4", bound, "dequantised values are exact in f32; the K-term sums round like matmul's", shapes,
      [](auto& s) { return fmt::format("M={} K={} N={} group={}", s.M, s.K, s.N, s.group); },
      [](gpu::Device& device, Rng& rng, const Int4Shape& s) {
        size_t weights = size_t(s.K) * s.N, groups = (weights + s.group - 1) / s.group;
        auto A = random_floats(rng, size_t(s.M) * s.K);
        std::vector<uint8_t> nibbles;
        for (uint32_t v : random_ints(rng, weights, 16)) nibbles.push_back(static_cast<uint8_t>(v));
        auto packed = reference::pack_int4(nibbles);
        auto scales = random_floats(rng, groups, 0.01f, 0.1f);
        std::vector<float> zeros;
        for (uint32_t z : random_ints(rng, groups, 16)) zeros.push_back(static_cast<float>(z));
        Buffers b{device};
        auto& C = b.poisoned("C", size_t(s.M) * s.N);
        run(device, matmul_int4(device, {&b.input("A", A)}, {&b.input("B_q", packed)}, {&b.input("scales", scales)},
                                {&b.input("zeros", zeros)}, {&C}, {s.M, s.K, s.N, s.group}));
        auto ref = reference::matmul_int4(widen(A), packed, widen(scales), widen(zeros), s.M, s.K, s.N, s.group);
        return result("matmul_int4", fmt::format("M={} K={} N={} group={}", s.M, s.K, s.N, s.group),
                      b.read(C, ref.size()), ref, bound);
      });
}

std::vector<RowShape> row_shapes(bool quick) {
  std::vector<RowShape> shapes = {{1, 896}, {7, 33}, {3, 300}, {50, 1000}, {2, 64}};
  if (!quick) shapes.push_back({129, 4864});
  return shapes;
}

// Rows for the vec4 norms: D a multiple of 4 (vec4 path) or not (the seed fallback), T = 1, rows past the
// 1024 vec4s a thread keeps in registers (D = 4100), and a few vec4s only (D = 4).
std::vector<RowShape> vector_row_shapes(bool quick) {
  std::vector<RowShape> shapes = {{1, 896}, {7, 36}, {3, 300}, {5, 4100}, {1, 4099}, {2, 33}, {9, 1000}, {1, 4}};
  if (!quick) shapes.push_back({129, 4864});
  return shapes;
}

// layernorm_welford's rows add rows of 256 +- 1, far enough from zero that summing the threads' means
// unshifted loses 3.6e-5 (the seed's two passes lose 1.9e-5 there, so its check keeps the rows of 16 +- 1).
std::vector<RowShape> welford_row_shapes(bool quick) {
  std::vector<RowShape> shapes = vector_row_shapes(quick);
  shapes.push_back({4, 4096, 256.f});
  return shapes;
}

using RmsNorm = Dispatch (*)(gpu::Device&, BufferBinding, BufferBinding, BufferBinding, const RmsNormParams&);
using LayerNorm = Dispatch (*)(gpu::Device&, BufferBinding, BufferBinding, BufferBinding, BufferBinding,
                               const LayerNormParams&);

KernelCheck rmsnorm_check(bool quick, std::string kernel = "rmsnorm", RmsNorm dispatch = rmsnorm,
                          std::vector<RowShape> shapes = {}) {
  constexpr double bound = 1e-5;
  if (shapes.empty()) shapes = row_shapes(quick);
  return make_check<RowShape>(
      kernel, bound, "one f32 sum of squares per row, then a scale: a few ulp", shapes,
      [](auto& s) { return fmt::format("T={} D={}", s.T, s.D); },
      [kernel, dispatch](gpu::Device& device, Rng& rng, const RowShape& s) {
        auto x = random_floats(rng, size_t(s.T) * s.D), w = random_floats(rng, s.D, 0.5f, 1.5f);
        const float eps = 1e-6f;
        Buffers b{device};
        auto& out = b.poisoned("output", x.size());
        run(device, dispatch(device, {&b.input("x", x)}, {&b.input("w", w)}, {&out}, {s.T, s.D, float_bits(eps)}));
        auto ref = reference::rmsnorm(widen(x), widen(w), s.T, s.D, eps);
        return result(kernel, fmt::format("T={} D={}", s.T, s.D), b.read(out, ref.size()), ref, bound);
      });
}

KernelCheck layernorm_check(bool quick, std::string kernel = "layernorm", LayerNorm dispatch = layernorm,
                            std::vector<RowShape> shapes = {}) {
  constexpr double bound = 1e-5;
  if (shapes.empty()) shapes = row_shapes(quick);
  // Rows far from zero: statistics that cancel (E[x^2] - E[x]^2, or a mean summed from 0) lose the variance.
  shapes.push_back({4, 4096, 16.f});
  shapes.push_back({3, 1000, 16.f});
  auto describe = [](const RowShape& s) {
    return fmt::format("T={} D={}{}", s.T, s.D, s.offset ? fmt::format(" x in {} +- 1", s.offset) : "");
  };
  return make_check<RowShape>(
      kernel, bound,
      "f32 row statistics (mean, variance; two passes or Welford / Chan, shifted), then an affine map: a few ulp",
      shapes, describe, [kernel, dispatch, describe](gpu::Device& device, Rng& rng, const RowShape& s) {
        auto x = s.offset ? random_floats(rng, size_t(s.T) * s.D, s.offset - 1, s.offset + 1)
                          : random_floats(rng, size_t(s.T) * s.D, -1.f, 3.f);
        auto w = random_floats(rng, s.D, 0.5f, 1.5f), bias = random_floats(rng, s.D);
        const float eps = 1e-5f;
        Buffers b{device};
        auto& out = b.poisoned("output", x.size());
        run(device, dispatch(device, {&b.input("x", x)}, {&b.input("w", w)}, {&b.input("b", bias)}, {&out},
                             {s.T, s.D, float_bits(eps)}));
        auto ref = reference::layernorm(widen(x), widen(w), widen(bias), s.T, s.D, eps);
        return result(kernel, describe(s), b.read(out, ref.size()), ref, bound);
      });
}

KernelCheck rope_check(bool quick) {
  std::vector<RopeShape> shapes = {{1, 14, 2, 64, 1e6f, 0},  {5, 4, 4, 16, 1e4f, 0}, {7, 7, 1, 32, 1e4f, 37},
                                   {1, 14, 2, 64, 1e6f, 20}, {3, 2, 4, 8, 1e4f, 3},  {50, 14, 2, 64, 1e6f, 0}};
  if (!quick) shapes.push_back({200, 8, 2, 128, 5e5f, 0});
  constexpr double bound = 1e-5;
  return make_check<RopeShape>(
      "rope", bound,
      "angles pos * base^(-2i/d) are formed in f32: their absolute error grows with the position (~pos * 6e-8), "
      "so positions here stay below 256",
      shapes,
      [](auto& s) {
        return fmt::format("T={} heads={}/{} head_dim={} base={} offset={}", s.T, s.q_heads, s.kv_heads, s.head_dim,
                           s.base, s.offset);
      },
      [](gpu::Device& device, Rng& rng, const RopeShape& s) {
        auto q = random_floats(rng, size_t(s.T) * s.q_heads * s.head_dim);
        auto k = random_floats(rng, size_t(s.T) * s.kv_heads * s.head_dim);
        Buffers b{device};
        auto& qb = b.input("q", q);
        auto& kb = b.input("k", k);
        run(device, rope(device, {&qb}, {&kb}, {s.T, s.q_heads, s.kv_heads, s.head_dim, float_bits(s.base), s.offset}));
        auto ref = reference::rope(widen(q), widen(k), s.T, s.q_heads, s.kv_heads, s.head_dim, s.base, s.offset);
        // q and k checked together: concatenate both.
        auto gpu = b.read(qb, q.size());
        auto gpu_k = b.read(kb, k.size());
        gpu.insert(gpu.end(), gpu_k.begin(), gpu_k.end());
        ref.q.insert(ref.q.end(), ref.k.begin(), ref.k.end());
        return result("rope", fmt::format("T={} heads={}/{} d={} offset={}", s.T, s.q_heads, s.kv_heads, s.head_dim, s.offset),
                      gpu, ref.q, bound);
      });
}

std::string attention_shape(const AttentionShape& s) {
  return fmt::format("T={} S={} heads={}/{} head_dim={} offset={}", s.T, s.S, s.q_heads, s.kv_heads, s.head_dim,
                     s.offset);
}

KernelCheck attention_check(bool quick) {
  // GQA ratios 1, 2 and 7; prefill (offset 0) and decode / chunked prefill (offset > 0).
  std::vector<AttentionShape> shapes = {{1, 1, 2, 2, 16, 0},   {7, 7, 4, 4, 16, 0},   {9, 9, 4, 2, 32, 0},
                                        {5, 5, 7, 1, 24, 0},   {1, 20, 14, 2, 64, 19}, {3, 40, 14, 2, 64, 37},
                                        {1, 13, 7, 1, 16, 12}, {33, 33, 8, 8, 64, 0}};
  if (!quick) shapes.push_back({128, 128, 14, 2, 64, 0});
  constexpr double bound = 1e-5;
  return make_check<AttentionShape>(
      "attention", bound, "f32 dot products, exp and a weighted sum per query: a few ulp times sqrt(S)", shapes,
      attention_shape, [](gpu::Device& device, Rng& rng, const AttentionShape& s) {
        auto Q = random_floats(rng, size_t(s.T) * s.q_heads * s.head_dim);
        auto K = random_floats(rng, size_t(s.S) * s.kv_heads * s.head_dim);
        auto V = random_floats(rng, size_t(s.S) * s.kv_heads * s.head_dim);
        Buffers b{device};
        auto& out = b.poisoned("output", Q.size());
        run(device, attention(device, {&b.input("Q", Q)}, {&b.input("K", K)}, {&b.input("V", V)}, {&out},
                              {s.T, s.S, s.q_heads, s.kv_heads, s.head_dim, s.offset}));
        auto ref = reference::attention(widen(Q), widen(K), widen(V), s.T, s.S, s.q_heads, s.kv_heads, s.head_dim,
                                        s.offset);
        return result("attention", attention_shape(s), b.read(out, ref.size()), ref, bound);
      });
}

KernelCheck softmax_check(bool quick) {
  std::vector<RowShape> shapes = {{1, 5}, {7, 1000}, {3, 257}, {1, 1}};
  if (!quick) shapes.push_back({2, 151936});
  constexpr double bound = 1e-5;
  return make_check<RowShape>(
      "softmax", bound, "exp of f32 differences and one f32 row sum: a few ulp", shapes,
      [](auto& s) { return fmt::format("rows={} cols={}", s.T, s.D); },
      [](gpu::Device& device, Rng& rng, const RowShape& s) {
        auto x = random_floats(rng, size_t(s.T) * s.D, -8.f, 8.f);
        Buffers b{device};
        auto& out = b.poisoned("output", x.size());
        run(device, softmax(device, {&b.input("x", x)}, {&out}, {s.T, s.D}));
        auto ref = reference::softmax(widen(x), s.T, s.D);
        return result("softmax", fmt::format("rows={} cols={}", s.T, s.D), b.read(out, ref.size()), ref, bound);
      });
}

std::vector<uint32_t> elementwise_counts(bool quick) {
  std::vector<uint32_t> counts = {1, 255, 257, 4864 * 3 + 1, 100003};
  // Over 65535 workgroups of 256: exercises the folded (x, y) grid.
  if (!quick) counts.push_back(65535u * 256u + 1000u);
  return counts;
}

// Counts for the vec4 kernels: multiples of 4 (vec4 path, incl. a partly filled last workgroup) and not
// (the seed fallback). The folded grid is covered by the dispatch-formula tests: reaching it here would
// take over 2^26 elements.
std::vector<uint32_t> vector_counts(bool quick) {
  std::vector<uint32_t> counts = {4, 1, 1028, 257, 4864 * 3, 100004, 100003};
  if (!quick) counts.push_back(2048u * 4864u);
  return counts;
}

using Unary = Dispatch (*)(gpu::Device&, BufferBinding, BufferBinding, const ElementwiseParams&);
using UnaryRef = std::vector<double> (*)(std::span<const double>);
using Binary = Dispatch (*)(gpu::Device&, BufferBinding, BufferBinding, BufferBinding, const ElementwiseParams&);
using BinaryRef = std::vector<double> (*)(std::span<const double>, std::span<const double>);

KernelCheck unary_check(std::string kernel, Unary dispatch, UnaryRef ref_fn, double bound, std::string why,
                        std::vector<uint32_t> counts) {
  return make_check<uint32_t>(
      kernel, bound, std::move(why), std::move(counts), [](auto& n) { return fmt::format("count={}", n); },
      [kernel, dispatch, ref_fn, bound](gpu::Device& device, Rng& rng, const uint32_t& n) {
        auto x = random_floats(rng, n, -8.f, 8.f);
        if (n > 2) x[0] = -90.f, x[1] = 90.f;  // saturated tails must not produce inf/NaN
        Buffers b{device};
        auto& out = b.poisoned("output", n);
        run(device, dispatch(device, {&b.input("x", x)}, {&out}, {n}));
        auto ref = ref_fn(widen(x));
        return result(kernel, fmt::format("count={}", n), b.read(out, n), ref, bound);
      });
}

KernelCheck binary_check(std::string kernel, Binary dispatch, BinaryRef ref_fn, std::vector<uint32_t> counts) {
  constexpr double bound = 1e-7;
  return make_check<uint32_t>(
      kernel, bound, "one correctly rounded f32 operation per element", std::move(counts),
      [](auto& n) { return fmt::format("count={}", n); },
      [kernel, dispatch, ref_fn](gpu::Device& device, Rng& rng, const uint32_t& n) {
        auto a = random_floats(rng, n), c = random_floats(rng, n);
        Buffers b{device};
        auto& out = b.poisoned("output", n);
        run(device, dispatch(device, {&b.input("a", a)}, {&b.input("b", c)}, {&out}, {n}));
        auto ref = ref_fn(widen(a), widen(c));
        return result(kernel, fmt::format("count={}", n), b.read(out, n), ref, bound);
      });
}

// Vulkan lets exp(x) be off by 3 + 2|x| ulp; for |x| near 8 (and 2u near 50 in GELU) a lone element can
// be off by a few 1e-6, so one-element cases need the headroom.
constexpr const char* kExpWhy = "exp per element, which Vulkan allows 3 + 2|x| ulp of error";

}  // namespace

std::vector<KernelCheck> kernel_checks(bool quick) {
  std::vector<KernelCheck> checks = {
      embedding_check(quick),
      matmul_check(quick),
      matmul_int4_check(quick),
      rmsnorm_check(quick),
      layernorm_check(quick),
      rope_check(quick),
      attention_check(quick),
      softmax_check(quick),
      unary_check("silu", silu, reference::silu, 1e-5, kExpWhy, elementwise_counts(quick)),
      unary_check("gelu", gelu, reference::gelu_tanh, 1e-5, kExpWhy, elementwise_counts(quick)),
      binary_check("add", add, reference::add, elementwise_counts(quick)),
      binary_check("mul", mul, reference::mul, elementwise_counts(quick)),
      // The vectorised replacements (kernels/vector.h).
      rmsnorm_check(quick, "rmsnorm_vec4", rmsnorm_vec4, vector_row_shapes(quick)),
      layernorm_check(quick, "layernorm_welford", layernorm_welford, welford_row_shapes(quick)),
      unary_check("silu_vec4", silu_vec4, reference::silu, 1e-5, kExpWhy, vector_counts(quick)),
      unary_check("gelu_vec4", gelu_vec4, reference::gelu_tanh, 1e-5, kExpWhy, vector_counts(quick)),
      binary_check("add_vec4", add_vec4, reference::add, vector_counts(quick)),
      binary_check("mul_vec4", mul_vec4, reference::mul, vector_counts(quick)),
  };
  for (auto& check : model_kernel_checks(quick)) checks.push_back(std::move(check));
  return checks;
}

std::string missing_feature(const gpu::Device& device, const KernelCheck& check) {
  if (check.needs.empty()) return "";
  if (check.needs == "shader-f16") return device.features().shader_f16 ? "" : check.needs;
  fail("kernel check '{}' needs an unknown feature '{}'", check.kernel, check.needs);
}

std::vector<CaseResult> run_check(gpu::Device& device, const KernelCheck& check, uint64_t seed) {
  Rng rng(seed);
  std::vector<CaseResult> results;
  for (size_t i = 0; i < check.shapes.size(); ++i) results.push_back(check.run(device, rng, i));
  return results;
}

}  // namespace gerbil::kernels
