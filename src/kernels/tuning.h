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

// The launch choices that follow from a tuning (`gerbil tune` prints them), so that no GPU's figures are constants:
// - tiled_fill: the tile count from which a prompt product keeps linear_tiled.wgsl's larger tiles (kernels/model.cpp
//   linear_tile()): half a wave of resident tiles (where two fit on an SM, one a SM), rounded down to a power of
//   two as model widths and so tile counts are, so that a product of exactly that many tiles stays on the side the
//   half wave puts it (an H200: 264 resident tiles -> 128, the 128 fitted there; lavapipe, 1 -> 1).
// - prepared_norm_min_hidden: the hidden size from which decode steps prepare their RMSNorms' input in the product
//   before (graph/model.cpp). Preparing saves every workgroup of the next product its load of the norm weight and
//   costs a second output: fitted on the H200 (1,056 resident workgroups: pays at hidden 4,096, loses at 896), the
//   hidden size is taken to scale with the workgroups sharing a product, 4 a resident workgroup, rounded down to a
//   power of two (an H200: 4,224 -> 4,096; lavapipe, 1 -> 4: always).
uint32_t tiled_fill(uint32_t resident_tiles);
uint32_t prepared_norm_min_hidden(uint32_t resident_workgroups);

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
