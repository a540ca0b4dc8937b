// What every kernel dispatcher shares: compiling an embedded WGSL kernel, checking that the bound
// buffers are large enough for the shapes, and packaging pipeline + bind group + grid + uniform params
// into a Dispatch that can be recorded any number of times (a graph prepares its dispatches once).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/device.h"

namespace gerbil::kernels {

using gpu::BufferBinding;
using gpu::Grid;

constexpr uint32_t kWorkgroupSize = 256;  // threads per workgroup of the 1-D and row kernels

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
// Elements of an a x b operand, in 64 bits.
inline uint64_t count_of(uint64_t a, uint64_t b) { return a * b; }

// Folds a 1-D workgroup count into (x, y) so neither exceeds the per-dimension limit; shaders recover
// the linear index as wid.x + wid.y * num_workgroups.x and skip indices past the end.
Grid fold(uint64_t workgroups, uint32_t max_per_dimension = 65535);

// The embedded WGSL source of kernel `name`; throws if there is none.
std::string_view wgsl(std::string_view name);
// The source a pipeline of kernel `name` with these override constants compiles: wgsl(name), with the level table
// (include/blocks.wgsl) in workgroup memory where WEIGHT_TYPE is IQ4_NL, IQ4_XS, IQ3_XXS or IQ3_S.
std::string_view wgsl_for(std::string_view name, const gpu::Constants& constants);
const gpu::Pipeline& pipeline(gpu::Device& device, std::string_view name, const gpu::Constants& constants = {});

// A recordable dispatch of one kernel with its bindings and parameters.
struct Dispatch {
  std::string kernel;
  std::string shapes;  // human-readable, e.g. "M=1 K=896 N=151936"
  const gpu::Pipeline* pipeline = nullptr;
  gpu::BindGroup bind_group;
  Grid grid;
  // Where the kernel's uniform struct lies (none for a kernel without one): a buffer of the dispatch's own, or a
  // range of the UniformArena open when it was prepared.
  BufferBinding params;
  std::shared_ptr<gpu::Buffer> own_params;  // the buffer `params` lies in, where the dispatch owns it

  void record(gpu::Recorder& recorder) const { recorder.dispatch(*pipeline, bind_group, grid); }
  // Rewrites the uniform struct (the same size) for the next time the dispatch runs.
  void write_params(gpu::Device& device, std::span<const std::byte> bytes) const {
    device.write(*params.buffer, bytes, params.offset);
  }
};

// The uniform structs of many dispatches (a step graph's) as ranges of a few shared buffers: creating a buffer is
// most of what preparing a dispatch costs, and a graph prepares hundreds. While a Scope is open on a thread,
// prepare() takes every uniform from that arena, which must outlive the dispatches.
class UniformArena {
 public:
  // The next range for BYTES, at the adapter's uniform offset alignment, holding them.
  BufferBinding allocate(gpu::Device& device, std::span<const std::byte> bytes);
  // The most bytes an arena on DEVICE takes for COUNT uniform structs (of at most 48 bytes each, as the kernels' are).
  static uint64_t bytes_for(const gpu::Device& device, uint64_t count);
  class Scope {
   public:
    explicit Scope(UniformArena& arena);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    UniformArena* previous_;
  };

 private:
  static constexpr uint64_t kChunkBytes = 64 << 10;
  static uint64_t alignment(const gpu::Device& device);
  std::deque<gpu::Buffer> chunks_;
  uint64_t used_ = kChunkBytes;  // bytes of the last chunk taken
};

// One storage binding and the number of elements (of `element_bytes` each) the kernel will touch.
struct Operand {
  std::string_view name;
  BufferBinding binding;
  uint64_t elements;
  uint32_t element_bytes = 4;
};

// Checks every operand against its buffer range, uploads `params` as the uniform struct (bound after
// the storage bindings, as every kernel's layout has it; none where `params` is empty) and creates the bind group.
Dispatch prepare(gpu::Device& device, std::string_view kernel, std::string shapes, std::span<const Operand> operands,
                 std::span<const std::byte> params, Grid grid, const gpu::Constants& constants = {});

template <typename Params>
Dispatch prepare(gpu::Device& device, std::string_view kernel, std::string shapes,
                 std::initializer_list<Operand> operands, const Params& params, Grid grid,
                 const gpu::Constants& constants = {}) {
  return prepare(device, kernel, std::move(shapes), std::span<const Operand>(operands.begin(), operands.size()),
                 std::as_bytes(std::span<const Params>(&params, 1)), grid, constants);
}
// The same for operands built at run time.
template <typename Params>
Dispatch prepare(gpu::Device& device, std::string_view kernel, std::string shapes, const std::vector<Operand>& operands,
                 const Params& params, Grid grid, const gpu::Constants& constants = {}) {
  return prepare(device, kernel, std::move(shapes), std::span<const Operand>(operands),
                 std::as_bytes(std::span<const Params>(&params, 1)), grid, constants);
}

// Records and submits one dispatch, or several in order in one pass (tests, selftest, one-off work).
void run(gpu::Device& device, const Dispatch& dispatch);
void run(gpu::Device& device, std::span<const Dispatch> dispatches);

}  // namespace gerbil::kernels
