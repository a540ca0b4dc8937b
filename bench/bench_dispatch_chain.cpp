// What a decode step's structure costs on this adapter, apart from the kernels' own work: steps of dependent
// dispatches in one compute pass, submitted back to back (as `gerbil bench model` runs decoding), timed on
// the host. Prints microseconds per dispatch and, for chains that read weights, GB/s:
// * touch chains: dispatches that do nothing but wait for the one before (WebGPU's barrier) and launch;
// * read chains: Llama-3-8B's decode step as plain streaming reads of its f16 projections (one dispatch per
//   product, 129), also with each dispatch's grid capped (threads looping over the rest), and the same bytes
//   in one dispatch per layer (33): the floor a decode step's products could reach with this many
//   dispatches, and what merging them would be worth. Needs twice the bytes in GPU memory (30 GB at SCALE 1);
// * block chains: the same 129 dispatches with each workgroup streaming contiguous blocks (as a decode
//   product's workgroup streams its rows) of 128 or 16 KB, one workgroup per block or a capped grid looping
//   over them: why linear_matvec_sg decodes Llama-sized rows over 1,056 resident workgroups (runs 67, 69).
//   bench_dispatch_chain [SCALE]   (SCALE multiplies the bytes read; 1 = Llama-3-8B's sizes, 15 GB)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

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

// Streams `count` vec4s of src and stores only on an impossible sum (the buffers are zeros), so the loads stay;
// dst is written (read_write), so consecutive dispatches are ordered. With `blocks` 0 a thread reads every
// `threads`-th vec4; else src is read in `blocks` contiguous blocks (as a decode product's workgroup streams its
// rows), workgroup w taking blocks w, w + G, w + 2G, ... for a grid of G, so a grid smaller than `blocks`
// stays resident and slides over the buffer.
constexpr const char* kRead = R"(
struct Params { count: u32, blocks: u32 }
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let id = wid.x + wid.y * nwg.x;
  var acc = vec4<f32>(0.0);
  if (params.blocks == 0u) {
    for (var i = id * 256u + lid; i < params.count; i += nwg.x * nwg.y * 256u) { acc += src[i]; }
  } else {
    let per = (params.count + params.blocks - 1u) / params.blocks;
    for (var b = id; b < params.blocks; b += nwg.x * nwg.y) {
      let end = min(b * per + per, params.count);
      for (var i = b * per + lid; i < end; i += 256u) { acc += src[i]; }
    }
  }
  if (acc.x == 1234.5) { dst[id % 1024u] = acc.y; }
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

// One buffer per entry of `sizes` (bytes) to stream, one dispatch each.
struct Reads {
  std::vector<gpu::Buffer> sources;
  std::vector<gpu::Buffer> params;
  std::vector<uint32_t> counts;  // vec4s per source
  double bytes = 0;
};

Reads make_reads(gpu::Device& device, const std::vector<uint64_t>& sizes) {
  Reads r;
  r.sources.reserve(sizes.size());
  r.params.reserve(sizes.size());
  for (uint64_t size : sizes) {
    uint32_t count = uint32_t(size / 16);
    r.sources.push_back(device.create_buffer("src", uint64_t(count) * 16));
    uint32_t params[4] = {count, 0, 0, 0};  // blocks 0: strided
    r.params.push_back(device.upload("params", std::span<const uint32_t>(params), gpu::BufferKind::Uniform));
    r.counts.push_back(count);
    r.bytes += double(count) * 16;
  }
  return r;
}

// The dispatches over `r`: one workgroup per 1,024 vec4s (four per thread), at most `max_workgroups` (0: no cap;
// the threads then loop over the rest).
Step read_step(gpu::Device& device, const Reads& r, const gpu::Buffer& dst, uint64_t max_workgroups) {
  Step step{&device.pipeline("read", kRead), {}, {}};
  for (size_t i = 0; i < r.sources.size(); ++i) {
    gpu::BufferBinding bindings[3] = {{&r.sources[i]}, {&dst}, {&r.params[i]}};
    step.groups.push_back(device.bind(*step.pipeline, bindings));
    uint64_t workgroups = (r.counts[i] + 4 * 256 - 1) / (4 * 256);
    if (max_workgroups) workgroups = std::min(workgroups, max_workgroups);
    step.grids.push_back({uint32_t(std::min<uint64_t>(workgroups, 65535)), uint32_t((workgroups + 65534) / 65535), 1});
  }
  return step;
}

// The dispatches over `r` in kRead's block layout: blocks of `block_bytes`, over at most `max_workgroups` (0: one
// per block).
Step block_step(gpu::Device& device, const Reads& r, const gpu::Buffer& dst, std::vector<gpu::Buffer>& params,
                uint64_t block_bytes, uint32_t max_workgroups) {
  Step step{&device.pipeline("read", kRead), {}, {}};
  for (size_t i = 0; i < r.sources.size(); ++i) {
    uint32_t blocks = uint32_t((uint64_t(r.counts[i]) * 16 + block_bytes - 1) / block_bytes);
    uint32_t values[2] = {r.counts[i], blocks};
    params.push_back(device.upload("params", std::span<const uint32_t>(values), gpu::BufferKind::Uniform));
    gpu::BufferBinding bindings[3] = {{&r.sources[i]}, {&dst}, {&params.back()}};
    step.groups.push_back(device.bind(*step.pipeline, bindings));
    uint32_t workgroups = max_workgroups ? std::min(blocks, max_workgroups) : blocks;
    step.grids.push_back({std::min<uint32_t>(workgroups, 65535), (workgroups + 65534) / 65535, 1});
  }
  return step;
}

void report_reads(gpu::Device& device, const std::string& what, const Reads& r, const Step& step, int steps) {
  double us = us_per_step(device, step, steps);
  std::printf("%-62s %9.1f us/step %8.2f us/dispatch %8.1f GB/s (%zu dispatches, %.1f MB)\n", what.c_str(), us,
              us / step.groups.size(), r.bytes / us / 1e3, step.groups.size(), r.bytes / 1e6);
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
  // Both sets of buffers are made before any is timed and freed only at the end: chains over buffers made
  // right after another set of 15 GB was freed read at a fraction of the speed on an H200 (runs 58-63).
  Reads r = make_reads(device, step_sizes);
  std::vector<uint64_t> merged;  // the same bytes in fewer, larger dispatches (the products of a layer merged)
  for (int l = 0; l < 32; ++l) merged.push_back(mb(layer[0] + layer[1] + layer[2] + layer[3]));
  merged.push_back(mb(4096.0 * 128256 * 2));
  Reads m = make_reads(device, merged);
  report_reads(device, "read chain: Llama-3-8B's 129 projections", r, read_step(device, r, dst, 0), 20);
  // The same dispatches over at most this many workgroups, each thread looping over more of its product.
  for (uint64_t cap : {264u, 1056u, 2112u, 4224u})
    report_reads(device, fmt::format("read chain: 129 projections, at most {} workgroups each", cap), r,
                 read_step(device, r, dst, cap), 20);
  report_reads(device, "read chain: one dispatch per layer (same bytes)", m, read_step(device, m, dst, 0), 20);
  report_reads(device, "read chain: one dispatch per layer, at most 1056 workgroups", m,
               read_step(device, m, dst, 1056), 20);
  // Each workgroup streaming contiguous blocks, one per workgroup or a resident grid sliding over them.
  std::vector<gpu::Buffer> params;
  params.reserve(r.sources.size() * 8);  // one per dispatch below, never moved
  for (uint64_t block_kb : {128u, 16u})
    for (uint32_t cap : {0u, 264u, 528u, 1056u})
      report_reads(device,
                   cap ? fmt::format("block chain: {} KB blocks, at most {} workgroups", block_kb, cap)
                       : fmt::format("block chain: {} KB blocks, one workgroup each", block_kb),
                   r, block_step(device, r, dst, params, block_kb << 10, cap), 20);
  device.check_errors();
  return 0;
}
