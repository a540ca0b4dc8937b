// A thin, honest layer over Dawn's WebGPU C API: one Device (adapter choice, limits, features, error
// reporting), labelled buffers with upload and read-back, a pipeline cache, bind groups, and a Recorder
// that puts many dispatches into one compute pass and one submit.
//
// Every WebGPU error becomes a gerbil::Error: object creation runs inside error scopes, and errors that
// surface later (an invalid command buffer at submit, device loss) are collected by the device's
// callbacks and thrown by the next check_errors(), which submit() and every read-back call.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gerbil/error.h"
#include "gpu/disk_cache.h"
#include "gpu/handle.h"
#include "gpu/webgpu_abi.h"

namespace gerbil::gpu {

using InstanceHandle = Handle<WGPUInstance, wgpuInstanceRelease>;
using AdapterHandle = Handle<WGPUAdapter, wgpuAdapterRelease>;
using DeviceHandle = Handle<WGPUDevice, wgpuDeviceRelease>;
using QueueHandle = Handle<WGPUQueue, wgpuQueueRelease>;
using BufferHandle = Handle<WGPUBuffer, wgpuBufferRelease>;
using PipelineHandle = Handle<WGPUComputePipeline, wgpuComputePipelineRelease>;
using BindGroupLayoutHandle = Handle<WGPUBindGroupLayout, wgpuBindGroupLayoutRelease>;
using BindGroupHandle = Handle<WGPUBindGroup, wgpuBindGroupRelease>;
using QuerySetHandle = Handle<WGPUQuerySet, wgpuQuerySetRelease>;

// What creating a buffer throws when the GPU has no memory left for it (a WebGPU out-of-memory error), apart
// from other errors so that a caller sizing something to the memory (the KV cache) can ask for less.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

struct AdapterInfo {
  std::string vendor;
  std::string architecture;
  std::string device;
  std::string description;
  std::string backend;       // "Vulkan", "Metal", "D3D12", ...
  std::string adapter_type;  // "discrete GPU", "integrated GPU", "CPU", "unknown"
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  uint32_t subgroup_min_size = 0;
  uint32_t subgroup_max_size = 0;

  std::string summary() const;  // one line: device, vendor, backend, type
};

// The optional features gerbil uses, as enabled on the device.
struct Features {
  bool shader_f16 = false;
  bool subgroups = false;
  bool timestamp_query = false;
  bool subgroup_matrix = false;  // chromium-experimental-subgroup-matrix (reported, not requested)
};

struct DeviceOptions {
  // Case-insensitive substring of the adapter's vendor/device/description/backend. Empty: the
  // GERBIL_ADAPTER environment variable, else the first adapter (high-performance first).
  std::string adapter;
  bool allow_shader_f16 = true;  // false forces the f16 fallback paths, for tests on adapters that have it
  bool allow_subgroups = true;   // false forces the kernels' workgroup-memory fallbacks, likewise
  std::vector<std::string> enable_toggles;   // Dawn toggles, e.g. "skip_validation"
  std::vector<std::string> disable_toggles;  // e.g. "lazy_clear_resource_on_first_use"
  // Keep Dawn's compiled shaders and pipelines in cache_dir()/dawn, so a later process skips compiling them.
  bool disk_cache = true;
  // The most bytes gerbil's buffers may hold at once in this device's memory (buffer_bytes()); 0: as much as the
  // GPU gives. A buffer past it is refused with OutOfMemory, as the GPU refuses one when its memory is full, so
  // what sizes itself to the memory (a model's default context) stays within it: for a GPU shared with others.
  uint64_t memory_limit = 0;
};

// Lists every adapter Dawn offers (one line each), for error messages and `gerbil info --all`.
std::vector<AdapterInfo> list_adapters();

// Upload: host memory the GPU copies from (StagingRing), like Readback not counted in the device's memory.
enum class BufferKind { Storage, Uniform, Readback, QueryResolve, Upload };

class Device;

// How many workgroups the adapter runs at once, measured (WebGPU does not say; kernels/tuning.h sets it).
struct Tuning {
  uint32_t resident_workgroups = 0;  // of 256 light invocations (an H200: 132 SMs x 8 = 1,056)
  uint32_t resident_tiles = 0;       // of linear_tiled.wgsl (an H200: 132 x 2 = 264)
  double probe_seconds = 0;          // how long the measurement took
};

// A live buffer's bytes in its device's count (Device::buffer_bytes()), given back when the buffer is destroyed
// or goes away; a move carries them.
class MemoryCharge {
 public:
  MemoryCharge() = default;
  MemoryCharge(std::shared_ptr<std::atomic<uint64_t>> total, uint64_t bytes)
      : total_(std::move(total)), bytes_(bytes) {}
  MemoryCharge(MemoryCharge&& other) noexcept
      : total_(std::move(other.total_)), bytes_(std::exchange(other.bytes_, 0)) {}
  MemoryCharge& operator=(MemoryCharge&& other) noexcept {
    if (this != &other) {
      release();
      total_ = std::move(other.total_);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~MemoryCharge() { release(); }
  void release() {
    if (total_ && bytes_) total_->fetch_sub(std::exchange(bytes_, 0));
  }

 private:
  std::shared_ptr<std::atomic<uint64_t>> total_;
  uint64_t bytes_ = 0;
};

// The bytes a buffer of `size` bytes holds: WebGPU copies and maps whole 4-byte words, and a buffer has at least one.
// (A size near 2^64 wraps: Device checks sizes against the adapter's limit first.)
constexpr uint64_t padded_bytes(uint64_t size) { return std::max<uint64_t>(4, (size + 3) / 4 * 4); }

// A GPU buffer. Sizes are padded to whole words (padded_bytes); size() is the requested size. Owned by the caller;
// the device must outlive it.
class Buffer {
 public:
  Buffer() = default;
  WGPUBuffer get() const { return handle_.get(); }
  uint64_t size() const { return size_; }
  uint64_t padded_size() const { return padded_bytes(size_); }
  const std::string& label() const { return label_; }
  BufferKind kind() const { return kind_; }
  bool destroyed() const { return destroyed_; }
  explicit operator bool() const { return static_cast<bool>(handle_); }
  // Frees the GPU memory now; later use is an error naming the buffer.
  void destroy();

 private:
  friend class Device;

  BufferHandle handle_;
  uint64_t size_ = 0;
  std::string label_;
  BufferKind kind_ = BufferKind::Storage;
  bool destroyed_ = false;
  MemoryCharge charge_;
};

// A range of a buffer bound to one binding slot.
struct BufferBinding {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t size = WGPU_WHOLE_SIZE;  // whole buffer from offset

  // The bytes the range covers (0 without a buffer).
  uint64_t bytes() const {
    if (!buffer) return 0;
    return size == WGPU_WHOLE_SIZE ? buffer->size() - std::min(buffer->size(), offset) : size;
  }
};

using Constants = std::vector<std::pair<std::string, double>>;  // WGSL `override` values

class Pipeline {
 public:
  WGPUComputePipeline get() const { return handle_.get(); }
  WGPUBindGroupLayout layout() const { return layout_.get(); }
  const std::string& name() const { return name_; }

 private:
  friend class Device;

  PipelineHandle handle_;
  BindGroupLayoutHandle layout_;
  std::string name_;
};

class BindGroup {
 public:
  WGPUBindGroup get() const { return handle_.get(); }

 private:
  friend class Device;

  BindGroupHandle handle_;
};

struct Grid {
  uint32_t x = 1, y = 1, z = 1;
  bool operator==(const Grid&) const = default;
};

class Device {
 public:
  explicit Device(const DeviceOptions& options = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const AdapterInfo& adapter() const { return adapter_info_; }
  const WGPULimits& limits() const { return limits_; }
  const Features& features() const { return features_; }
  WGPUDevice get() const { return device_.get(); }
  WGPUQueue queue() const { return queue_.get(); }

  Buffer create_buffer(std::string label, uint64_t size, BufferKind kind = BufferKind::Storage);
  // The bytes the device's live buffers hold in GPU memory (padded sizes; read-back buffers, in host memory, are not
  // counted, nor upload staging), held to DeviceOptions::memory_limit. Dawn's own staging and pipelines come on top.
  uint64_t buffer_bytes() const { return buffer_bytes_->load(); }
  uint64_t memory_limit() const { return memory_limit_; }
  // A buffer mapped at creation, for filling without a queue copy: mapped_range() is its bytes (size() padded to
  // 4), which any thread may write until unmap() (of Buffer::get(), which stays while the Buffer moves), called on
  // the device's thread. Dawn stages a storage buffer's bytes where the GPU's memory is not host-visible (host
  // memory of its own for each buffer, which a driver may take long to allocate: see StagingRing) and copies them
  // over at unmap(); an Upload buffer is host memory itself, mapped again with map_async().
  Buffer create_mapped(std::string label, uint64_t size, BufferKind kind = BufferKind::Storage);
  std::span<std::byte> mapped_range(const Buffer& buffer);
  void unmap(WGPUBuffer buffer);
  // A small storage range for a writable binding the dispatch leaves unused: WebGPU forbids a read-only
  // binding and a writable one (or two writable ones) over the same bytes, so such bindings cannot borrow
  // another operand's buffer. Each `slot` (0..15) is a distinct 16-byte range of one buffer.
  BufferBinding placeholder(uint32_t slot);
  // Upload: bytes are written at offset (padded with zeros to a multiple of 4).
  void write(const Buffer& buffer, std::span<const std::byte> bytes, uint64_t offset = 0);
  template <typename T>
  void write(const Buffer& buffer, std::span<const T> values, uint64_t offset = 0) {
    write(buffer, std::as_bytes(values), offset);
  }
  template <typename T>
  Buffer upload(std::string label, std::span<const T> values, BufferKind kind = BufferKind::Storage) {
    Buffer buffer = create_buffer(std::move(label), values.size_bytes(), kind);
    write(buffer, values);
    return buffer;
  }
  // Read-back: waits for all submitted work, then copies `size` bytes from `offset`.
  std::vector<std::byte> read(const Buffer& buffer, uint64_t offset = 0, std::optional<uint64_t> size = {});
  template <typename T>
  std::vector<T> read_as(const Buffer& buffer, uint64_t offset = 0, std::optional<uint64_t> count = {}) {
    std::optional<uint64_t> bytes;
    if (count) bytes = *count * sizeof(T);
    auto raw = read(buffer, offset, bytes);
    std::vector<T> out(raw.size() / sizeof(T));
    std::memcpy(out.data(), raw.data(), out.size() * sizeof(T));
    return out;
  }

  // Asynchronous mapping. Read-back without stalling the queue: record a copy into a Readback buffer, submit,
  // start mapping it with map_async(), and later finish_read() waits for the map and returns the bytes (unmapping
  // the buffer for reuse); read() is this, done at once. An Upload buffer maps for writing once the GPU's copies
  // out of it are done: finish_map() waits and gives its bytes, writable until unmap().
  struct PendingMap {
    const Buffer* buffer = nullptr;
    uint64_t size = 0;
    WGPUFuture future{};
    std::unique_ptr<std::pair<WGPUMapAsyncStatus, std::string>> status;
  };
  PendingMap map_async(const Buffer& buffer, uint64_t size);
  std::span<std::byte> finish_map(PendingMap& pending);
  std::vector<std::byte> finish_read(PendingMap& pending);

  // Compiles (once per name and constants) a compute pipeline from WGSL with entry point `main`. While a
  // PipelineCollection is open, only notes the pipeline (see there).
  const Pipeline& pipeline(const std::string& name, std::string_view wgsl, const Constants& constants = {});

  // A compute pipeline to create: kernel name, WGSL (whose storage outlives the call) and override constants.
  struct PipelineSpec {
    std::string name;
    std::string_view wgsl;
    Constants constants;
  };
  // Creates the pipelines not yet made, all at once through Dawn's asynchronous creation (compiled on its
  // worker threads), and waits for them; throws naming the first kernel that failed.
  void create_pipelines(std::span<const PipelineSpec> specs);

  // Finds the pipelines some code would create, without creating them: while it is open, pipeline() notes
  // each new one and hands back a stand-in, bind() makes no bind group, buffers get no GPU memory and writes
  // are dropped. What was prepared meanwhile must be thrown away, not recorded. create() then makes the
  // noted pipelines in parallel (and closes the collection). One at a time per device. While it is open, several
  // threads may prepare dispatches at once (nothing reaches Dawn).
  class PipelineCollection {
   public:
    explicit PipelineCollection(Device& device);
    ~PipelineCollection();
    PipelineCollection(const PipelineCollection&) = delete;
    PipelineCollection& operator=(const PipelineCollection&) = delete;
    // Closes the collection and creates what it noted; returns how many pipelines that was.
    size_t create();

   private:
    void close();
    Device& device_;
    bool open_ = true;
  };
  bool collecting() const { return collecting_; }

  // The adapter's measured figures, once kernels::tuning() has set them. Buffers are sized by them (a model's
  // attention scratch): set_tuning() belongs before anything is built on the device.
  const std::optional<Tuning>& tuning() const { return tuning_; }
  void set_tuning(const Tuning& tuning) { tuning_ = tuning; }
  BindGroup bind(const Pipeline& pipeline, std::span<const BufferBinding> bindings);

  void submit(WGPUCommandBuffer commands);
  void wait_idle();  // waits for every submitted command buffer to finish
  // Throws the first WebGPU error reported since the last check (validation, out-of-memory, device loss).
  void check_errors();

  // Waits on a future created with WGPUCallbackMode_WaitAnyOnly.
  void wait(WGPUFuture future);

 private:
  friend struct DeviceCallbacks;
  template <typename Fn>
  void scoped(const std::string& what, Fn&& create);  // runs `create` inside error scopes
  Buffer make_buffer(std::string label, uint64_t size, BufferKind kind, bool mapped);
  static std::string pipeline_key(const std::string& name, const Constants& constants);
  Handle<WGPUShaderModule, wgpuShaderModuleRelease> shader_module(const std::string& name, std::string_view wgsl);
  void finish_pipeline(Pipeline& pipeline);  // takes the bind group layout of a created pipeline

  InstanceHandle instance_;
  AdapterHandle adapter_;
  DeviceHandle device_;
  QueueHandle queue_;
  AdapterInfo adapter_info_;
  WGPULimits limits_{};
  Features features_;
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
  bool collecting_ = false;  // a PipelineCollection is open
  std::vector<PipelineSpec> collected_;
  std::map<std::string, std::unique_ptr<Pipeline>> stand_ins_;  // what pipeline() handed out while collecting
  std::mutex collect_mutex_;  // guards collected_, stand_ins_ and placeholders_ (threads that collect)
  std::optional<Tuning> tuning_;
  std::unique_ptr<DiskCache> blob_cache_;  // Dawn's blob cache, on disk; null: none
  const uint64_t memory_limit_;             // DeviceOptions::memory_limit
  std::shared_ptr<std::atomic<uint64_t>> buffer_bytes_ = std::make_shared<std::atomic<uint64_t>>(0);
  Buffer placeholders_;  // see placeholder(); made on first use

  std::mutex errors_mutex_;
  std::vector<std::string> errors_;
  bool lost_ = false;
};

// Records dispatches into one command encoder. All consecutive dispatches share one compute pass (WebGPU
// inserts the barriers between them); a copy closes the pass. submit() finishes and submits the lot.
class Recorder {
 public:
  explicit Recorder(Device& device, std::string label = "gerbil");
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void dispatch(const Pipeline& pipeline, const BindGroup& bind_group, Grid grid);
  void copy(const Buffer& source, uint64_t source_offset, const Buffer& destination, uint64_t destination_offset,
            uint64_t size);
  // Timestamps around the next dispatch (for profiling): the dispatch gets its own pass whose
  // begin/end times land at query indices `begin` and `begin + 1`.
  void dispatch_timed(const Pipeline& pipeline, const BindGroup& bind_group, Grid grid, WGPUQuerySet queries,
                      uint32_t begin);
  void resolve(WGPUQuerySet queries, uint32_t count, const Buffer& destination);
  void submit();
  size_t dispatch_count() const { return dispatches_; }

 private:
  void end_pass();
  Device& device_;
  std::string label_;
  WGPUCommandEncoder encoder_ = nullptr;
  WGPUComputePassEncoder pass_ = nullptr;
  size_t dispatches_ = 0;
};

}  // namespace gerbil::gpu
