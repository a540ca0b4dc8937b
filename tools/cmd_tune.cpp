// gerbil tune: measure the adapter's figures the kernels' launch rules use (kernels/tuning.h) again, keep them
// in the cache folder, and print them.
#include <chrono>
#include <cstdio>

#include "command.h"
#include "gpu/device.h"
#include "kernels/tuning.h"

namespace gerbil::cli {
namespace {

GERBIL_COMMAND("tune", "Measure this adapter's tuning (resident workgroups) again and keep it", [](CLI::App& app) {
  auto adapter = std::make_shared<std::string>();
  app.add_option("--adapter", *adapter, "WebGPU adapter (substring of its name; default: $GERBIL_ADAPTER)");
  return [adapter] {
    gpu::Device device({.adapter = *adapter});
    const auto& tuning = kernels::retune(device);
    auto file = kernels::tuning_file(device.adapter());
    std::printf("adapter: %s\n", device.adapter().summary().c_str());
    std::printf("resident workgroups (256 invocations): %u\n", tuning.resident_workgroups);
    std::printf("resident linear_tiled workgroups: %u\n", tuning.resident_tiles);
    std::printf("prompt products keep their large tiles at %u tiles and more\n",
                kernels::tiled_fill(tuning.resident_tiles));
    std::printf("decode steps prepare RMSNorm inputs from hidden size %u (--prepared-norms auto)\n",
                kernels::prepared_norm_min_hidden(tuning.resident_workgroups));
    std::printf("measured in %.0f ms; kept in %s\n", tuning.probe_seconds * 1000,
                file.empty() ? "(no cache folder: not kept)" : file.c_str());
    return 0;
  };
});

}  // namespace
}  // namespace gerbil::cli
