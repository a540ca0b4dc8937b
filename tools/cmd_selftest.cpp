// gerbil selftest: every kernel against its float64 CPU reference, on this adapter, on fresh random inputs.
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "command.h"
#include "gpu/device.h"
#include "checks/selftest.h"

namespace gerbil::cli {
namespace {

struct SelftestOptions {
  bool json = false, quick = false, verbose = false;
  std::string kernel, adapter;
  uint64_t seed = 0;
};

int selftest(const SelftestOptions& options) {
  uint64_t seed = options.seed ? options.seed
                               : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  gpu::Device device({.adapter = options.adapter});
  nlohmann::json report = {{"adapter", device.adapter().summary()}, {"seed", seed}, {"kernels", nlohmann::json::array()}};
  if (!options.json) std::printf("adapter: %s\nseed: %llu\n", device.adapter().summary().c_str(), (unsigned long long)seed);
  int checked = 0, failed = 0, skipped = 0;
  for (const auto& check : kernels::kernel_checks(options.quick)) {
    if (!options.kernel.empty() && check.kernel != options.kernel) continue;
    ++checked;
    if (std::string missing = kernels::missing_feature(device, check); !missing.empty()) {
      ++skipped;
      std::string why = "the adapter lacks " + missing;
      report["kernels"].push_back({{"kernel", check.kernel}, {"skipped", why}});
      if (!options.json) std::printf("SKIP %-12s %s\n", check.kernel.c_str(), why.c_str());
      continue;
    }
    double worst = 0;
    std::string worst_shape, error;
    bool ok = true;
    nlohmann::json cases = nlohmann::json::array();
    try {
      for (const auto& result : kernels::run_check(device, check, seed)) {
        cases.push_back({{"shape", result.shape}, {"relative_error", result.relative_error}, {"passed", result.passed()}});
        if (!result.passed() || result.relative_error > worst) {
          if (ok) worst = result.relative_error, worst_shape = result.shape;
        }
        ok = ok && result.passed();
        if (options.verbose && !options.json)
          std::printf("  %-12s %-50s %.3g\n", check.kernel.c_str(), result.shape.c_str(), result.relative_error);
      }
    } catch (const std::exception& e) {
      ok = false;
      error = e.what();
    }
    failed += ok ? 0 : 1;
    report["kernels"].push_back({{"kernel", check.kernel}, {"passed", ok}, {"worst_relative_error", worst},
                                 {"worst_shape", worst_shape}, {"bound", check.bound}, {"why", check.why},
                                 {"cases", cases}, {"error", error}});
    if (options.json) continue;
    if (!error.empty())
      std::printf("FAIL %-12s %s\n", check.kernel.c_str(), error.c_str());
    else
      std::printf("%s %-12s worst rel. error %.2e (bound %.0e) over %zu shapes%s%s\n", ok ? "PASS" : "FAIL",
                  check.kernel.c_str(), worst, check.bound, cases.size(), ok ? "" : " at ", ok ? "" : worst_shape.c_str());
  }
  if (checked == 0) {
    std::fprintf(stderr, "gerbil: no kernel named '%s'\n", options.kernel.c_str());
    return 2;
  }
  int run = checked - skipped;
  report["passed"] = run - failed;
  report["failed"] = failed;
  report["skipped"] = skipped;
  if (options.json)
    std::printf("%s\n", report.dump(2).c_str());
  else
    std::printf("%d/%d kernels passed%s\n", run - failed, run,
                skipped ? fmt::format(", {} skipped (features the adapter lacks)", skipped).c_str() : "");
  return failed == 0 ? 0 : 1;
}

GERBIL_COMMAND("selftest", "Check every kernel against its float64 CPU reference on this adapter", [](CLI::App& app) {
  auto options = std::make_shared<SelftestOptions>();
  app.add_flag("--json", options->json, "Print JSON");
  app.add_flag("--quick", options->quick, "Skip the largest shapes");
  app.add_flag("-v,--verbose", options->verbose, "Print every shape's error");
  app.add_option("--kernel", options->kernel, "Check only this kernel");
  app.add_option("--seed", options->seed, "Random seed (default: fresh each run)");
  app.add_option("--adapter", options->adapter, "Adapter to use (substring of its name; default: $GERBIL_ADAPTER)");
  return [options] { return selftest(*options); };
});

}  // namespace
}  // namespace gerbil::cli
