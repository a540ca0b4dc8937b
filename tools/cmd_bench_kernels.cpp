// gerbil bench kernels: times every kernel at the reference's shapes (Qwen2.5-0.5B, T = 1, 50, 2048, the
// LM head), each optimised kernel beside the seed kernel it replaces, against the adapter's measured
// bandwidth and FMA ceilings. See checks/benchmark.h for the method.
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.h"
#include "gpu/device.h"
#include "gpu/profiler.h"
#include "checks/benchmark.h"
#include "toggle_options.h"

namespace gerbil::cli {
namespace {

struct BenchKernelsOptions {
  kernels::bench::Options bench;
  std::vector<std::string> blockings;  // "C,S,U" as typed
  bool json = false;
  std::string adapter;
  std::vector<std::string> enable_toggles, disable_toggles;
};

int bench_kernels(const BenchKernelsOptions& options) {
  namespace bench = kernels::bench;
  bench::Options bench_options = options.bench;
  for (const std::string& text : options.blockings) bench_options.blockings.push_back(bench::parse_blocking(text));
  bench::check_options(bench_options);
  gpu::DeviceOptions device_options{.adapter = options.adapter,
                                    .enable_toggles = options.enable_toggles,
                                    .disable_toggles = options.disable_toggles};
  gpu::request_precise_timestamps(device_options);
  gpu::Device device(device_options);
  bench::Ceilings ceilings = bench::measure_ceilings(device, bench_options);
  // The toggles the device was created with: the user's and the precise timestamps' own.
  nlohmann::json toggles = {{"enabled", device_options.enable_toggles}, {"disabled", device_options.disable_toggles}};
  if (!options.json) {
    fmt::print("toggles:  enabled [{}], disabled [{}]\n", fmt::join(device_options.enable_toggles, ", "),
               fmt::join(device_options.disable_toggles, ", "));
    std::printf("%s", bench::format_header(device, bench_options, ceilings).c_str());
  }
  bool failed = false;
  auto results = bench::run(device, bench_options, ceilings, [&](const bench::Result& result) {
    failed = failed || !result.error.empty();
    if (options.json) return;
    std::printf("%s", bench::format_row(result).c_str());
    std::fflush(stdout);
  });
  if (options.json) {
    nlohmann::json json = bench::to_json(device, bench_options, ceilings, results);
    json["toggles"] = toggles;
    std::printf("%s\n", json.dump(2).c_str());
  }
  return failed ? 1 : 0;
}

GERBIL_COMMAND("bench kernels", "Time every kernel beside the seed kernel it replaces, against measured ceilings",
               [](CLI::App& app) {
                 auto options = std::make_shared<BenchKernelsOptions>();
                 app.add_flag("--json", options->json, "Print JSON (all numbers, adapter, ceilings)");
                 app.add_option("--kernel", options->bench.kernel,
                                "Only this kernel (a seed kernel with its variants, a variant beside its seed)");
                 app.add_option("--shape", options->bench.shape,
                                "Only shapes whose name contains this text (e.g. llama, \"M=1 \")");
                 app.add_option("--blocking", options->blockings,
                                "Also time f16 decode products at this blocking, COLUMNS,SPLIT,UNROLL[,WORKGROUPS] "
                                "(repeatable; 0 leaves one to the dispatcher; WORKGROUPS caps the grid, its "
                                "workgroups looping over the rest), block-quantized ones (Q4_0, Q4_K) at COLUMNS a "
                                "team of SPLIT lanes, UNROLL chunks a lane in flight (1 or 2), and batched decode steps "
                                "(f16 and Q4_0, 5 to 16 rows) at COLUMNS a thread, SPLIT columns a slice of k, UNROLL "
                                "pieces a slice a step, WORKGROUPS teams a workgroup");
                 app.add_option("--split-workers", options->bench.split_workers,
                                "Also time f16 prompt products with their work shared out over this many "
                                "workgroups (repeatable)")
                     ->check(CLI::Range(1u, 4096u));
                 app.add_flag("--quick", options->bench.quick, "Decode shapes and a few T = 50 ones, fewer iterations");
                 app.add_option("--iterations", options->bench.iterations,
                                "Timed iterations per case (default: up to 100, --quick 10, fewer for slow cases)")
                     ->check(CLI::Range(1u, 1000000u));
                 app.add_option("--adapter", options->adapter,
                                "Adapter to use (substring of its name; default: $GERBIL_ADAPTER)");
                 add_toggle_options(app, options->enable_toggles, options->disable_toggles);
                 return [options] { return bench_kernels(*options); };
               });

}  // namespace
}  // namespace gerbil::cli
