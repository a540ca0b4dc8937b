// What a decode step's structure costs on this adapter, apart from the kernels' own work: steps of dependent
// dispatches in one compute pass, submitted back to back (as `gerbil bench model` runs decoding), timed on
// the host. Prints microseconds per dispatch and, for chains that read weights, GB/s:
// * touch chains: dispatches that do nothing but wait for the one before (WebGPU's barrier) and launch;
// * read chains: Llama-3-8B's decode step as plain streaming reads of its f16 projections (one dispatch per
//   product, 129), and the same bytes in one dispatch per layer (33): the floor a decode step's products
//   could reach with this many dispatches, and what merging them would be worth.
//   bench_dispatch_chain [SCALE]   (SCALE multiplies the bytes read; 1 = Llama-3-8B's sizes, 15 GB)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpu/device.h"

namespace {

using namespace gerbil;
using Clock = std::chrono::steady_clock;

// Every dispatch reads and writes `data`, so each waits for the one before (WebGPU's barrier).
constexpr const char* kTouch = R"(
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  if (lid == 0u) { data[wid.x] = data[wid.x] + 1.0; }
}
)";

// Streams `count` vec4s of src, a thread every `threads`-th, and stores only on an impossible sum (the buffers
// are zeros), so the loads stay; dst is written (read_write), so consecutive dispatches are ordered.
constexpr const char* kRead = R"(
struct Params { count: u32 }
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let threads = nwg.x * nwg.y * 256u;
  let first = (wid.x + wid.y * nwg.x) * 256u + lid;
  var acc = vec4<f32>(0.0);
  for (var i = first; i < params.count; i += threads) { acc += src[i]; }
  if (acc.x == 1234.5) { dst[first % 1024u] = acc.y; }
}
)";

struct Step {
  const gpu::Pipeline* pipeline;
  std::vector<gpu::BindGroup> groups;
  std::vector<gpu::Grid> grids;
};

double us_per_step(gpu::Device& device, const Step& step, int steps) {
  gpu::Recorder recorder(device, "chain");
  auto run = [&](int n) {
    for (int s = 0; s < n; ++s) {
      for (size_t d = 0; d < step.groups.size(); ++d) recorder.dispatch(*step.pipeline, step.groups[d], step.grids[d]);
      recorder.submit();
    }
    device.wait_idle();
  };
  run(3);
  auto start = Clock::now();
  run(steps);
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / steps;
}

Step touch_chain(gpu::Device& device, const gpu::Buffer& data, uint32_t dispatches, uint32_t workgroups) {
  Step step{&device.pipeline("touch", kTouch), {}, {}};
  for (uint32_t d = 0; d < dispatches; ++d) {
    gpu::BufferBinding binding{&data};
    step.groups.push_back(device.bind(*step.pipeline, std::span(&binding, 1)));
    step.grids.push_back({workgroups, 1, 1});
  }
  return step;
}

struct Reads {
  std::vector<gpu::Buffer> sources;
  std::vector<gpu::Buffer> params;
  Step step;
  double bytes = 0;
};

// One dispatch per entry of `sizes` (bytes), each over its own buffer.
Reads read_chain(gpu::Device& device, const gpu::Buffer& dst, const std::vector<uint64_t>& sizes) {
  Reads r;
  r.step.pipeline = &device.pipeline("read", kRead);
  r.sources.reserve(sizes.size());
  r.params.reserve(sizes.size());
  for (uint64_t size : sizes) {
    uint32_t count = uint32_t(size / 16);
    r.sources.push_back(device.create_buffer("src", uint64_t(count) * 16));
    uint32_t params[4] = {count, 0, 0, 0};
    r.params.push_back(device.upload("params", std::span<const uint32_t>(params), gpu::BufferKind::Uniform));
    gpu::BufferBinding bindings[3] = {{&r.sources.back()}, {&dst}, {&r.params.back()}};
    r.step.groups.push_back(device.bind(*r.step.pipeline, bindings));
    uint64_t workgroups = (count + 4 * 256 - 1) / (4 * 256);
    r.step.grids.push_back({uint32_t(std::min<uint64_t>(workgroups, 65535)), uint32_t((workgroups + 65534) / 65535), 1});
    r.bytes += double(count) * 16;
  }
  return r;
}

void report_reads(gpu::Device& device, const char* what, const Reads& r, int steps) {
  double us = us_per_step(device, r.step, steps);
  std::printf("%-58s %9.1f us/step %8.2f us/dispatch %8.1f GB/s (%zu dispatches, %.1f MB)\n", what, us,
              us / r.step.groups.size(), r.bytes / us / 1e3, r.step.groups.size(), r.bytes / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  gpu::Device device;
  std::printf("adapter: %s (%s)\n", device.adapter().device.c_str(), device.adapter().backend.c_str());
  gpu::Buffer data = device.create_buffer("data", 4 * 4096);
  for (uint32_t workgroups : {1u, 132u, 1056u, 4096u}) {
    for (uint32_t n : {16u, 164u}) {
      double us = us_per_step(device, touch_chain(device, data, n, workgroups), 50);
      std::printf("touch chain: %3u dispatches of %4u workgroups   %9.1f us/step %8.2f us/dispatch\n", n, workgroups,
                  us, us / n);
    }
  }
  auto mb = [&](double bytes) { return uint64_t(bytes * scale) / 16 * 16; };
  // Llama-3-8B f16 per layer: q|k|v, o, gate|up, down; then the LM head.
  const double layer[4] = {4096.0 * 6144 * 2, 4096.0 * 4096 * 2, 4096.0 * 28672 * 2, 14336.0 * 4096 * 2};
  std::vector<uint64_t> step_sizes;
  for (int l = 0; l < 32; ++l)
    for (double bytes : layer) step_sizes.push_back(mb(bytes));
  step_sizes.push_back(mb(4096.0 * 128256 * 2));
  gpu::Buffer dst = device.create_buffer("dst", 4 * 1024);
  {
    Reads r = read_chain(device, dst, step_sizes);
    report_reads(device, "read chain: Llama-3-8B's 129 projections", r, 20);
    // The same bytes in fewer, larger dispatches (the products of a layer merged).
    std::vector<uint64_t> merged;
    for (int l = 0; l < 32; ++l) merged.push_back(mb(layer[0] + layer[1] + layer[2] + layer[3]));
    merged.push_back(mb(4096.0 * 128256 * 2));
    Reads m = read_chain(device, dst, merged);
    report_reads(device, "read chain: one dispatch per layer (same bytes)", m, 20);
  }
  device.check_errors();
  return 0;
}
