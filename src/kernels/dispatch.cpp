#include "kernels/dispatch.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "gerbil/error.h"
#include "kernels/model.h"
#include "kernels/wgsl_sources.h"

namespace gerbil::kernels {

Grid fold(uint64_t workgroups, uint32_t max_per_dimension) {
  if (workgroups <= max_per_dimension) return {static_cast<uint32_t>(std::max<uint64_t>(workgroups, 1)), 1, 1};
  uint64_t y = ceil_div(workgroups, max_per_dimension);
  if (y > max_per_dimension) fail("dispatch of {} workgroups is too large even when folded", workgroups);
  return {max_per_dimension, static_cast<uint32_t>(y), 1};
}

std::string_view wgsl(std::string_view name) {
  const auto& sources = wgsl_sources();
  auto found = sources.find(name);
  if (found == sources.end()) fail("no WGSL kernel named '{}' is built in", name);
  return found->second;
}

std::string_view wgsl_for(std::string_view name, const gpu::Constants& constants) {
  constexpr std::string_view kPrivate = "var<private> level_table", kWorkgroup = "var<workgroup> level_table";
  std::string_view source = wgsl(name);
  auto type = std::find_if(constants.begin(), constants.end(), [](const auto& c) { return c.first == "WEIGHT_TYPE"; });
  bool levels = type != constants.end() && type->second >= double(WeightType::IQ4_NL) &&
                type->second <= double(WeightType::IQ3_S);
  if (!levels) return source;  // every other pipeline, before any search of its source
  size_t at = source.find(kPrivate);
  if (at == std::string_view::npos) return source;
  static std::mutex mutex;
  static std::map<std::string, std::string, std::less<>> rewritten;  // by kernel name; kept for the process
  std::lock_guard lock(mutex);
  auto found = rewritten.find(name);
  if (found == rewritten.end()) {
    std::string text(source);
    text.replace(at, kPrivate.size(), kWorkgroup);
    found = rewritten.emplace(std::string(name), std::move(text)).first;
  }
  return found->second;
}

const gpu::Pipeline& pipeline(gpu::Device& device, std::string_view name, const gpu::Constants& constants) {
  return device.pipeline(std::string(name), wgsl_for(name, constants), constants);
}

namespace {
thread_local UniformArena* open_arena = nullptr;  // the arena of the Scope open on this thread
}  // namespace

UniformArena::Scope::Scope(UniformArena& arena) : previous_(open_arena) { open_arena = &arena; }
UniformArena::Scope::~Scope() { open_arena = previous_; }

uint64_t UniformArena::alignment(const gpu::Device& device) {
  return std::max<uint64_t>(16, device.limits().minUniformBufferOffsetAlignment);
}

uint64_t UniformArena::bytes_for(const gpu::Device& device, uint64_t count) {
  // Each a range of at least 48 bytes at the alignment, and the last chunk's slack.
  return count * std::max<uint64_t>(48, alignment(device)) + kChunkBytes;
}

BufferBinding UniformArena::allocate(gpu::Device& device, std::span<const std::byte> bytes) {
  const uint64_t align = alignment(device);
  uint64_t offset = (used_ + align - 1) / align * align;
  if (bytes.size() > kChunkBytes) fail("a uniform struct of {} bytes exceeds the arena's chunks", bytes.size());
  if (offset + bytes.size() > kChunkBytes) {
    chunks_.push_back(device.create_buffer("uniforms", kChunkBytes, gpu::BufferKind::Uniform));
    offset = 0;
  }
  used_ = offset + bytes.size();
  device.write(chunks_.back(), bytes, offset);
  return {&chunks_.back(), offset, bytes.size()};
}

Dispatch prepare(gpu::Device& device, std::string_view kernel, std::string shapes, std::span<const Operand> operands,
                 std::span<const std::byte> params, Grid grid, const gpu::Constants& constants) {
  for (const Operand& operand : operands) {
    const gpu::Buffer* buffer = operand.binding.buffer;
    // Buffers made while collecting pipelines are stand-ins with no GPU memory.
    if (!buffer || (!*buffer && !device.collecting())) fail("kernel '{}' ({}): operand '{}' has no buffer", kernel, shapes, operand.name);
    uint64_t available = operand.binding.bytes();
    uint64_t needed = operand.elements * operand.element_bytes;
    if (operand.elements == 0) fail("kernel '{}' ({}): operand '{}' is empty", kernel, shapes, operand.name);
    if (needed > available)
      fail("kernel '{}' ({}): operand '{}' needs {} elements ({} bytes) but buffer '{}' provides {} bytes", kernel,
           shapes, operand.name, operand.elements, needed, buffer->label(), available);
    if (operand.binding.offset + available > buffer->size() + 3)
      fail("kernel '{}' ({}): operand '{}' range [{}, +{}) lies outside buffer '{}' of {} bytes", kernel, shapes,
           operand.name, operand.binding.offset, available, buffer->label(), buffer->size());
  }
  Dispatch dispatch;
  dispatch.kernel = kernel;
  dispatch.shapes = std::move(shapes);
  dispatch.pipeline = &pipeline(device, kernel, constants);
  dispatch.grid = grid;
  std::vector<BufferBinding> bindings;
  for (const Operand& operand : operands) bindings.push_back(operand.binding);
  if (!params.empty()) {  // a kernel whose settings all lie in storage (sample) has no uniform
    // Uniform buffers are bound in 16-byte units.
    std::vector<std::byte> padded((params.size() + 15) / 16 * 16);
    std::copy(params.begin(), params.end(), padded.begin());
    if (open_arena) {
      dispatch.params = open_arena->allocate(device, padded);
    } else {
      dispatch.own_params = std::make_shared<gpu::Buffer>(
          device.create_buffer(std::string(kernel) + " params", padded.size(), gpu::BufferKind::Uniform));
      device.write<std::byte>(*dispatch.own_params, padded);
      dispatch.params = {dispatch.own_params.get(), 0, padded.size()};
    }
    bindings.push_back(dispatch.params);
  }
  dispatch.bind_group = device.bind(*dispatch.pipeline, bindings);
  return dispatch;
}

void run(gpu::Device& device, const Dispatch& dispatch) { run(device, std::span(&dispatch, 1)); }

void run(gpu::Device& device, std::span<const Dispatch> dispatches) {
  if (dispatches.empty()) return;
  gpu::Recorder recorder(device, dispatches.front().kernel);
  for (const Dispatch& dispatch : dispatches) dispatch.record(recorder);
  recorder.submit();
}

}  // namespace gerbil::kernels
