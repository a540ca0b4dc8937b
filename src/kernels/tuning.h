// Figures of the adapter that the kernels' launch rules need and WebGPU does not report (how many workgroups
// the GPU runs at once), measured by a short probe on first use and kept per adapter in
// cache_dir()/tuning-<adapter key>.json (`gerbil tune` measures again).
#pragma once

#include <filesystem>
#include <string>

#include "gpu/device.h"

namespace gerbil::kernels {

using gpu::Tuning;

// A file-name-safe key for the adapter: its vendor and device ids, backend and a hash of its names and driver.
std::string adapter_key(const gpu::AdapterInfo& adapter);
// Where the adapter's tuning is kept; empty where there is no cache folder (gpu::cache_dir()).
std::filesystem::path tuning_file(const gpu::AdapterInfo& adapter);

// Runs the probe (well under 2 s on a GPU; a few rounds on a CPU adapter): times 256-invocation workgroups that
// each hold the GPU for a while, at counts doubling until a second wave shows, then bisects to the count
// where it starts. That count is resident_workgroups; resident_tiles, for linear_tiled.wgsl (whose 256
// invocations hold 64 accumulators each), a quarter of it (the register file holds a quarter as many).
Tuning probe_tuning(gpu::Device& device);

// The tuning file's JSON; read_tuning throws naming the file and what is wrong with it.
void write_tuning(const std::filesystem::path& file, const gpu::AdapterInfo& adapter, const Tuning& tuning);
Tuning read_tuning(const std::filesystem::path& file);

// The device's tuning: set on it already, else read from its file, else probed (and written). A file that
// cannot be read is reported on stderr and measured again, never an error. (Measuring dispatches on the
// device, but changes nothing a caller sees: the launch rules that ask for it hold a const device.)
const Tuning& tuning(const gpu::Device& device);
// Probes again and rewrites the file (`gerbil tune`).
const Tuning& retune(gpu::Device& device);

}  // namespace gerbil::kernels
