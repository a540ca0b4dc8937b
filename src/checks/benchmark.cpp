#include "checks/benchmark.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <numeric>
#include <span>
#include <tuple>

#include "gerbil/error.h"
#include "kernels/model.h"
#include "kernels/seed.h"
#include "kernels/vector.h"

namespace gerbil::kernels {

void record_timed(gpu::GpuTimer& timer, gpu::Recorder& recorder, const Dispatch& dispatch) {
  timer.dispatch(recorder, *dispatch.pipeline, dispatch.bind_group, dispatch.grid, dispatch.kernel);
}

namespace bench {
namespace {

// Qwen2.5-0.5B, the reference's example model.
constexpr uint32_t kHidden = 896, kHeads = 14, kKvHeads = 2, kHeadDim = 64, kIntermediate = 4864;
constexpr uint32_t kVocab = 151936;
// Llama-3-8B: hidden 4096, 32 / 8 heads of 128 (q|k|v 6144 wide), intermediate 14336, vocabulary 128256.
constexpr uint32_t kLlamaHidden = 4096, kLlamaIntermediate = 14336, kLlamaVocab = 128256;
constexpr float kRopeBase = 1e6f;  // rope_theta
constexpr uint32_t kGroupSize = 128;  // int4 quantization group (GPTQ's usual)

// ---- timing ------------------------------------------------------------------------------------------

struct Settings {
  uint32_t warmup;          // iterations run untimed, after the first one (and the one estimating the cost)
  uint32_t iterations;      // timed iterations at most
  uint32_t min_iterations;  // ... and at least, however slow the case
  double budget_s;          // time to spend on the timed iterations of one case; 0: exactly `iterations`
  double settle_s = 0;      // warm-up goes on until the timings are steady, for at most this long
};

Settings settings_for(const Options& options) {
  constexpr double kSettle = 3.0;
  if (options.iterations)
    return {options.quick ? 2u : 10u, options.iterations, options.iterations, 0, options.quick ? 0 : kSettle};
  return options.quick ? Settings{2, 10, 1, 0.1} : Settings{10000, 100, 3, 1.0, kSettle};
}

struct Measurement {
  uint32_t iterations = 0;
  double median_ms = 0, mean_ms = 0, min_ms = 0;
};

// The reference's host method: record and submit `n` iterations one submit each, wait for the queue;
// returns the mean seconds per iteration.
double host_seconds(gpu::Device& device, gpu::Recorder& recorder, std::span<const Dispatch> dispatches,
                    uint32_t n) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  for (uint32_t i = 0; i < n; ++i) {
    for (const Dispatch& dispatch : dispatches) dispatch.record(recorder);
    recorder.submit();
  }
  device.wait_idle();
  return std::chrono::duration<double>(Clock::now() - start).count() / std::max(n, 1u);
}

// GPU milliseconds of each of `n` iterations: every dispatch in its own timestamped pass, the dispatches
// of one iteration added up. Iterations go in rounds that fill one timer.
std::vector<double> timestamp_ms(gpu::Device& device, gpu::Recorder& recorder,
                                 std::span<const Dispatch> dispatches, uint32_t n) {
  constexpr uint32_t kMaxTimed = 2048;  // GpuTimer's capacity limit
  if (dispatches.size() > kMaxTimed) fail("benchmark case has {} dispatches, over {}", dispatches.size(), kMaxTimed);
  uint32_t per_round = std::min<uint32_t>(n, kMaxTimed / dispatches.size());
  gpu::GpuTimer timer(device, per_round * dispatches.size());
  std::vector<double> ms;
  while (ms.size() < n) {
    uint32_t round = std::min<uint32_t>(n - ms.size(), per_round);
    for (uint32_t i = 0; i < round; ++i)
      for (const Dispatch& dispatch : dispatches) record_timed(timer, recorder, dispatch);
    auto timings = timer.collect(recorder);  // submits the recorder
    for (uint32_t i = 0; i < round; ++i) {
      double ns = 0;
      for (size_t d = 0; d < dispatches.size(); ++d) ns += timings[i * dispatches.size() + d].ns;
      ms.push_back(ns / 1e6);
    }
  }
  return ms;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// Runs the case in rounds of about 20 ms until two rounds in a row take the same time per iteration
// (within 2 %), or for at most `max_s`: a GPU still raising its clocks times slower round after round.
// GPU timestamps judge it where the adapter has them: the host's time per iteration of a 10 us kernel is
// its submit overhead, steady whatever the GPU does. (It does not catch a slowdown that is steady: on an
// H200 the cases of the first second or two after a shape's buffers are written read up to 2x slow at a
// steady rate, run 21: Llama's gate_up product 0.13-0.14 ms in the first rows of its shape, 0.063 ms
// later. docs/PERFORMANCE.md names the rows affected.)
void settle(gpu::Device& device, gpu::Recorder& recorder, std::span<const Dispatch> dispatches, double estimate_s,
            bool timestamps, double max_s) {
  constexpr double kRound = 0.02, kSteady = 0.02;
  auto round = static_cast<uint32_t>(std::clamp(kRound / std::max(estimate_s, 1e-9), 1.0, 1000.0));
  double previous = 0, spent = 0;
  while (spent < max_s) {
    double per_iteration = timestamps ? median(timestamp_ms(device, recorder, dispatches, round)) / 1e3
                                      : host_seconds(device, recorder, dispatches, round);
    spent += std::max(per_iteration, estimate_s) * round;
    if (previous > 0 && std::abs(per_iteration - previous) <= kSteady * per_iteration) return;
    previous = per_iteration;
  }
}

Measurement measure(gpu::Device& device, std::span<const Dispatch> dispatches, const Settings& settings,
                    bool timestamps) {
  gpu::Recorder recorder(device, "bench");
  double first = host_seconds(device, recorder, dispatches, 1);  // some drivers compile pipelines only now
  // A first run slower than the budget (or than the longest settling) serves as the estimate; for the others a
  // second run, past any compilation, estimates the cost of one iteration.
  double slow = std::max(settings.budget_s, settings.settle_s);
  double estimate = std::max(first >= slow ? first : host_seconds(device, recorder, dispatches, 1), 1e-9);
  uint32_t warmup = settings.warmup, n = settings.iterations;
  if (settings.budget_s > 0) {
    auto fitting = [&](double seconds) { return static_cast<uint32_t>(std::min(seconds / estimate, 1e9)); };
    // Up to a fifth of the budget is warm-up (at most settings.warmup iterations); settle() may add more.
    warmup = std::min(fitting(0.2 * settings.budget_s), settings.warmup);
    n = std::clamp(fitting(settings.budget_s), settings.min_iterations, settings.iterations);
  }
  if (warmup) host_seconds(device, recorder, dispatches, warmup);
  if (first < settings.settle_s) settle(device, recorder, dispatches, estimate, timestamps, settings.settle_s);
  if (!timestamps) {
    double ms = host_seconds(device, recorder, dispatches, n) * 1e3;
    return {n, ms, ms, ms};
  }
  std::vector<double> ms = timestamp_ms(device, recorder, dispatches, n);
  return {n, median(ms), std::accumulate(ms.begin(), ms.end(), 0.0) / n, *std::min_element(ms.begin(), ms.end())};
}

// ---- inputs ------------------------------------------------------------------------------------------

uint64_t binding_limit(const gpu::Device& device) {
  return std::min<uint64_t>(device.limits().maxStorageBufferBindingSize, device.limits().maxBufferSize);
}

// The buffers of the benchmark cases of one shape: inputs filled with valid pseudo-random data (finite
// numbers, indices in range), outputs zeroed by WebGPU. They live as long as the workspace, so a case
// allocates once and its dispatches run any number of times. A buffer asked for again (same label, kind and
// size) is the one made before: the seed and its variants read the same memory, which matters on an H200,
// where re-allocating hundreds of MB per case made later variants of a shape measure up to 2x slower.
class Workspace {
 public:
  // `cold`: decode cases read their weights from memory, not from a cache (see linear_case); off for --quick,
  // whose cases must take seconds on a CPU adapter.
  Workspace(gpu::Device& device, uint64_t seed, bool cold) : device_(device), state_(seed), cold_(cold) {}
  gpu::Device& device() { return device_; }
  bool cold() const { return cold_; }

  // Uniform f32 in [lo, hi).
  const gpu::Buffer& floats(std::string label, uint64_t n, float lo = -1.f, float hi = 1.f) {
    return fill(std::move(label), fmt::format("f32 {} {}", lo, hi), n,
                [&] { return std::bit_cast<uint32_t>(lo + (hi - lo) * unit()); });
  }
  // `rows` rows of `cols` weights of `type` in [-1, 1), packed as in a safetensors file; 16-bit ones are normal
  // numbers of magnitude at least 2^-10.
  // Block types: random words in pack_rows()'s layout, each row padded as it pads them (`cols` a whole number of
  // blocks; some scales come out NaN or infinite, which costs a GPU no time).
  const gpu::Buffer& weights(std::string label, uint64_t rows, uint64_t cols, WeightType type) {
    uint64_t n = rows * cols;
    if (type == WeightType::F32) return floats(std::move(label), n);
    if (is_block_type(type)) return words(std::move(label), rows * weight_row_bytes(type, cols) / 4);
    auto half = [&] {
      uint32_t r = next();
      uint32_t sign = (r >> 31) << 15;
      if (type == WeightType::F16) return sign | (5 + r % 10) << 10 | (r >> 8 & 0x3FF);  // exponent bias 15
      return sign | (117 + r % 10) << 7 | (r >> 8 & 0x7F);                            // bf16: bias 127
    };
    return fill(std::move(label), type == WeightType::F16 ? "f16" : "bf16", (n + 1) / 2,
                [&] { return half() | half() << 16; });
  }
  // Random u32 words (packed int4 nibbles).
  const gpu::Buffer& words(std::string label, uint64_t n) {
    return fill(std::move(label), "u32", n, [&] { return next(); });
  }
  // Random indices below `bound` (token ids).
  const gpu::Buffer& indices(std::string label, uint64_t n, uint32_t bound) {
    return fill(std::move(label), fmt::format("index {}", bound), n, [&] { return next() % bound; });
  }
  template <typename T>
  const gpu::Buffer& values(std::string label, const std::vector<T>& values) {
    buffers_.push_back(device_.upload(std::move(label), std::span<const T>(values)));
    return buffers_.back();
  }
  // The block table of a sequence of `tokens` tokens in a pool of just its blocks, in order (as the first sequence
  // of a model takes them), and the pool's rows.
  kernels::KvBlocks contiguous_blocks(uint64_t tokens) {
    std::vector<uint32_t> table(ceil_div(tokens, kernels::kKvBlockTokens));
    for (uint32_t i = 0; i < table.size(); ++i) table[i] = i;
    return {{&values("kv_table", table)}, uint32_t(table.size())};
  }
  // A copy of `source` made on the GPU (many copies of large weights, without generating them on the host).
  // Keyed by the source buffer itself: f16 and bf16 weights of one shape share label and size.
  const gpu::Buffer& copy_of(const gpu::Buffer& source, std::string label) {
    Key key{label, fmt::format("copy of {}", static_cast<const void*>(&source)), source.size()};
    if (auto found = made_.find(key); found != made_.end()) return *found->second;
    gpu::Buffer buffer = device_.create_buffer(std::move(label), source.size());
    gpu::Recorder recorder(device_, "copy");
    recorder.copy(source, 0, buffer, 0, source.padded_size());
    recorder.submit();
    buffers_.push_back(std::move(buffer));
    return *(made_[key] = &buffers_.back());
  }
  const gpu::Buffer& output(std::string label, uint64_t n) {
    Key key{label, "output", n};
    if (auto found = made_.find(key); found != made_.end()) return *found->second;
    buffers_.push_back(device_.create_buffer(std::move(label), 4 * n));
    return *(made_[key] = &buffers_.back());
  }

 private:
  uint32_t next() {  // splitmix64: fast enough for the LM head's hundreds of MB
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
  }
  float unit() { return static_cast<float>(next() >> 8) * 0x1p-24f; }

  // Uploads `n` words from `generate` in chunks, so a large buffer never has a full copy on the host.
  template <typename Generate>
  const gpu::Buffer& fill(std::string label, std::string kind, uint64_t n, Generate&& generate) {
    Key key{label, std::move(kind), n};
    if (auto found = made_.find(key); found != made_.end()) return *found->second;
    constexpr uint64_t kChunk = 1 << 22;
    gpu::Buffer buffer = device_.create_buffer(std::move(label), 4 * n);
    std::vector<uint32_t> chunk;
    for (uint64_t start = 0; start < n; start += kChunk) {
      chunk.resize(std::min(kChunk, n - start));
      for (uint32_t& word : chunk) word = generate();
      device_.write(buffer, std::span<const uint32_t>(chunk), 4 * start);
    }
    buffers_.push_back(std::move(buffer));
    return *(made_[key] = &buffers_.back());
  }

  using Key = std::tuple<std::string, std::string, uint64_t>;  // label, kind of contents, words (copies: bytes)
  gpu::Device& device_;
  uint64_t state_;
  bool cold_;
  std::deque<gpu::Buffer> buffers_;  // a deque: references stay valid as buffers are added
  std::map<Key, const gpu::Buffer*> made_;
};

BufferBinding whole(const gpu::Buffer& buffer) { return {&buffer}; }

// ---- cases -------------------------------------------------------------------------------------------

struct Shape {
  std::string name;
  uint32_t T = 1;  // tokens; M of a matmul
  uint32_t K = 0, N = 0;
  uint32_t S = 0;  // keys of attention
  bool quick = true;  // also run with --quick
  uint32_t width = 0;  // token shapes: elements per token (a hidden or intermediate size)
};

// One iteration of a kernel at one shape, and the work it does.
struct Case {
  std::string variant, note;
  std::string skipped;  // set (and no dispatches) when the case does not apply on this adapter or shape
  std::vector<Dispatch> dispatches;
  Metric metric = Metric::Gflops;
  double flops = 0, bytes = 0;
  uint32_t repeats = 1;  // the dispatches do the case's work this many times (the time is divided by it)
};

using Builder = std::function<Case(Workspace&, const Shape&)>;

const char* type_name(WeightType type) { return weight_type_name(type); }

// Column blocks [n0, n0 + count) of an N-column weight such that each block (bytes_per_column per column)
// fits one storage binding; counts are multiples of `multiple`. One block wherever the adapter allows.
std::vector<std::pair<uint32_t, uint32_t>> column_blocks(const gpu::Device& device, uint32_t N,
                                                         uint64_t bytes_per_column, uint32_t multiple) {
  uint64_t fit = binding_limit(device) / bytes_per_column / multiple * multiple;
  if (fit == 0) fail("benchmark: one weight column of {} bytes exceeds the storage binding limit", bytes_per_column);
  std::vector<std::pair<uint32_t, uint32_t>> blocks;
  for (uint64_t n0 = 0; n0 < N; n0 += fit) blocks.emplace_back(n0, std::min<uint64_t>(fit, N - n0));
  return blocks;
}

std::string split_note(const gpu::Device& device, size_t blocks) {
  if (blocks == 1) return "";
  return fmt::format("weight in {} column blocks, a dispatch each ({} MiB binding limit)", blocks,
                     binding_limit(device) >> 20);
}

Case matmul_like(const Shape& s, double weight_bytes) {
  Case c;
  c.flops = 2.0 * s.T * s.K * s.N;
  c.bytes = 4.0 * s.T * s.K + weight_bytes + 4.0 * s.T * s.N;
  return c;
}

Case seed_matmul(Workspace& w, const Shape& s) {
  Case c = matmul_like(s, 4.0 * s.K * s.N);
  const gpu::Buffer& A = w.floats("A", uint64_t(s.T) * s.K);
  auto blocks = column_blocks(w.device(), s.N, 4ull * s.K, 1);
  for (auto [n0, count] : blocks) {
    const gpu::Buffer& B = w.floats("B", uint64_t(s.K) * count);
    const gpu::Buffer& C = w.output("C", uint64_t(s.T) * count);
    c.dispatches.push_back(matmul(w.device(), whole(A), whole(B), whole(C), {s.T, s.K, count}));
  }
  c.note = split_note(w.device(), blocks.size());
  return c;
}

// What a linear case adds to the bare product: the subgroup decode variant's fusions, or for prompts the work
// shared out over workgroups (benchmarks time each beside the bare one).
struct LinearExtras {
  uint32_t norm = 0;      // an RMSNorm of x: kNormWeighted, or kNormPrepared (x arrives as x * weight)
  bool norm_out = false;  // the next norm's x * weight written beside the output
  uint32_t gate_act = 0;  // act(gate) * up over the N rows as gate|up halves (1 SiLU)
  bool split_k = false;   // linear_split_k: the work shared out where whole tiles leave SMs idle
  uint32_t workers = 0;   // split_k: over this many workgroups (0: the dispatcher's choice)
  Arithmetic arithmetic = Arithmetic::F32;  // split_k: the prompt kernel's arithmetic
};

// Decoding (one sequence or a batch's few rows) reads each weight once per step, from memory: a product small enough to stay in the L2 cache
// between iterations (Llama's o, 34 MB, against an H200's 50 MB) would measure the cache. So a decode case
// in a cold workspace reads copies of its weights in turn, kColdBytes in all; this is how many (1: none).
uint32_t decode_copies(const Workspace& w, const Shape& s, uint64_t weight_bytes, size_t blocks) {
  constexpr uint64_t kColdBytes = 256ull << 20;
  constexpr uint64_t kMaxCopies = 64;
  if (!w.cold() || s.T > kLinearRowsMax || blocks > 1) return 1;
  return uint32_t(std::clamp<uint64_t>(ceil_div(kColdBytes, weight_bytes), 1, kMaxCopies));
}

// `blocking`: the subgroup decode variant's (zeros: the dispatcher's choice).
Builder linear_case(WeightType type, MatvecBlocking blocking = {}, LinearExtras extras = {}) {
  return [type, blocking, extras](Workspace& w, const Shape& s) {
    if (is_block_type(type) && s.K % block_layout(type).elements != 0) {
      Case c = matmul_like(s, 0);
      c.variant = type_name(type);
      c.skipped = fmt::format("K is not whole blocks of {}", block_layout(type).elements);
      return c;
    }
    uint64_t row_bytes = weight_row_bytes(type, s.K);
    Case c = matmul_like(s, double(row_bytes) * s.N);
    bool fused = extras.norm || extras.gate_act || extras.norm_out;
    // linear() runs linear_rows.wgsl where it takes the product (with a gate, never with a norm).
    LinearParams shape{s.T, s.K, s.N, s.N, 0, 0, 0, extras.gate_act, extras.norm, 0, 0, extras.norm_out};
    bool rows = use_linear_rows(w.device(), shape, type);
    c.variant = fmt::format("{} {}", type_name(type), rows ? "rows" : s.T <= kMatvecRows ? "matvec" : "tiled");
    if (blocking.columns) c.variant += fmt::format(" c{}", blocking.columns);
    if (blocking.split) c.variant += fmt::format(" s{}", blocking.split);
    if (blocking.unroll) c.variant += fmt::format(" u{}", blocking.unroll);
    if (blocking.workgroups) c.variant += fmt::format(" w{}", blocking.workgroups);
    if (extras.norm) c.variant += extras.norm == kNormPrepared ? " prepared" : " norm";
    if (extras.norm_out) c.variant += " norm_out";
    if (extras.gate_act) c.variant += " gated";
    if (extras.split_k) c.variant += extras.workers ? fmt::format(" split{}", extras.workers) : " split";
    if (extras.arithmetic == Arithmetic::F16) c.variant += " f16-arith";
    if (extras.arithmetic == Arithmetic::F16 && !w.device().features().shader_f16) {
      c.skipped = "f16 arithmetic needs shader-f16";
      return c;
    }
    if (fused && !rows && !linear_can_fuse(w.device(), s.T, s.K, type)) {
      c.skipped = "fusions need the subgroup decode variant";
      return c;
    }
    const gpu::Buffer& x = w.floats("x", uint64_t(s.T) * s.K);
    const gpu::Buffer& out = w.output("out", uint64_t(s.T) * s.N);
    const gpu::Buffer& norm_weight = w.floats("norm_weight", std::max(s.K, s.N), 0.5f, 1.5f);
    LinearNorm norm;
    if (extras.norm == kNormWeighted || extras.norm_out) norm.weight = whole(norm_weight);
    if (extras.norm == kNormPrepared) norm.raw_x = whole(w.floats("raw x", uint64_t(s.T) * s.K));
    if (extras.norm_out) norm.prepared = whole(w.output("prepared", uint64_t(s.T) * s.N));
    auto blocks = column_blocks(w.device(), s.N, row_bytes, 2);
    if (extras.gate_act && blocks.size() > 1) {
      c.skipped = "a gated product needs its gate and up rows in one binding";
      return c;
    }
    // The weight of each dispatch: its column blocks, and for decoding copies of it read in turn.
    struct Weight {
      const gpu::Buffer* buffer;
      uint32_t n0, count;
    };
    std::vector<Weight> weights;
    for (auto [n0, count] : blocks) weights.push_back({&w.weights("W", count, s.K, type), n0, count});
    c.repeats = decode_copies(w, s, row_bytes * s.N, blocks.size());
    for (uint32_t copy = 1; copy < c.repeats; ++copy)
      weights.push_back({&w.copy_of(*weights[0].buffer, fmt::format("W#{}", copy)), 0, s.N});
    std::vector<std::string> shares;  // split_k: how each block's work was shared out (copies share alike)
    for (size_t i = 0; i < weights.size(); ++i) {
      auto [buffer, n0, count] = weights[i];
      const gpu::Buffer& W = *buffer;
      // x stands in for the unused bias and residual.
      LinearParams p{s.T, s.K, count, extras.gate_act ? s.N / 2 : s.N, n0, 0, 0, extras.gate_act, extras.norm, 0, 0,
                     extras.norm_out};
      if (extras.split_k) {
        const gpu::Buffer& scratch =
            w.output("partials", std::max<uint64_t>(1, linear_split_scratch_floats(w.device(), p, extras.workers)));
        for (Dispatch& d : linear_split_k(w.device(), whole(x), whole(W), whole(x), whole(x), whole(out), p, type,
                                          whole(scratch), extras.workers, extras.arithmetic))
          c.dispatches.push_back(std::move(d));
        bool this_rows = use_linear_rows(w.device(), p, type);  // this block's product
        uint32_t workers = this_rows ? 0 : linear_split_workers(w.device(), p, extras.workers);
        if (i < blocks.size())
          shares.push_back(workers ? fmt::format("{} workers", workers) : this_rows ? "rows" : "whole tiles");
      } else {
        c.dispatches.push_back(linear(w.device(), whole(x), whole(W), whole(x), whole(x), whole(out), p, type, norm,
                                      blocking));
      }
    }
    std::vector<std::string> notes;
    if (extras.split_k) notes.push_back(fmt::format("{}", fmt::join(shares, "/")));
    if (blocks.size() > 1) notes.push_back(split_note(w.device(), blocks.size()));
    if (c.repeats > 1) notes.push_back(fmt::format("{} weight copies read in turn", c.repeats));
    c.note = fmt::format("{}", fmt::join(notes, ", "));
    return c;
  };
}

Case seed_matmul_int4(Workspace& w, const Shape& s) {
  double groups = double(s.K) * s.N / kGroupSize;
  Case c = matmul_like(s, s.K * double(s.N) / 2 + 8 * groups);
  const gpu::Buffer& A = w.floats("A", uint64_t(s.T) * s.K);
  auto blocks = column_blocks(w.device(), s.N, s.K / 2, 8);
  for (auto [n0, count] : blocks) {
    uint64_t weights = uint64_t(s.K) * count;
    const gpu::Buffer& B_q = w.words("B_q", weights / 8);
    const gpu::Buffer& scales = w.floats("scales", weights / kGroupSize, 0.001f, 0.01f);
    const gpu::Buffer& zeros = w.floats("zeros", weights / kGroupSize, 7.f, 9.f);
    const gpu::Buffer& C = w.output("C", uint64_t(s.T) * count);
    c.dispatches.push_back(matmul_int4(w.device(), whole(A), whole(B_q), whole(scales), whole(zeros), whole(C),
                                       {s.T, s.K, count, kGroupSize}));
  }
  c.note = split_note(w.device(), blocks.size());
  return c;
}

// Queries t = 0..T-1 at positions S - T + t over S cached keys (decode: T = 1; prefill: T = S), the cache of type
// kv (the seed kernel reads f32).
struct AttentionInputs {
  const gpu::Buffer *Q, *K, *V, *out;
};

// A KV pool of `elements` elements of type kv: f32 and f16 numbers below 1 in magnitude; q8 random words, the row
// scales after the data included (some come out NaN or infinite, which costs a GPU no time).
const gpu::Buffer& cache_pool(Workspace& w, std::string label, uint64_t elements, KvType kv) {
  if (kv == KvType::F16) return w.weights(std::move(label), 1, elements, WeightType::F16);
  if (kv == KvType::Q8) return w.words(std::move(label), kv_pool_bytes(kv, elements, kHeadDim) / 4);
  return w.floats(std::move(label), elements);
}

AttentionInputs attention_inputs(Workspace& w, const Shape& s, Case& c, KvType kv = KvType::F32) {
  uint64_t q = uint64_t(s.T) * kHeads * kHeadDim, keys = uint64_t(s.S) * kKvHeads * kHeadDim;
  c.flops = 2.0 * s.T * s.S * kHeadDim * kHeads;  // the reference's formula (counts Q K^T only)
  c.bytes = 4.0 * 2 * q + 2.0 * kv_pool_bytes(kv, keys, kHeadDim);
  // flash_attention's K and V are pools of whole blocks (the seed kernel reads their first S rows).
  uint64_t pool = ceil_div(s.S, kKvBlockTokens) * kKvBlockTokens * kKvHeads * kHeadDim;
  return {&w.floats("Q", q), &cache_pool(w, "K", pool, kv), &cache_pool(w, "V", pool, kv), &w.output("out", q)};
}

Case seed_attention(Workspace& w, const Shape& s) {
  Case c;
  auto in = attention_inputs(w, s, c);
  c.dispatches.push_back(attention(w.device(), whole(*in.Q), whole(*in.K), whole(*in.V), whole(*in.out),
                                   {s.T, s.S, kHeads, kKvHeads, kHeadDim, s.S - s.T}));
  return c;
}

// flash_attention over a KV cache of type kv (the variant's name), as a model step over a full cache of S keys runs
// it: split-KV where the graph would take it.
Builder flash_case(KvType kv) {
  return [kv](Workspace& w, const Shape& s) {
    Case c;
    c.variant = fmt::format("{} cache", kv_type_name(kv));
    auto in = attention_inputs(w, s, c, kv);
    FlashAttentionParams p{s.T, s.S, kHeads, kKvHeads, kHeadDim, s.S - s.T, 0, float_bits(1 / std::sqrt(float(kHeadDim)))};
    const gpu::Buffer& scratch = w.output("partials", flash_attention_scratch_bytes(w.device(), p, s.S) / 4);
    KvBlocks blocks = w.contiguous_blocks(s.S);
    auto dispatches = flash_attention(w.device(), whole(*in.Q), whole(*in.K), whole(*in.V), whole(*in.out), blocks, p,
                                      whole(scratch), s.S, kv);
    if (dispatches.size() > 1 && !flash_attention_split_serves(p, s.S)) {
      dispatches.clear();
      dispatches.push_back(
          flash_attention(w.device(), whole(*in.Q), whole(*in.K), whole(*in.V), whole(*in.out), blocks, p, kv));
    }
    c.dispatches = std::move(dispatches);
    return c;
  };
}

// The embedding table rows one binding holds: all of the vocabulary where the adapter allows, else the
// first rows (the gather's cost depends on the rows read, not on the table's size).
uint32_t table_rows(Workspace& w, Case& c, uint64_t row_bytes) {
  uint32_t rows = std::min<uint64_t>(kVocab, binding_limit(w.device()) / row_bytes);
  if (rows < kVocab)
    c.note = fmt::format("ids drawn from the first {} rows ({} MiB binding limit)", rows,
                         binding_limit(w.device()) >> 20);
  return rows;
}

Case seed_embedding(Workspace& w, const Shape& s) {
  Case c;
  c.metric = Metric::Gbps;
  c.bytes = 4.0 * s.T * s.width;  // the reference's formula (counts the rows once)
  uint32_t rows = table_rows(w, c, 4ull * s.width);
  const gpu::Buffer& ids = w.indices("ids", s.T, rows);
  const gpu::Buffer& table = w.floats("table", uint64_t(rows) * s.width);
  const gpu::Buffer& out = w.output("out", uint64_t(s.T) * s.width);
  c.dispatches.push_back(embedding(w.device(), whole(ids), whole(table), whole(out), {s.T, s.width}, rows));
  return c;
}

Builder embed_case(WeightType type) {
  return [type](Workspace& w, const Shape& s) {
    Case c;
    c.variant = type_name(type);
    c.metric = Metric::Gbps;
    c.bytes = 4.0 * s.T + double(s.T) * s.width * (weight_bytes(type) + 4);
    uint32_t rows = table_rows(w, c, uint64_t(weight_bytes(type)) * s.width);
    const gpu::Buffer& ids = w.indices("ids", s.T, rows);
    const gpu::Buffer& table = w.weights("table", rows, s.width, type);
    const gpu::Buffer& out = w.output("out", uint64_t(s.T) * s.width);
    // ids stands in for the unused position table.
    EmbedParams p{s.T, s.width, 0, rows, float_bits(1.f), 0, 0};
    c.dispatches.push_back(embed(w.device(), whole(ids), whole(table), whole(ids), whole(out), p, type, 0));
    return c;
  };
}

// Element-wise kernels: the reference's count * 4 * (inputs + 1) bytes.
double elementwise_bytes(uint64_t count, int inputs) { return 4.0 * count * (inputs + 1); }

Case seed_silu_mul(Workspace& w, const Shape& s) {
  Case c;
  c.metric = Metric::Gbps;
  uint32_t count = s.T * s.width;
  c.bytes = elementwise_bytes(count, 1) + elementwise_bytes(count, 2);
  const gpu::Buffer& gate = w.floats("gate", count, -4.f, 4.f);
  const gpu::Buffer& up = w.floats("up", count, -4.f, 4.f);
  const gpu::Buffer& act = w.output("act", count);
  const gpu::Buffer& out = w.output("out", count);
  c.dispatches.push_back(silu(w.device(), whole(gate), whole(act), {count}));
  c.dispatches.push_back(mul(w.device(), whole(act), whole(up), whole(out), {count}));
  return c;
}

Case gated_case(Workspace& w, const Shape& s) {
  Case c;
  c.variant = "silu";
  c.metric = Metric::Gbps;
  uint32_t count = s.T * s.width;
  c.bytes = elementwise_bytes(count, 2);
  const gpu::Buffer& gate_up = w.floats("gate_up", 2ull * count, -4.f, 4.f);
  const gpu::Buffer& out = w.output("out", count);
  c.dispatches.push_back(gated_act(w.device(), whole(gate_up), whole(out), {s.T, s.width, 0}));
  return c;
}

Case seed_rope(Workspace& w, const Shape& s) {
  Case c;
  c.metric = Metric::Gbps;
  uint64_t q = uint64_t(s.T) * kHeads * kHeadDim, k = uint64_t(s.T) * kKvHeads * kHeadDim;
  c.bytes = 2 * 4.0 * (q + k);  // read and written in place
  const gpu::Buffer& Q = w.floats("q", q);
  const gpu::Buffer& K = w.floats("k", k);
  c.dispatches.push_back(rope(w.device(), whole(Q), whole(K), {s.T, kHeads, kKvHeads, kHeadDim, float_bits(kRopeBase), 0}));
  return c;
}

Case qkv_case(Workspace& w, const Shape& s) {
  Case c;
  c.metric = Metric::Gbps;
  uint64_t q = uint64_t(s.T) * kHeads * kHeadDim, kv = uint64_t(s.T) * kKvHeads * kHeadDim;
  c.bytes = 2 * 4.0 * (q + 2 * kv) + 4.0 * (kHeadDim / 2 + 1);  // qkv read, q / k / v written, rope_table
  std::vector<float> rope_table(kHeadDim / 2 + 1, 1.0f);  // the frequencies, then an attention factor of 1
  for (uint32_t i = 0; i < kHeadDim / 2; ++i) rope_table[i] = std::pow(kRopeBase, -2.f * i / kHeadDim);
  const gpu::Buffer& qkv = w.floats("qkv", q + 2 * kv);
  const gpu::Buffer& freq = w.values("rope_table", rope_table);
  const gpu::Buffer& q_out = w.output("q_out", q);
  uint64_t pool = ceil_div(s.T, kKvBlockTokens) * kKvBlockTokens * kKvHeads * kHeadDim;
  const gpu::Buffer& k_cache = w.output("k_cache", pool);
  const gpu::Buffer& v_cache = w.output("v_cache", pool);
  // rope_table stands in for the unused q / k norm weights (Qwen2.5 has none).
  QkvRopeParams p{s.T, kHeads, kKvHeads, kHeadDim, kHeadDim, 0, 0, float_bits(1e-6f)};
  c.dispatches.push_back(qkv_rope_store(w.device(), whole(qkv), whole(freq), whole(freq), whole(freq), whole(q_out),
                                        whole(k_cache), whole(v_cache), w.contiguous_blocks(s.T), p, s.T));
  return c;
}

// Norms and element-wise kernels: the seed kernel and its vec4 replacement (kernels/vector.h) share a
// builder, so both rows of a family do exactly the same work.
using RmsNormFn = Dispatch (*)(gpu::Device&, BufferBinding, BufferBinding, BufferBinding, const RmsNormParams&);
using LayerNormFn = Dispatch (*)(gpu::Device&, BufferBinding, BufferBinding, BufferBinding, BufferBinding,
                                 const LayerNormParams&);
using UnaryFn = Dispatch (*)(gpu::Device&, BufferBinding, BufferBinding, const ElementwiseParams&);
using BinaryFn = Dispatch (*)(gpu::Device&, BufferBinding, BufferBinding, BufferBinding, const ElementwiseParams&);

Builder rmsnorm_case(RmsNormFn dispatch) {
  return [dispatch](Workspace& w, const Shape& s) {
    Case c;
    c.metric = Metric::Gbps;
    uint64_t n = uint64_t(s.T) * s.width;
    c.bytes = 4.0 * n * 3;  // the reference's formula
    c.note = "GB/s by the reference's formula, T*D*4*3 bytes: 1.5x the bytes moved";
    const gpu::Buffer& input = w.floats("input", n);
    const gpu::Buffer& weight = w.floats("weight", s.width);
    const gpu::Buffer& output = w.output("output", n);
    c.dispatches.push_back(dispatch(w.device(), whole(input), whole(weight), whole(output),
                                    {s.T, s.width, float_bits(1e-6f)}));
    return c;
  };
}

Builder layernorm_case(LayerNormFn dispatch) {
  return [dispatch](Workspace& w, const Shape& s) {
    Case c;
    c.metric = Metric::Gbps;
    uint64_t n = uint64_t(s.T) * s.width;
    c.bytes = 4.0 * (2 * n + 2 * s.width);  // input read, output written, weight and bias read once
    const gpu::Buffer& input = w.floats("input", n, -1.f, 3.f);
    const gpu::Buffer& weight = w.floats("weight", s.width);
    const gpu::Buffer& bias = w.floats("bias", s.width);
    const gpu::Buffer& output = w.output("output", n);
    c.dispatches.push_back(dispatch(w.device(), whole(input), whole(weight), whole(bias), whole(output),
                                    {s.T, s.width, float_bits(1e-5f)}));
    return c;
  };
}

Builder unary_case(UnaryFn dispatch) {
  return [dispatch](Workspace& w, const Shape& s) {
    Case c;
    c.metric = Metric::Gbps;
    uint32_t count = s.T * s.width;
    c.bytes = elementwise_bytes(count, 1);
    const gpu::Buffer& input = w.floats("input", count, -4.f, 4.f);
    const gpu::Buffer& out = w.output("out", count);
    c.dispatches.push_back(dispatch(w.device(), whole(input), whole(out), {count}));
    return c;
  };
}

Builder binary_case(BinaryFn dispatch) {
  return [dispatch](Workspace& w, const Shape& s) {
    Case c;
    c.metric = Metric::Gbps;
    uint32_t count = s.T * s.width;
    c.bytes = elementwise_bytes(count, 2);
    const gpu::Buffer& a = w.floats("a", count);
    const gpu::Buffer& b = w.floats("b", count);
    const gpu::Buffer& out = w.output("out", count);
    c.dispatches.push_back(dispatch(w.device(), whole(a), whole(b), whole(out), {count}));
    return c;
  };
}

// ---- the table ---------------------------------------------------------------------------------------

// The projections of one decoder layer (QKV and gate|up fused, as the model graphs run them) and the LM head.
struct Projection {
  const char* name;
  uint32_t K, N;
};
const Projection kQwenProjections[] = {{"qwen qkv", kHidden, kHidden + 2 * kKvHeads * kHeadDim},
                                       {"qwen o", kHidden, kHidden},
                                       {"qwen gate_up", kHidden, 2 * kIntermediate},
                                       {"qwen down", kIntermediate, kHidden}};
const Projection kLlamaProjections[] = {{"llama qkv", kLlamaHidden, 6144},
                                        {"llama o", kLlamaHidden, kLlamaHidden},
                                        {"llama gate_up", kLlamaHidden, 2 * kLlamaIntermediate},
                                        {"llama down", kLlamaIntermediate, kLlamaHidden}};

Shape projection_shape(const Projection& p, uint32_t T, bool quick) {
  return {fmt::format("{} M={} K={} N={}", p.name, T, p.K, p.N), T, p.K, p.N, 0, quick};
}

// Decoding: bound by reading the weights once (Llama's shapes stream 50-235 MB each).
std::vector<Shape> decode_projection_shapes() {
  std::vector<Shape> shapes;
  for (const Projection& p : kQwenProjections) shapes.push_back(projection_shape(p, 1, true));
  shapes.push_back(projection_shape({"qwen lm_head", kHidden, kVocab}, 1, false));
  for (const Projection& p : kLlamaProjections) shapes.push_back(projection_shape(p, 1, false));
  shapes.push_back(projection_shape({"llama lm_head", kLlamaHidden, kLlamaVocab}, 1, false));
  return shapes;
}

// Batched decode steps: Llama's projections at 4, 8 and kLinearRowsMax rows (linear_rows.wgsl, to read the weights
// once), at kLinearRowsMax + 1, 32, 48 and kBatchTileRows rows (linear_tiled_rows.wgsl's 32- and 64-row tiles where
// the adapter holds them); Qwen's, whose narrow products leave SMs idle (64-row tiles of the tiled prompt kernel
// from 17 rows), at 4, 8, kLinearRowsMax, 32 and kBatchTileRows.
std::vector<Shape> batch_projection_shapes() {
  std::vector<Shape> shapes;
  for (uint32_t T : {4u, 8u, kLinearRowsMax, kLinearRowsMax + 1, 32u, 48u, kBatchTileRows})
    for (const Projection& p : kLlamaProjections) shapes.push_back(projection_shape(p, T, false));
  for (uint32_t T : {4u, 8u, kLinearRowsMax, 32u, kBatchTileRows})
    for (const Projection& p : kQwenProjections) shapes.push_back(projection_shape(p, T, false));
  return shapes;
}

// Prompts: bound by arithmetic once M is large; M = 512 is the pp512 benchmark's chunk.
std::vector<Shape> prefill_projection_shapes() {
  std::vector<Shape> shapes;
  for (uint32_t T : {50u, 512u, 2048u})
    for (const Projection& p : kQwenProjections)
      shapes.push_back(projection_shape(p, T, T == 50 && p.K == p.N));  // --quick: one prompt shape
  for (const Projection& p : kLlamaProjections) shapes.push_back(projection_shape(p, 512, false));
  return shapes;
}

// The int4 kernels at the reference's shapes (Qwen2.5-0.5B's separate projections).
std::vector<Shape> int4_projection_shapes() {
  const Projection projections[] = {{"q_proj", kHidden, kHidden},
                                    {"gate_proj", kHidden, kIntermediate},
                                    {"down_proj", kIntermediate, kHidden}};
  std::vector<Shape> shapes;
  for (uint32_t T : {1u, 50u, 2048u})
    for (const Projection& p : projections)
      shapes.push_back(projection_shape(p, T, T == 1 || (T == 50 && p.K == p.N)));
  shapes.push_back(projection_shape({"lm_head", kHidden, kVocab}, 1, false));
  return shapes;
}

std::vector<Shape> attention_shapes() {
  return {{"decode T=1 S=128", 1, 0, 0, 128, true},
          {"decode T=1 S=2048", 1, 0, 0, 2048, true},
          {"prefill T=S=50", 50, 0, 0, 50, true},
          {"prefill T=S=2048", 2048, 0, 0, 2048, false},  // the seed's one-thread attention: very slow
          {"decode T=1 S=8192", 1, 0, 0, 8192, false},
          {"prefill T=512 S=8192", 512, 0, 0, 8192, false}};  // the last 512-token chunk of an 8,192 prompt
}

// T tokens of `width` elements each (Qwen2.5-0.5B's hidden or intermediate size) at the reference's
// T = 1, 50, 2048, named "T=..." (with `counted`, "T=... count=<elements>"); and with `llama_width`,
// Llama-3-8B's matching size at T = 2048: 33-117 MB per buffer, where a dispatch's fixed cost (the header's
// floor) no longer hides the bandwidth.
std::vector<Shape> token_shapes(uint32_t width, uint32_t llama_width, bool counted) {
  auto name = [&](uint32_t T, uint32_t w) {
    return counted ? fmt::format("T={} count={}", T, T * w) : fmt::format("T={}", T);
  };
  std::vector<Shape> shapes;
  for (uint32_t T : {1u, 50u, 2048u}) shapes.push_back({name(T, width), T, 0, 0, 0, T != 2048, width});
  if (llama_width) shapes.push_back({"llama " + name(2048, llama_width), 2048, 0, 0, 0, false, llama_width});
  return shapes;
}

struct Kernel {
  std::string name;
  Builder build;
};

// A seed kernel, the optimised kernels that replace it (timed beside it, with the speed-up), and the
// shapes all of them run at.
struct Family {
  std::vector<Shape> shapes;
  Kernel seed;
  std::vector<Kernel> variants;
};

const std::vector<Family>& families() {
  using enum WeightType;
  static const std::vector<Shape> hidden = token_shapes(kHidden, kLlamaHidden, false);
  static const std::vector<Shape> intermediate = token_shapes(kIntermediate, kLlamaIntermediate, true);
  static const std::vector<Family> table = {
      {decode_projection_shapes(),
       {"matmul", seed_matmul},
       {{"linear", linear_case(F32)},
        {"linear", linear_case(F16)},
        {"linear", linear_case(BF16)},
        {"linear", linear_case(F16, {1, 1})},
        {"linear", linear_case(F16, {1, 0})},
        {"linear", linear_case(F16, {2, 0})},
        {"linear", linear_case(F16, {4, 0})},
        {"linear", linear_case(F16, {0, 1})},
        {"linear", linear_case(F16, {0, 0, 2})},
        {"linear", linear_case(F16, {0, 0, 8})},
        {"linear", linear_case(F16, {2, 0, 8})},
        {"linear", linear_case(F16, {}, {.norm = kNormWeighted})},
        {"linear", linear_case(F16, {}, {.norm = kNormPrepared})},
        {"linear", linear_case(F16, {}, {.norm = kNormWeighted, .gate_act = 1})},
        {"linear", linear_case(F16, {}, {.norm = kNormPrepared, .gate_act = 1})},
        {"linear", linear_case(F16, {}, {.norm_out = true})},
        {"linear", linear_case(F16, {}, {.gate_act = 1})},
        {"linear", linear_case(Q4_0)},
        {"linear", linear_case(Q2_K)},
        {"linear", linear_case(Q3_K)},
        {"linear", linear_case(Q4_K)},
        {"linear", linear_case(Q6_K)},
        {"linear", linear_case(Q8_0)},
        {"linear", linear_case(IQ4_XS)}}},
      {batch_projection_shapes(),
       {"matmul", seed_matmul},
       {{"linear", linear_case(F16, {}, {.split_k = true})},
        {"linear", linear_case(Q4_0, {}, {.split_k = true})},
        {"linear", linear_case(Q4_K, {}, {.split_k = true})}}},
      {prefill_projection_shapes(),
       {"matmul", seed_matmul},
       {{"linear", linear_case(F32)},
        {"linear", linear_case(F16)},
        {"linear", linear_case(BF16)},
        {"linear", linear_case(F16, {}, {.split_k = true})},
        {"linear", linear_case(F16, {}, {.split_k = true, .arithmetic = Arithmetic::F16})},
        {"linear", linear_case(Q4_0, {}, {.split_k = true})},
        {"linear", linear_case(Q3_K, {}, {.split_k = true})},
        {"linear", linear_case(Q4_K, {}, {.split_k = true})},
        {"linear", linear_case(IQ4_XS, {}, {.split_k = true})}}},
      {int4_projection_shapes(),
       {"matmul_int4", seed_matmul_int4},
       {{"linear", linear_case(Q4_G128, {}, {.split_k = true})}}},  // GPTQ / AWQ layers of groups of 128, as loaded
      {attention_shapes(), {"attention", seed_attention}, {{"flash_attention", flash_case(KvType::F32)},
        {"flash_attention", flash_case(KvType::F16)},
        {"flash_attention", flash_case(KvType::Q8)}}},
      {hidden, {"embedding", seed_embedding}, {{"embed", embed_case(F32)}, {"embed", embed_case(F16)}}},
      {token_shapes(kIntermediate, kLlamaIntermediate, false), {"silu+mul", seed_silu_mul}, {{"gated_act", gated_case}}},
      {token_shapes(kHidden, 0, false), {"rope", seed_rope}, {{"qkv_rope_store", qkv_case}}},  // Qwen's heads
      {hidden, {"rmsnorm", rmsnorm_case(rmsnorm)}, {{"rmsnorm_vec4", rmsnorm_case(rmsnorm_vec4)}}},
      {hidden, {"layernorm", layernorm_case(layernorm)}, {{"layernorm_welford", layernorm_case(layernorm_welford)}}},
      {hidden, {"add", binary_case(add)}, {{"add_vec4", binary_case(add_vec4)}}},
      {intermediate, {"mul", binary_case(mul)}, {{"mul_vec4", binary_case(mul_vec4)}}},
      {intermediate, {"silu", unary_case(silu)}, {{"silu_vec4", unary_case(silu_vec4)}}},
      {intermediate, {"gelu", unary_case(gelu)}, {{"gelu_vec4", unary_case(gelu_vec4)}}},
  };
  return table;
}

bool in_family(const Family& family, const std::string& name) {
  if (family.seed.name == name) return true;
  return std::any_of(family.variants.begin(), family.variants.end(), [&](const Kernel& k) { return k.name == name; });
}

// Builds the case (its inputs generated and uploaded), calls `before_timing`, then times it.
Result run_case(gpu::Device& device, Workspace& workspace, const Kernel& kernel, const Shape& shape,
                const Settings& settings, bool timestamps, const Ceilings& ceilings,
                const std::function<void(Result&)>& before_timing) {
  Result r;
  r.kernel = kernel.name;
  r.shape = shape.name;
  try {
    Case c = kernel.build(workspace, shape);
    r.variant = c.variant;
    r.note = c.note;
    if (!c.skipped.empty()) {
      r.skipped = c.skipped;
      return r;
    }
    for (const Dispatch& dispatch : c.dispatches) r.dispatches.push_back(dispatch.kernel + " " + dispatch.shapes);
    if (before_timing) before_timing(r);
    Measurement m = measure(device, c.dispatches, settings, timestamps);
    if (!(m.median_ms > 0))
      fail("kernel '{}' ({}): measured {} ms per iteration (are Dawn's timestamps quantized? see "
           "gpu::request_precise_timestamps)", kernel.name, shape.name, m.median_ms);
    r.iterations = m.iterations;
    r.ms = m.median_ms / c.repeats;
    r.ms_mean = m.mean_ms / c.repeats;
    r.ms_min = m.min_ms / c.repeats;
    r.metric = c.metric;
    r.flops = c.flops;
    r.bytes = c.bytes;
    r.value = (c.metric == Metric::Gflops ? c.flops : c.bytes) / (r.ms * 1e6);
    r.ceiling_percent = 100 * r.value / ceilings.of(c.metric);
  } catch (const Error& e) {
    Result failed{.kernel = r.kernel, .variant = r.variant, .shape = r.shape};
    failed.error = e.what();
    return failed;
  }
  return r;
}

// ---- ceilings ----------------------------------------------------------------------------------------

// The full sizes take about a millisecond on an H200 (3.8 TB/s, ~67 TFLOP/s f32); slower adapters run a
// fraction sized to take about kCeilingMs.
constexpr double kCopyBytes = 2.0 * (1ull << 30);  // per direction
constexpr uint32_t kFmaWorkgroups = 4096, kFmaIterations = 512;
constexpr uint32_t kFmaMinWorkgroups = 64;  // enough to occupy every core of a CPU adapter
constexpr uint32_t kFmaPerIteration = 4 * 8 * 4;  // bench_fma.wgsl: vec4 x CHAINS x ROUNDS
constexpr double kCeilingMs = 20;

using CeilingBuilder = std::function<Case(Workspace&, double fraction)>;

Case copy_ceiling(Workspace& w, double fraction) {
  struct Params {
    uint32_t count;
  };
  Case c;
  c.metric = Metric::Gbps;
  uint64_t total = std::max<uint64_t>(1 << 20, static_cast<uint64_t>(fraction * kCopyBytes)) / 16 * 16;
  uint64_t chunk = binding_limit(w.device()) / 16 * 16;  // one dispatch per binding-sized chunk
  for (uint64_t done = 0; done < total; done += chunk) {
    uint32_t count = std::min(chunk, total - done) / 16;
    const gpu::Buffer& src = w.floats("copy src", 4ull * count);
    const gpu::Buffer& dst = w.output("copy dst", 4ull * count);
    c.dispatches.push_back(prepare(w.device(), "bench_copy", fmt::format("vec4 count={}", count),
                                   {{"src", whole(src), count, 16}, {"dst", whole(dst), count, 16}}, Params{count},
                                   fold(ceil_div(count, 4 * kWorkgroupSize))));
  }
  c.bytes = 2.0 * total;
  return c;
}

Case fma_ceiling(Workspace& w, double fraction) {
  struct Params {
    uint32_t iterations;
    float a, b;
    uint32_t _pad = 0;
  };
  Case c;
  double units = std::max(1.0, fraction * kFmaWorkgroups * kFmaIterations);  // workgroup-iterations
  uint32_t workgroups = std::clamp<double>(units / kFmaIterations, kFmaMinWorkgroups, kFmaWorkgroups);
  uint32_t iterations = std::clamp<double>(units / workgroups, 1, kFmaIterations);
  uint32_t threads = workgroups * kWorkgroupSize;
  const gpu::Buffer& out = w.output("fma out", 4ull * threads);
  c.dispatches.push_back(prepare(w.device(), "bench_fma",
                                 fmt::format("workgroups={} iterations={}", workgroups, iterations),
                                 {{"out", whole(out), threads, 16}}, Params{iterations, 0.999f, 0.001f},
                                 Grid{workgroups, 1, 1}));
  c.flops = 2.0 * kFmaPerIteration * iterations * threads;
  return c;
}

// The clock probe (warm_until_at_speed): a copy larger than an H200's L2 cache, so that it sees both slower
// memory and slower cores.
constexpr double kProbeBytes = 64.0 * (1 << 20);  // per direction

Case probe_case(Workspace& w) { return copy_ceiling(w, kProbeBytes / kCopyBytes); }

double probe_ms(gpu::Device& device, std::span<const Dispatch> probe, bool timestamps) {
  return measure(device, probe, {1, 10, 10, 0}, timestamps).median_ms;
}

// The floor: one workgroup of the copy kernel with nothing to copy, a dispatch that does no work in its own
// timestamped pass, as every case's dispatches are timed.
double floor_ms(gpu::Device& device, bool timestamps, const Settings& settings) {
  Workspace workspace(device, 3, false);
  const gpu::Buffer& src = workspace.floats("floor src", 4);
  const gpu::Buffer& dst = workspace.output("floor dst", 4);
  struct Params {
    uint32_t count;
  };
  Dispatch empty = prepare(device, "bench_copy", "vec4 count=0", {{"src", whole(src), 1, 16}, {"dst", whole(dst), 1, 16}},
                           Params{0}, Grid{1, 1, 1});
  return measure(device, std::span(&empty, 1), settings, timestamps).median_ms;
}

struct CeilingRun {
  double work = 0, ms = 0;
};

// Times the ceiling kernel at a probe size, then at the size expected to take kCeilingMs (at most its
// full size).
CeilingRun measure_ceiling(gpu::Device& device, const CeilingBuilder& build, double probe, bool timestamps,
                           const Settings& settings) {
  double fraction = 1;
  {
    Workspace workspace(device, 1, false);
    Case c = build(workspace, probe);
    double ms = measure(device, c.dispatches, {1, 3, 3, 0}, timestamps).median_ms;
    fraction = std::clamp(probe * kCeilingMs / std::max(ms, 1e-6), probe, 1.0);
  }
  Workspace workspace(device, 2, false);
  Case c = build(workspace, fraction);
  double ms = measure(device, c.dispatches, settings, timestamps).median_ms;
  if (!(ms > 0)) fail("ceiling kernel '{}' measured {} ms", c.dispatches.front().kernel, ms);
  return {c.metric == Metric::Gflops ? c.flops : c.bytes, ms};
}

}  // namespace

MatvecBlocking parse_blocking(const std::string& text) {
  MatvecBlocking b;
  // %u would take "-1" as 4294967295: only digits and commas.
  bool digits = !text.empty() && text.find_first_not_of("0123456789,") == std::string::npos;
  int used = 0;  // characters the three or four numbers took: all of them
  bool three = digits && std::sscanf(text.c_str(), "%u,%u,%u%n", &b.columns, &b.split, &b.unroll, &used) == 3 &&
               size_t(used) == text.size();
  bool four = digits && !three &&
              std::sscanf(text.c_str(), "%u,%u,%u,%u%n", &b.columns, &b.split, &b.unroll, &b.workgroups, &used) == 4 &&
              size_t(used) == text.size();
  if (!three && !four)
    fail("bench kernels: --blocking '{}' is not COLUMNS,SPLIT,UNROLL[,WORKGROUPS] (whole numbers, 0 for the "
         "default)",
         text);
  return b;
}

bool uses_timestamps(const gpu::Device& device, const Options& options) {
  return options.clock == gpu::TimerClock::Auto && device.features().timestamp_query;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const Family& family : families()) {
    names.push_back(family.seed.name);
    for (const Kernel& variant : family.variants)
      if (std::find(names.begin(), names.end(), variant.name) == names.end()) names.push_back(variant.name);
  }
  return names;
}

bool shape_selected(const Options& options, const Shape& shape) {
  return options.shape.empty() || shape.name.find(options.shape) != std::string::npos;
}

void check_options(const Options& options) {
  if (!options.shape.empty()) {
    bool any = std::any_of(families().begin(), families().end(), [&](const Family& family) {
      return std::any_of(family.shapes.begin(), family.shapes.end(),
                         [&](const Shape& shape) { return shape_selected(options, shape); });
    });
    if (!any) fail("bench kernels: no shape name contains '{}'", options.shape);
  }
  if (options.kernel.empty()) return;
  auto names = kernel_names();
  if (std::find(names.begin(), names.end(), options.kernel) == names.end())
    fail("bench kernels: no kernel named '{}'; the kernels are: {}", options.kernel, fmt::join(names, ", "));
}

Ceilings measure_ceilings(gpu::Device& device, const Options& options) {
  bool timestamps = uses_timestamps(device, options);
  Settings settings{2, options.quick ? 5u : 20u, 0, 0};
  CeilingRun copy = measure_ceiling(device, copy_ceiling, (4 << 20) / kCopyBytes, timestamps, settings);
  CeilingRun fma = measure_ceiling(device, fma_ceiling, double(kFmaMinWorkgroups) * 4 / (kFmaWorkgroups * kFmaIterations),
                                   timestamps, settings);
  Workspace probe_space(device, 4, false);
  Case probe = probe_case(probe_space);
  return {copy.work / (copy.ms * 1e6), copy.work, copy.ms, fma.work / (fma.ms * 1e6), fma.work, fma.ms,
          floor_ms(device, timestamps, settings), probe_ms(device, probe.dispatches, timestamps)};
}

Warmed warm_until_at_speed(gpu::Device& device, std::span<const Dispatch> probe, double baseline_ms, bool timestamps,
                           double max_s) {
  using Clock = std::chrono::steady_clock;
  constexpr double kLoadMs = 100;  // GPU time of one round of load
  auto start = Clock::now();
  Warmed warmed;
  for (;;) {
    double ms = probe_ms(device, probe, timestamps);
    warmed.slowdown = ms / baseline_ms;
    warmed.warming_s = std::chrono::duration<double>(Clock::now() - start).count();
    if (warmed.slowdown <= 1 + kWarmTolerance || warmed.warming_s >= max_s) return warmed;
    auto n = static_cast<uint32_t>(std::clamp(kLoadMs / ms, 1.0, 2000.0));
    measure(device, probe, {0, n, n, 0}, timestamps);  // timestamps: all n in one submit, back to back
  }
}

// The tuning rows Options asks for, added to the linear families: blockings to the decode shapes (M <= 4) and to
// the batched decode steps linear_rows.wgsl takes, split counts to the other prompt shapes.
std::vector<Kernel> tuning_variants(const gpu::Device& device, const Options& options, const Shape& shape) {
  std::vector<Kernel> kernels;
  bool rows = use_linear_rows(device, {shape.T, shape.K, shape.N}, WeightType::F16);
  if (shape.T <= kMatvecRows) {
    for (MatvecBlocking b : options.blockings) {
      // Unfused f16 products of several rows run linear_rows.wgsl, which the blocking means differently (below).
      if (!rows) kernels.push_back({"linear", linear_case(WeightType::F16, b)});
      kernels.push_back({"linear", linear_case(WeightType::F16, b, {.norm = kNormWeighted})});
      // The block types' decode kernel takes COLUMNS columns per team of SPLIT lanes (linear_q_matvec_blocking)
      // where linear_rows.wgsl does not take the product (below).
      for (WeightType type : {WeightType::Q4_0, WeightType::Q4_K})
        if (!use_linear_rows(device, {shape.T, shape.K, shape.N}, type))
          kernels.push_back({"linear", linear_case(type, b)});
      bool pairs = b.columns == 0 || b.columns == 2;  // a gated product pairs gate and up rows
      if (pairs && shape.name.find("gate_up") != std::string::npos)
        kernels.push_back({"linear", linear_case(WeightType::F16, b, {.norm = kNormWeighted, .gate_act = 1})});
    }
  } else if (!rows) {
    for (uint32_t workers : options.split_workers)
      kernels.push_back({"linear", linear_case(WeightType::F16, {}, {.split_k = true, .workers = workers})});
  }
  // linear_rows.wgsl shares nothing out; COLUMNS a thread, SPLIT columns a slice, UNROLL pieces a step,
  // WORKGROUPS teams a workgroup
  for (WeightType type : {WeightType::F16, WeightType::Q4_0})
    if (use_linear_rows(device, {shape.T, shape.K, shape.N}, type))
      for (MatvecBlocking b : options.blockings) kernels.push_back({"linear", linear_case(type, b)});
  return kernels;
}

std::vector<Result> run(gpu::Device& device, const Options& options, const Ceilings& ceilings,
                        const std::function<void(const Result&)>& done) {
  check_options(options);
  Settings settings = settings_for(options);
  bool timestamps = uses_timestamps(device, options);
  // A full run brings the clocks up once a case's inputs are made (the host may have spent seconds on them,
  // the GPU idle), right before timing it; --quick, for CPU adapters and tests, does not.
  constexpr double kMaxWarmingS = 10;
  Workspace probe_space(device, 4, false);
  Case probe = options.quick ? Case{} : probe_case(probe_space);
  std::function<void(Result&)> warm;
  if (!options.quick)
    warm = [&](Result& r) {
      Warmed warmed = warm_until_at_speed(device, probe.dispatches, ceilings.probe_ms, timestamps, kMaxWarmingS);
      r.warming_s = warmed.warming_s;
      r.probe_slowdown = warmed.slowdown;
      if (warmed.slowdown > 1 + kWarmTolerance) {
        std::string slow = fmt::format("GPU {:.1f}x slow by the clock probe after {:.0f} s of load: read with care",
                                       warmed.slowdown, warmed.warming_s);
        r.note = r.note.empty() ? slow : r.note + "; " + slow;
      }
    };
  auto timed = [&](Workspace& workspace, const Kernel& kernel, const Shape& shape) {
    return run_case(device, workspace, kernel, shape, settings, timestamps, ceilings, warm);
  };
  std::vector<Result> results;
  for (const Family& family : families()) {
    if (!options.kernel.empty() && !in_family(family, options.kernel)) continue;
    for (const Shape& shape : family.shapes) {
      if ((options.quick && !shape.quick) || !shape_selected(options, shape)) continue;
      Workspace workspace(device, 0x6765726269ull, !options.quick);
      // The seed kernel runs whenever its family does, for the speed-ups.
      Result seed = timed(workspace, family.seed, shape);
      results.push_back(seed);
      if (done) done(seed);
      std::vector<Kernel> variants = family.variants;
      if (in_family(family, "linear")) {
        auto tuning = tuning_variants(device, options, shape);
        variants.insert(variants.end(), tuning.begin(), tuning.end());
      }
      for (const Kernel& variant : variants) {
        if (!options.kernel.empty() && options.kernel != variant.name && options.kernel != family.seed.name) continue;
        Result r = timed(workspace, variant, shape);
        r.seed = family.seed.name;
        if (r.ms > 0 && seed.ms > 0) r.speedup = seed.ms / r.ms;
        results.push_back(r);
        if (done) done(r);
      }
    }
  }
  return results;
}

nlohmann::json to_json(const gpu::Device& device, const Options& options, const Ceilings& ceilings,
                       const std::vector<Result>& results) {
  const gpu::AdapterInfo& adapter = device.adapter();
  nlohmann::json json;
  json["adapter"] = {{"summary", adapter.summary()}, {"vendor", adapter.vendor},
                     {"architecture", adapter.architecture}, {"device", adapter.device},
                     {"description", adapter.description}, {"backend", adapter.backend},
                     {"type", adapter.adapter_type},
                     {"features", {{"shader_f16", device.features().shader_f16},
                                   {"subgroups", device.features().subgroups},
                                   {"timestamp_query", device.features().timestamp_query}}},
                     {"max_storage_buffer_binding_size", device.limits().maxStorageBufferBindingSize}};
  json["timing"] = uses_timestamps(device, options) ? "gpu-timestamps" : "host";
  json["quick"] = options.quick;
  json["ceilings"] = {{"bandwidth_gbps", ceilings.bandwidth_gbps}, {"copy_bytes", ceilings.copy_bytes},
                      {"copy_ms", ceilings.copy_ms}, {"gflops", ceilings.gflops},
                      {"fma_flops", ceilings.fma_flops}, {"fma_ms", ceilings.fma_ms},
                      {"floor_ms", ceilings.floor_ms}, {"probe_ms", ceilings.probe_ms}};
  json["results"] = nlohmann::json::array();
  for (const Result& r : results) {
    nlohmann::json row = {{"kernel", r.kernel}, {"variant", r.variant}, {"shape", r.shape}, {"seed", r.seed},
                          {"dispatches", r.dispatches}};
    if (!r.note.empty()) row["note"] = r.note;
    if (!r.error.empty()) {
      row["error"] = r.error;
    } else if (!r.skipped.empty()) {
      row["skipped"] = r.skipped;
    } else {
      row.update({{"iterations", r.iterations}, {"ms", r.ms}, {"ms_mean", r.ms_mean}, {"ms_min", r.ms_min},
                  {"metric", r.metric == Metric::Gflops ? "GFLOPS" : "GB/s"}, {"value", r.value},
                  {"flops", r.flops}, {"bytes", r.bytes}, {"ceiling_percent", r.ceiling_percent},
                  {"gflops", r.flops / (r.ms * 1e6)}, {"gbps", r.bytes / (r.ms * 1e6)}});
      if (!r.seed.empty() && r.speedup > 0) row["speedup"] = r.speedup;
      if (r.probe_slowdown > 0) row.update({{"warming_s", r.warming_s}, {"probe_slowdown", r.probe_slowdown}});
    }
    json["results"].push_back(std::move(row));
  }
  return json;
}

namespace {

std::string number(double value) {
  if (value < 1) return fmt::format("{:.3g}", value);
  return fmt::format("{:.{}f}", value, value >= 100 ? 0 : value >= 10 ? 1 : 2);
}

std::string megabytes(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1 << 20)); }

}  // namespace

std::string format_header(const gpu::Device& device, const Options& options, const Ceilings& ceilings) {
  Settings settings = settings_for(options);
  std::string timing = uses_timestamps(device, options)
                           ? "GPU timestamps, median ms per iteration"
                           : "host clock around submits + onSubmittedWorkDone, mean ms per iteration";
  std::string iterations = settings.budget_s > 0
                               ? fmt::format("{} to {} iterations (by cost)", settings.min_iterations, settings.iterations)
                               : fmt::format("{} iterations", settings.iterations);
  return fmt::format(
      "adapter:  {}\n"
      "timing:   {}; {} after warm-up{}\n"
      "ceilings: copy {} GB/s ({} read + written in {:.3f} ms); FMA {} GFLOPS ({:.3g} FLOP in {:.3f} ms)\n"
      "floor:    {:.4f} ms per dispatch that does no work (in every row's time; the percentages count it)\n"
      "clocks:   {}\n\n"
      "{:<20} {:<25} {:<34} {:>10} {:>15} {:>7} {:>8}\n",
      device.adapter().summary(), timing, iterations, options.quick ? " (--quick)" : "",
      number(ceilings.bandwidth_gbps), megabytes(ceilings.copy_bytes), ceilings.copy_ms, number(ceilings.gflops),
      ceilings.fma_flops, ceilings.fma_ms, ceilings.floor_ms,
      options.quick ? std::string("not checked (--quick)")
                    : fmt::format("before each case the GPU is loaded until a 64 MiB copy takes at most {:.0f} % "
                                  "over its {:.4f} ms at the start (an idle GPU lowers its clocks)",
                                  100 * kWarmTolerance, ceilings.probe_ms),
      "kernel", "variant", "shape", "ms/iter", "metric", "%ceil", "vs seed");
}

std::string format_row(const Result& r) {
  std::string kernel = r.seed.empty() ? r.kernel : "  " + r.kernel;
  std::string line = fmt::format("{:<20} {:<25} {:<34}", kernel, r.variant, r.shape);
  if (!r.error.empty()) return line + " error: " + r.error + "\n";
  if (!r.skipped.empty()) return line + " not run: " + r.skipped + "\n";
  line += fmt::format(" {:>10.4f} {:>8} {:<6} {:>6.1f}%", r.ms, number(r.value),
                      r.metric == Metric::Gflops ? "GFLOPS" : "GB/s", r.ceiling_percent);
  if (r.speedup > 0) line += fmt::format(" {:>7.2f}x", r.speedup);
  if (!r.note.empty()) line += fmt::format("{}  ({})", r.speedup > 0 ? "" : std::string(9, ' '), r.note);
  return line + "\n";
}

}  // namespace bench
}  // namespace gerbil::kernels
