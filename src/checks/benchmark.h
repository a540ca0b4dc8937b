// Kernel micro-benchmarks (`gerbil bench kernels`), by the method of ../shared/seed/kernels.md §13: warm-up,
// then many iterations per kernel and shape, timed with GPU timestamps where the adapter has them, else on
// the host around the submits and onSubmittedWorkDone. Shapes are the reference's examples with
// Qwen2.5-0.5B dimensions (T = 1, 50, 2048 tokens; the LM head). Each optimised kernel is timed beside
// the seed kernel it replaces, with the speed-up; each result is also put against two ceilings measured
// in the same run: a large vec4 copy (achievable bandwidth) and a peak-FMA kernel (achievable f32 FLOP/s).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/profiler.h"
#include "kernels/dispatch.h"
#include "kernels/model.h"

namespace gerbil::kernels {

// Records `dispatch` as one timed dispatch labelled with its kernel name (e.g. for per-dispatch profiles
// of a model: record every prepared Dispatch this way instead of Dispatch::record).
void record_timed(gpu::GpuTimer& timer, gpu::Recorder& recorder, const Dispatch& dispatch);

namespace bench {

struct Options {
  // T = 1 shapes and a few T = 50 ones, fewer iterations: seconds on a CPU adapter instead of an hour.
  bool quick = false;
  // Only this kernel: a seed kernel runs with its variants, a variant beside its seed kernel. Empty: all.
  std::string kernel;
  // Only shapes whose name contains this text (e.g. "llama", "M=1 "). Empty: all.
  std::string shape;
  uint32_t iterations = 0;  // timed iterations per case; 0: up to 100 (quick: 10), fewer for slow cases
  // Extra rows for tuning, beside the fixed variants: f16 decode products at each of these blockings, bare
  // and with a fused norm (gate_up shapes also gated, as decoding runs them), f16 prompt products shared
  // out over each of these counts of workgroups.
  std::vector<MatvecBlocking> blockings;
  std::vector<uint32_t> split_workers;
  gpu::TimerClock clock = gpu::TimerClock::Auto;
};

// `--blocking` text, "C,S,U" or "C,S,U,W": columns per group, split, unroll and the most workgroups (the
// resident grid; without it a blocking given here runs one workgroup per unit), whole numbers (0 leaves one to
// the dispatcher). Throws naming the text otherwise.
MatvecBlocking parse_blocking(const std::string& text);

// Whether timings come from GPU timestamps (else from the host clock).
bool uses_timestamps(const gpu::Device& device, const Options& options);

enum class Metric { Gflops, Gbps };

// The achievable bandwidth and f32 FMA rate of this adapter, each measured by a kernel sized to run
// about a millisecond on a large GPU and scaled down on slow adapters.
struct Ceilings {
  double bandwidth_gbps = 0;  // (bytes read + bytes written) / time of the copy kernel
  double copy_bytes = 0;      // bytes read + written per iteration
  double copy_ms = 0;
  double gflops = 0;  // 2 * FMAs / time of the FMA kernel
  double fma_flops = 0;
  double fma_ms = 0;
  double floor_ms = 0;  // one empty dispatch, timed as the cases are: the fixed cost in every row
  double probe_ms = 0;  // the clock probe (see warm_until_at_speed) at the start

  double of(Metric metric) const { return metric == Metric::Gflops ? gflops : bandwidth_gbps; }
};

// One kernel at one shape.
struct Result {
  std::string kernel;   // "matmul", "linear", "silu+mul", ...
  std::string variant;  // "f16 matvec", ... (empty for most seed kernels)
  std::string shape;    // "q_proj M=1 K=896 N=896", "decode T=1 S=128", "T=50"
  std::string seed;     // the seed kernel this one is compared with; empty for a seed kernel
  std::string note;     // how the case differs from the named shape, if it does
  std::vector<std::string> dispatches;  // kernel and shapes of each dispatch of one iteration

  uint32_t iterations = 0;
  double ms = 0;       // per iteration: median over iterations (timestamps) or mean (host clock)
  double ms_mean = 0;  // per iteration
  double ms_min = 0;   // per iteration (the mean with the host clock, which only sees the total)

  Metric metric = Metric::Gflops;  // the reference's metric for this kernel
  double flops = 0;   // per iteration, 2 per multiply-add (attention: the reference's 2*T*S*d*heads)
  double bytes = 0;   // per iteration (the reference's formula where it has one, else bytes moved)
  double value = 0;   // GFLOPS or GB/s
  double ceiling_percent = 0;
  double speedup = 0;  // seed ms / ms; 0 for seed kernels or when the seed did not run

  double warming_s = 0;       // seconds spent probing (and loading) the GPU before the case
  double probe_slowdown = 0;  // the probe's time then / Ceilings::probe_ms (0: not probed, --quick)

  std::string error;    // set when the case could not run; the numbers are then 0
  std::string skipped;  // why a case that does not apply here (e.g. needs subgroups) was not timed
};

// Every kernel name --kernel accepts, seed kernels and variants, in table order.
std::vector<std::string> kernel_names();

// Throws when options.kernel names no kernel.
void check_options(const Options& options);

Ceilings measure_ceilings(gpu::Device& device, const Options& options);

// A GPU left idle lowers its clocks, and small kernels do not raise them again: on an H200, after the
// seconds the host spends generating a large embedding table, the SM clock fell from 1,980 to 345 MHz and
// stayed there through a minute of small cases, which then timed 2-3x slow (a T = 1 add 20 us against 7;
// run 76, clocks logged by nvidia-smi). So in a full run, once a case's inputs are made and right before it
// is timed, a probe (a 64 MiB copy, timed as the cases are) is compared with its time at the start,
// `baseline_ms`; while it is more than kWarmTolerance slower, the probe runs back to back for about 0.1 s of
// GPU time (a load that raises the clocks) and is timed again, for at most `max_s`.
constexpr double kWarmTolerance = 0.2;
struct Warmed {
  double warming_s = 0;  // time spent probing and loading the GPU
  double slowdown = 1;   // the last probe's time / baseline_ms
};
Warmed warm_until_at_speed(gpu::Device& device, std::span<const Dispatch> probe, double baseline_ms, bool timestamps,
                           double max_s);

// Runs every selected kernel at every shape, seed kernels first within a family, calling `done` after each
// case (for streaming output).
std::vector<Result> run(gpu::Device& device, const Options& options, const Ceilings& ceilings,
                        const std::function<void(const Result&)>& done = {});

nlohmann::json to_json(const gpu::Device& device, const Options& options, const Ceilings& ceilings,
                       const std::vector<Result>& results);

// Text output: a header (adapter, timing method, ceilings, column names) and one line per result.
std::string format_header(const gpu::Device& device, const Options& options, const Ceilings& ceilings);
std::string format_row(const Result& result);

}  // namespace bench
}  // namespace gerbil::kernels
