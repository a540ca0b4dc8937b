#include "gpu/device.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "gerbil/error.h"

namespace gerbil::gpu {
namespace {

WGPUStringView view(std::string_view text) { return {text.data(), text.size()}; }

std::string to_string(WGPUStringView text) {
  if (!text.data) return {};
  if (text.length == WGPU_STRLEN) return std::string(text.data);
  return std::string(text.data, text.length);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

const char* backend_name(WGPUBackendType type) {
  switch (type) {
    case WGPUBackendType_Null: return "Null";
    case WGPUBackendType_WebGPU: return "WebGPU";
    case WGPUBackendType_D3D11: return "D3D11";
    case WGPUBackendType_D3D12: return "D3D12";
    case WGPUBackendType_Metal: return "Metal";
    case WGPUBackendType_Vulkan: return "Vulkan";
    case WGPUBackendType_OpenGL: return "OpenGL";
    case WGPUBackendType_OpenGLES: return "OpenGLES";
    default: return "unknown";
  }
}

const char* adapter_type_name(WGPUAdapterType type) {
  switch (type) {
    case WGPUAdapterType_DiscreteGPU: return "discrete GPU";
    case WGPUAdapterType_IntegratedGPU: return "integrated GPU";
    case WGPUAdapterType_CPU: return "CPU";
    default: return "unknown";
  }
}

const char* error_type_name(WGPUErrorType type) {
  switch (type) {
    case WGPUErrorType_Validation: return "validation error";
    case WGPUErrorType_OutOfMemory: return "out of memory";
    case WGPUErrorType_Internal: return "internal error";
    default: return "unknown error";
  }
}

InstanceHandle create_instance() {
  // Timed waits let wgpuInstanceWaitAny block until a future completes instead of spinning.
  WGPUInstanceDescriptor descriptor{};
  descriptor.capabilities.timedWaitAnyEnable = 1;
  descriptor.capabilities.timedWaitAnyMaxCount = 64;
  WGPUInstance instance = wgpuCreateInstance(&descriptor);
  if (!instance) fail("WebGPU: could not create a Dawn instance");
  return InstanceHandle(instance);
}

void wait_on(WGPUInstance instance, WGPUFuture future) {
  WGPUFutureWaitInfo info{future, 0};
  WGPUWaitStatus status = wgpuInstanceWaitAny(instance, 1, &info, UINT64_MAX);
  if (status != WGPUWaitStatus_Success || !info.completed)
    fail("WebGPU: waiting on a future failed (wait status {})", static_cast<uint32_t>(status));
}

AdapterInfo describe(WGPUAdapter adapter) {
  WGPUAdapterInfo raw{};
  if (wgpuAdapterGetInfo(adapter, &raw) != WGPUStatus_Success) fail("WebGPU: wgpuAdapterGetInfo failed");
  AdapterInfo info{to_string(raw.vendor), to_string(raw.architecture), to_string(raw.device),
                   to_string(raw.description), backend_name(raw.backendType), adapter_type_name(raw.adapterType),
                   raw.vendorID, raw.deviceID, raw.subgroupMinSize, raw.subgroupMaxSize};
  wgpuAdapterInfoFreeMembers(raw);
  return info;
}

struct AdapterRequest {
  WGPUAdapter adapter = nullptr;
  std::string message;
};

AdapterHandle request_adapter(WGPUInstance instance, WGPUPowerPreference power, bool fallback) {
  WGPURequestAdapterOptions options{};
  options.featureLevel = WGPUFeatureLevel_Core;
  options.powerPreference = power;
  options.forceFallbackAdapter = fallback ? 1 : 0;
  AdapterRequest result;
  WGPURequestAdapterCallbackInfo callback{};
  callback.mode = WGPUCallbackMode_WaitAnyOnly;
  callback.callback = [](WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView message, void* out,
                         void*) {
    auto* request = static_cast<AdapterRequest*>(out);
    if (status == WGPURequestAdapterStatus_Success) request->adapter = adapter;
    request->message = to_string(message);
  };
  callback.userdata1 = &result;
  wait_on(instance, wgpuInstanceRequestAdapter(instance, &options, callback));
  return AdapterHandle(result.adapter);
}

// Every distinct adapter Dawn offers, high-performance first. Dawn's C API has no enumeration call,
// so ask with each preference (and for the fallback adapter) and keep the distinct answers.
std::vector<std::pair<AdapterHandle, AdapterInfo>> candidate_adapters(WGPUInstance instance) {
  std::vector<std::pair<AdapterHandle, AdapterInfo>> found;
  auto consider = [&](AdapterHandle adapter) {
    if (!adapter) return;
    AdapterInfo info = describe(adapter.get());
    for (auto& [_, seen] : found)
      if (seen.description == info.description && seen.backend == info.backend && seen.device == info.device)
        return;
    found.emplace_back(std::move(adapter), std::move(info));
  };
  consider(request_adapter(instance, WGPUPowerPreference_HighPerformance, false));
  consider(request_adapter(instance, WGPUPowerPreference_LowPower, false));
  consider(request_adapter(instance, WGPUPowerPreference_Undefined, true));
  return found;
}

bool matches(const AdapterInfo& info, const std::string& wanted) {
  std::string haystack = lower(info.vendor + " " + info.device + " " + info.description + " " + info.backend +
                               " " + info.architecture);
  return haystack.find(lower(wanted)) != std::string::npos;
}

// Dawn's blob cache callbacks over a DiskCache. Dawn asks for a blob's size first (no buffer), then for its
// bytes: the blob read for the first call is kept for the second, per thread (Dawn loads from several).
size_t load_blob(const void* key, size_t key_size, void* value, size_t value_size, void* cache) {
  thread_local std::vector<std::byte> last_key, last_value;
  std::span<const std::byte> wanted(static_cast<const std::byte*>(key), key_size);
  if (!std::equal(wanted.begin(), wanted.end(), last_key.begin(), last_key.end())) {
    auto blob = static_cast<const DiskCache*>(cache)->load(wanted);
    if (!blob) return 0;
    last_key.assign(wanted.begin(), wanted.end());
    last_value = std::move(*blob);
  }
  if (value && value_size >= last_value.size()) std::memcpy(value, last_value.data(), last_value.size());
  return last_value.size();
}

void store_blob(const void* key, size_t key_size, const void* value, size_t value_size, void* cache) {
  static_cast<const DiskCache*>(cache)->store({static_cast<const std::byte*>(key), key_size},
                                              {static_cast<const std::byte*>(value), value_size});
}

}  // namespace

std::string AdapterInfo::summary() const {
  return fmt::format("{} ({}; {}, {})", device.empty() ? description : device, vendor, backend, adapter_type);
}

std::vector<AdapterInfo> list_adapters() {
  InstanceHandle instance = create_instance();
  std::vector<AdapterInfo> infos;
  for (auto& [adapter, info] : candidate_adapters(instance.get())) infos.push_back(info);
  return infos;
}

void Buffer::destroy() {
  if (handle_ && !destroyed_) wgpuBufferDestroy(handle_.get());
  destroyed_ = true;
  charge_.release();
}

// The device's callbacks, which only record what happened; check_errors() turns records into exceptions.
struct DeviceCallbacks {
  static void uncaptured(const WGPUDevice*, WGPUErrorType type, WGPUStringView message, void* self, void*) {
    auto* device = static_cast<Device*>(self);
    std::lock_guard lock(device->errors_mutex_);
    device->errors_.push_back(fmt::format("WebGPU {}: {}", error_type_name(type), to_string(message)));
  }
  static void lost(const WGPUDevice*, WGPUDeviceLostReason reason, WGPUStringView message, void* self, void*) {
    // Destruction at shutdown is not a loss worth reporting.
    if (reason == WGPUDeviceLostReason_Destroyed || reason == WGPUDeviceLostReason_CallbackCancelled) return;
    auto* device = static_cast<Device*>(self);
    std::lock_guard lock(device->errors_mutex_);
    device->lost_ = true;
    device->errors_.push_back(fmt::format("WebGPU device lost: {}", to_string(message)));
  }
};

Device::Device(const DeviceOptions& options)
    : instance_(create_instance()), memory_limit_(options.memory_limit) {
  std::string wanted = options.adapter;
  if (wanted.empty())
    if (const char* env = std::getenv("GERBIL_ADAPTER")) wanted = env;

  auto candidates = candidate_adapters(instance_.get());
  if (candidates.empty())
    fail("WebGPU: no adapter found (is a Vulkan driver installed? On a machine without a GPU, Mesa lavapipe "
         "from bookworm-backports: see scripts/setup.sh)");
  auto chosen = candidates.begin();
  if (!wanted.empty()) {
    chosen = std::find_if(candidates.begin(), candidates.end(), [&](auto& c) { return matches(c.second, wanted); });
    if (chosen == candidates.end()) {
      std::string names;
      for (auto& [_, info] : candidates) names += "\n  " + info.summary();
      fail("WebGPU: no adapter matches '{}'; available:{}", wanted, names);
    }
  }
  adapter_ = std::move(chosen->first);
  adapter_info_ = std::move(chosen->second);

  // Ask for the adapter's own maximum limits and every optional feature gerbil can use.
  WGPULimits adapter_limits{};
  if (wgpuAdapterGetLimits(adapter_.get(), &adapter_limits) != WGPUStatus_Success)
    fail("WebGPU: wgpuAdapterGetLimits failed");
  std::vector<WGPUFeatureName> required;
  auto want = [&](WGPUFeatureName feature, bool allowed) {
    bool present = allowed && wgpuAdapterHasFeature(adapter_.get(), feature);
    if (present) required.push_back(feature);
    return present;
  };
  features_.shader_f16 = want(WGPUFeatureName_ShaderF16, options.allow_shader_f16);
  features_.subgroups = want(WGPUFeatureName_Subgroups, options.allow_subgroups);
  features_.timestamp_query = want(WGPUFeatureName_TimestampQuery, true);
  features_.subgroup_matrix = wgpuAdapterHasFeature(adapter_.get(), WGPUFeatureName_ChromiumExperimentalSubgroupMatrix);

  std::vector<const char*> enabled, disabled;
  for (auto& toggle : options.enable_toggles) enabled.push_back(toggle.c_str());
  for (auto& toggle : options.disable_toggles) disabled.push_back(toggle.c_str());
  WGPUDawnTogglesDescriptor toggles{};
  toggles.chain.sType = WGPUSType_DawnTogglesDescriptor;
  toggles.enabledToggleCount = enabled.size();
  toggles.enabledToggles = enabled.data();
  toggles.disabledToggleCount = disabled.size();
  toggles.disabledToggles = disabled.data();

  // Dawn keys its blobs by the adapter, driver and shader, so one folder serves every adapter.
  WGPUDawnCacheDeviceDescriptor cache{};
  cache.chain.sType = WGPUSType_DawnCacheDeviceDescriptor;
  cache.isolationKey = view("gerbil");
  if (std::filesystem::path folder = cache_dir(); options.disk_cache && !folder.empty()) {
    blob_cache_ = std::make_unique<DiskCache>(folder / "dawn");
    cache.loadDataFunction = &load_blob;
    cache.storeDataFunction = &store_blob;
    cache.functionUserdata = blob_cache_.get();
    toggles.chain.next = &cache.chain;
  }

  WGPUDeviceDescriptor descriptor{};
  descriptor.nextInChain = &toggles.chain;
  descriptor.label = view("gerbil");
  descriptor.requiredFeatureCount = required.size();
  descriptor.requiredFeatures = required.data();
  descriptor.requiredLimits = &adapter_limits;
  descriptor.defaultQueue.label = view("gerbil queue");
  descriptor.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
  descriptor.deviceLostCallbackInfo.callback = &DeviceCallbacks::lost;
  descriptor.deviceLostCallbackInfo.userdata1 = this;
  descriptor.uncapturedErrorCallbackInfo.callback = &DeviceCallbacks::uncaptured;
  descriptor.uncapturedErrorCallbackInfo.userdata1 = this;

  struct DeviceRequest {
    WGPUDevice device = nullptr;
    std::string message;
  } result;
  WGPURequestDeviceCallbackInfo callback{};
  callback.mode = WGPUCallbackMode_WaitAnyOnly;
  callback.callback = [](WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message, void* out,
                         void*) {
    auto* request = static_cast<DeviceRequest*>(out);
    if (status == WGPURequestDeviceStatus_Success) request->device = device;
    request->message = to_string(message);
  };
  callback.userdata1 = &result;
  wait(wgpuAdapterRequestDevice(adapter_.get(), &descriptor, callback));
  if (!result.device) fail("WebGPU: requesting a device from {} failed: {}", adapter_info_.summary(), result.message);
  device_ = DeviceHandle(result.device);
  queue_ = QueueHandle(wgpuDeviceGetQueue(device_.get()));
  if (wgpuDeviceGetLimits(device_.get(), &limits_) != WGPUStatus_Success) fail("WebGPU: wgpuDeviceGetLimits failed");
}

Device::~Device() {
  pipelines_.clear();
  queue_.reset();
  if (device_) wgpuDeviceDestroy(device_.get());
  device_.reset();
  // Let Dawn deliver the device-lost callback (reason: destroyed) before `this` goes away.
  if (instance_) wgpuInstanceProcessEvents(instance_.get());
}

void Device::wait(WGPUFuture future) { wait_on(instance_.get(), future); }

void Device::check_errors() {
  std::lock_guard lock(errors_mutex_);
  if (errors_.empty()) return;
  std::string message = errors_.front();
  if (errors_.size() > 1) message += fmt::format(" (and {} more errors)", errors_.size() - 1);
  if (!lost_) errors_.clear();  // a lost device stays lost
  throw Error(message);
}

template <typename Fn>
void Device::scoped(const std::string& what, Fn&& create) {
  check_errors();
  wgpuDevicePushErrorScope(device_.get(), WGPUErrorFilter_OutOfMemory);
  wgpuDevicePushErrorScope(device_.get(), WGPUErrorFilter_Validation);
  create();
  std::string first_error;
  bool out_of_memory = false;
  for (int scope = 0; scope < 2; ++scope) {
    struct Popped {
      WGPUErrorType type = WGPUErrorType_NoError;
      std::string message;
    } popped;
    WGPUPopErrorScopeCallbackInfo callback{};
    callback.mode = WGPUCallbackMode_WaitAnyOnly;
    callback.callback = [](WGPUPopErrorScopeStatus, WGPUErrorType type, WGPUStringView message, void* out, void*) {
      auto* result = static_cast<Popped*>(out);
      result->type = type;
      result->message = to_string(message);
    };
    callback.userdata1 = &popped;
    wait(wgpuDevicePopErrorScope(device_.get(), callback));
    if (popped.type != WGPUErrorType_NoError && first_error.empty()) {
      first_error = fmt::format("{}: WebGPU {}: {}", what, error_type_name(popped.type), popped.message);
      out_of_memory = popped.type == WGPUErrorType_OutOfMemory;
    }
  }
  if (out_of_memory) throw OutOfMemory(first_error);
  if (!first_error.empty()) throw Error(first_error);
}

BufferBinding Device::placeholder(uint32_t slot) {
  constexpr uint32_t kSlots = 16;
  uint64_t stride = std::max<uint64_t>(16, limits_.minStorageBufferOffsetAlignment);
  if (slot >= kSlots) fail("placeholder binding {} requested, there are {}", slot, kSlots);
  std::lock_guard lock(collect_mutex_);
  if (!placeholders_.get()) placeholders_ = create_buffer("unused bindings", kSlots * stride);
  return {&placeholders_, slot * stride, 16};
}

Buffer Device::create_buffer(std::string label, uint64_t size, BufferKind kind) {
  return make_buffer(std::move(label), size, kind, false);
}

Buffer Device::create_mapped(std::string label, uint64_t size, BufferKind kind) {
  return make_buffer(std::move(label), size, kind, true);
}

Buffer Device::make_buffer(std::string label, uint64_t size, BufferKind kind, bool mapped) {
  if (size > limits_.maxBufferSize)  // checked before padding, which a size near 2^64 would wrap
    fail("buffer '{}': {} bytes exceeds the adapter's maxBufferSize of {} bytes", label, size, limits_.maxBufferSize);
  uint64_t padded = padded_bytes(size);
  if (padded > limits_.maxBufferSize)
    fail("buffer '{}': {} bytes exceeds the adapter's maxBufferSize of {} bytes", label, size, limits_.maxBufferSize);
  WGPUFlags usage = 0;
  switch (kind) {
    case BufferKind::Storage:
      usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
      break;
    case BufferKind::Uniform: usage = WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst; break;
    case BufferKind::Readback: usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst; break;
    case BufferKind::QueryResolve: usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc; break;
    case BufferKind::Upload: usage = WGPUBufferUsage_MapWrite | WGPUBufferUsage_CopySrc; break;
  }
  WGPUBufferDescriptor descriptor{};
  descriptor.label = view(label);
  descriptor.usage = usage;
  descriptor.size = padded;
  descriptor.mappedAtCreation = mapped;
  Buffer buffer;
  buffer.size_ = size;
  buffer.label_ = label;
  buffer.kind_ = kind;
  if (collecting_) return buffer;  // nothing will run on it
  // Read-back and upload staging live in host memory.
  uint64_t counted = kind == BufferKind::Readback || kind == BufferKind::Upload ? 0 : padded;
  uint64_t held = buffer_bytes_->fetch_add(counted) + counted;
  MemoryCharge charge(buffer_bytes_, counted);  // given back if the buffer is refused
  if (memory_limit_ && held > memory_limit_)
    throw OutOfMemory(fmt::format("creating buffer '{}' ({} bytes): gerbil's buffers would hold {} bytes, more than "
                                  "the memory limit of {} bytes (--gpu-memory)", label, size, held, memory_limit_));
  scoped(fmt::format("creating buffer '{}' ({} bytes)", label, size),
         [&] { buffer.handle_ = BufferHandle(wgpuDeviceCreateBuffer(device_.get(), &descriptor)); });
  buffer.charge_ = std::move(charge);
  return buffer;
}

std::span<std::byte> Device::mapped_range(const Buffer& buffer) {
  uint64_t padded = buffer.padded_size();
  void* data = buffer ? wgpuBufferGetMappedRange(buffer.get(), 0, padded) : nullptr;
  if (!data) fail("buffer '{}' is not mapped", buffer.label());
  return {static_cast<std::byte*>(data), padded};
}

void Device::unmap(WGPUBuffer buffer) { wgpuBufferUnmap(buffer); }

void Device::write(const Buffer& buffer, std::span<const std::byte> bytes, uint64_t offset) {
  if (collecting_ && !buffer) return;  // a stand-in buffer made while collecting pipelines
  if (buffer.destroyed()) fail("writing to buffer '{}', which was destroyed", buffer.label());
  if (offset % 4 != 0) fail("writing to buffer '{}': offset {} is not a multiple of 4", buffer.label(), offset);
  if (offset + bytes.size() > buffer.size())
    fail("writing {} bytes at offset {} to buffer '{}' of {} bytes", bytes.size(), offset, buffer.label(),
         buffer.size());
  size_t whole = bytes.size() / 4 * 4;
  if (whole) wgpuQueueWriteBuffer(queue_.get(), buffer.get(), offset, bytes.data(), whole);
  if (whole != bytes.size()) {
    std::byte tail[4] = {};
    std::memcpy(tail, bytes.data() + whole, bytes.size() - whole);
    wgpuQueueWriteBuffer(queue_.get(), buffer.get(), offset + whole, tail, 4);
  }
}

std::vector<std::byte> Device::read(const Buffer& buffer, uint64_t offset, std::optional<uint64_t> size) {
  if (buffer.destroyed()) fail("reading buffer '{}', which was destroyed", buffer.label());
  uint64_t bytes = size.value_or(buffer.size() - std::min(offset, buffer.size()));
  if (offset % 4 != 0) fail("reading buffer '{}': offset {} is not a multiple of 4", buffer.label(), offset);
  if (offset + bytes > buffer.size())
    fail("reading {} bytes at offset {} from buffer '{}' of {} bytes", bytes, offset, buffer.label(), buffer.size());
  if (bytes == 0) return {};
  uint64_t padded = padded_bytes(bytes);
  Buffer staging = create_buffer(buffer.label() + " (read-back)", padded, BufferKind::Readback);
  Recorder recorder(*this, "read-back");
  recorder.copy(buffer, offset, staging, 0, padded);
  recorder.submit();

  PendingMap pending = map_async(staging, bytes);
  return finish_read(pending);
}

Device::PendingMap Device::map_async(const Buffer& buffer, uint64_t size) {
  if (buffer.kind() != BufferKind::Readback && buffer.kind() != BufferKind::Upload)
    fail("buffer '{}' is neither a read-back nor an upload buffer", buffer.label());
  uint64_t padded = padded_bytes(size);
  PendingMap pending{&buffer, size, {}, std::make_unique<std::pair<WGPUMapAsyncStatus, std::string>>()};
  pending.status->first = WGPUMapAsyncStatus_Error;
  WGPUBufferMapCallbackInfo callback{};
  callback.mode = WGPUCallbackMode_WaitAnyOnly;
  callback.callback = [](WGPUMapAsyncStatus status, WGPUStringView message, void* out, void*) {
    auto* result = static_cast<std::pair<WGPUMapAsyncStatus, std::string>*>(out);
    result->first = status;
    result->second = to_string(message);
  };
  callback.userdata1 = pending.status.get();
  WGPUFlags mode = buffer.kind() == BufferKind::Readback ? WGPUMapMode_Read : WGPUMapMode_Write;
  pending.future = wgpuBufferMapAsync(buffer.get(), mode, 0, padded, callback);
  return pending;
}

std::span<std::byte> Device::finish_map(PendingMap& pending) {
  wait(pending.future);
  check_errors();
  const Buffer& buffer = *pending.buffer;
  if (pending.status->first != WGPUMapAsyncStatus_Success)
    fail("mapping buffer '{}' failed: {}", buffer.label(), pending.status->second);
  uint64_t padded = padded_bytes(pending.size);
  void* data = buffer.kind() == BufferKind::Readback
                   ? const_cast<void*>(wgpuBufferGetConstMappedRange(buffer.get(), 0, padded))
                   : wgpuBufferGetMappedRange(buffer.get(), 0, padded);
  if (!data) fail("buffer '{}': no mapped range", buffer.label());
  return {static_cast<std::byte*>(data), pending.size};
}

std::vector<std::byte> Device::finish_read(PendingMap& pending) {
  std::span<std::byte> mapped = finish_map(pending);
  std::vector<std::byte> out(mapped.begin(), mapped.end());
  wgpuBufferUnmap(pending.buffer->get());
  return out;
}

std::string Device::pipeline_key(const std::string& name, const Constants& constants) {
  std::string key = name;
  for (auto& [constant, value] : constants) key += fmt::format("|{}={}", constant, value);
  return key;
}

Handle<WGPUShaderModule, wgpuShaderModuleRelease> Device::shader_module(const std::string& name,
                                                                        std::string_view wgsl) {
  WGPUShaderSourceWGSL source{};
  source.chain.sType = WGPUSType_ShaderSourceWGSL;
  source.code = view(wgsl);
  WGPUShaderModuleDescriptor descriptor{};
  descriptor.nextInChain = &source.chain;
  descriptor.label = view(name);
  Handle<WGPUShaderModule, wgpuShaderModuleRelease> module;
  scoped(fmt::format("kernel '{}': compiling WGSL", name),
         [&] { module = decltype(module)(wgpuDeviceCreateShaderModule(device_.get(), &descriptor)); });
  return module;
}

namespace {

// A compute pipeline descriptor over `module` (entry point `main`) and its constants' entries.
struct PipelineDescriptor {
  std::vector<WGPUConstantEntry> entries;
  WGPUComputePipelineDescriptor descriptor{};

  PipelineDescriptor(const std::string& name, WGPUShaderModule module, const Constants& constants) {
    for (auto& [constant, value] : constants) entries.push_back({nullptr, view(constant), value});
    descriptor.label = view(name);
    descriptor.compute.module = module;
    descriptor.compute.entryPoint = view("main");
    descriptor.compute.constantCount = entries.size();
    descriptor.compute.constants = entries.data();
  }
};

}  // namespace

void Device::finish_pipeline(Pipeline& pipeline) {
  scoped(fmt::format("kernel '{}': taking the pipeline's bind group layout", pipeline.name_), [&] {
    pipeline.layout_ = BindGroupLayoutHandle(wgpuComputePipelineGetBindGroupLayout(pipeline.handle_.get(), 0));
  });
}

const Pipeline& Device::pipeline(const std::string& name, std::string_view wgsl, const Constants& constants) {
  std::string key = pipeline_key(name, constants);
  if (auto found = pipelines_.find(key); found != pipelines_.end()) return *found->second;
  if (collecting_) {
    std::lock_guard lock(collect_mutex_);
    auto [stand_in, added] = stand_ins_.try_emplace(key, std::make_unique<Pipeline>());
    if (added) {
      stand_in->second->name_ = name;
      collected_.push_back({name, wgsl, constants});
    }
    return *stand_in->second;
  }

  auto pipeline = std::make_unique<Pipeline>();
  pipeline->name_ = name;
  auto module = shader_module(name, wgsl);
  PipelineDescriptor descriptor(name, module.get(), constants);
  scoped(fmt::format("kernel '{}': creating the compute pipeline", name), [&] {
    pipeline->handle_ = PipelineHandle(wgpuDeviceCreateComputePipeline(device_.get(), &descriptor.descriptor));
  });
  finish_pipeline(*pipeline);
  return *pipelines_.emplace(key, std::move(pipeline)).first->second;
}

void Device::create_pipelines(std::span<const PipelineSpec> specs) {
  struct Pending {
    const PipelineSpec* spec;
    std::string key;
    WGPUCreatePipelineAsyncStatus status = WGPUCreatePipelineAsyncStatus_CallbackCancelled;
    PipelineHandle handle;
    std::string message;
    WGPUFuture future{};
  };
  std::vector<Pending> pending;
  for (const PipelineSpec& spec : specs) {
    std::string key = pipeline_key(spec.name, spec.constants);
    bool queued = std::any_of(pending.begin(), pending.end(), [&](const Pending& p) { return p.key == key; });
    if (!queued && !pipelines_.contains(key)) pending.push_back({&spec, std::move(key)});
  }
  // Every creation is started before any is waited on, so Dawn compiles them side by side. A kernel's variants
  // (its override constants) share one shader module: its WGSL parsed and validated once, here on this thread.
  std::unordered_map<std::string_view, Handle<WGPUShaderModule, wgpuShaderModuleRelease>> modules;
  for (Pending& p : pending) {
    auto& module = modules[p.spec->wgsl];
    if (!module) module = shader_module(p.spec->name, p.spec->wgsl);
    PipelineDescriptor descriptor(p.spec->name, module.get(), p.spec->constants);
    WGPUCreateComputePipelineAsyncCallbackInfo callback{};
    callback.mode = WGPUCallbackMode_WaitAnyOnly;
    callback.callback = [](WGPUCreatePipelineAsyncStatus status, WGPUComputePipeline pipeline, WGPUStringView message,
                           void* out, void*) {
      auto* result = static_cast<Pending*>(out);
      result->status = status;
      result->handle = PipelineHandle(pipeline);
      result->message = to_string(message);
    };
    callback.userdata1 = &p;
    p.future = wgpuDeviceCreateComputePipelineAsync(device_.get(), &descriptor.descriptor, callback);
  }
  for (Pending& p : pending) wait(p.future);
  for (Pending& p : pending)
    if (p.status != WGPUCreatePipelineAsyncStatus_Success || !p.handle)
      fail("kernel '{}': creating the compute pipeline failed (status {}): {}", p.spec->name,
           static_cast<uint32_t>(p.status), p.message);
  for (Pending& p : pending) {
    auto pipeline = std::make_unique<Pipeline>();
    pipeline->name_ = p.spec->name;
    pipeline->handle_ = std::move(p.handle);
    finish_pipeline(*pipeline);
    pipelines_.emplace(p.key, std::move(pipeline));
  }
}

Device::PipelineCollection::PipelineCollection(Device& device) : device_(device) {
  if (device_.collecting_) fail("a pipeline collection is already open on this device");
  device_.collecting_ = true;
}

Device::PipelineCollection::~PipelineCollection() { close(); }

void Device::PipelineCollection::close() {
  if (!open_) return;
  open_ = false;
  device_.collecting_ = false;
  device_.stand_ins_.clear();
}

size_t Device::PipelineCollection::create() {
  std::vector<PipelineSpec> specs = std::exchange(device_.collected_, {});
  close();
  device_.create_pipelines(specs);
  return specs.size();
}

BindGroup Device::bind(const Pipeline& pipeline, std::span<const BufferBinding> bindings) {
  if (collecting_) return {};
  std::vector<WGPUBindGroupEntry> entries;
  for (uint32_t slot = 0; slot < bindings.size(); ++slot) {
    const BufferBinding& binding = bindings[slot];
    if (!binding.buffer || !*binding.buffer) fail("kernel '{}': binding {} has no buffer", pipeline.name(), slot);
    if (binding.buffer->destroyed())
      fail("kernel '{}': binding {} uses buffer '{}', which was destroyed", pipeline.name(), slot,
           binding.buffer->label());
    uint64_t size = binding.size;
    if (size == WGPU_WHOLE_SIZE) size = binding.buffer->padded_size() - binding.offset;
    if (binding.buffer->kind() == BufferKind::Storage && size > limits_.maxStorageBufferBindingSize)
      fail("kernel '{}': binding {} ('{}') is {} bytes, over the adapter's maxStorageBufferBindingSize of {}",
           pipeline.name(), slot, binding.buffer->label(), size, limits_.maxStorageBufferBindingSize);
    entries.push_back({nullptr, slot, binding.buffer->get(), binding.offset, size, nullptr, nullptr});
  }
  WGPUBindGroupDescriptor descriptor{};
  descriptor.label = view(pipeline.name());
  descriptor.layout = pipeline.layout();
  descriptor.entryCount = entries.size();
  descriptor.entries = entries.data();
  BindGroup group;
  scoped(fmt::format("kernel '{}': binding buffers", pipeline.name()),
         [&] { group.handle_ = BindGroupHandle(wgpuDeviceCreateBindGroup(device_.get(), &descriptor)); });
  return group;
}

void Device::submit(WGPUCommandBuffer commands) {
  wgpuQueueSubmit(queue_.get(), 1, &commands);
  check_errors();
}

void Device::wait_idle() {
  WGPUQueueWorkDoneCallbackInfo callback{};
  callback.mode = WGPUCallbackMode_WaitAnyOnly;
  callback.callback = [](WGPUQueueWorkDoneStatus, void*, void*) {};
  wait(wgpuQueueOnSubmittedWorkDone(queue_.get(), callback));
  check_errors();
}

// ---- Recorder -------------------------------------------------------------------------------------------

Recorder::Recorder(Device& device, std::string label) : device_(device), label_(std::move(label)) {
  WGPUCommandEncoderDescriptor descriptor{};
  descriptor.label = view(label_);
  encoder_ = wgpuDeviceCreateCommandEncoder(device_.get(), &descriptor);
}

Recorder::~Recorder() {
  if (pass_) {
    wgpuComputePassEncoderEnd(pass_);
    wgpuComputePassEncoderRelease(pass_);
  }
  if (encoder_) wgpuCommandEncoderRelease(encoder_);
}

void Recorder::end_pass() {
  if (!pass_) return;
  wgpuComputePassEncoderEnd(pass_);
  wgpuComputePassEncoderRelease(pass_);
  pass_ = nullptr;
}

void Recorder::dispatch(const Pipeline& pipeline, const BindGroup& bind_group, Grid grid) {
  if (!pass_) {
    WGPUComputePassDescriptor descriptor{};
    descriptor.label = view(label_);
    pass_ = wgpuCommandEncoderBeginComputePass(encoder_, &descriptor);
  }
  wgpuComputePassEncoderSetPipeline(pass_, pipeline.get());
  wgpuComputePassEncoderSetBindGroup(pass_, 0, bind_group.get(), 0, nullptr);
  wgpuComputePassEncoderDispatchWorkgroups(pass_, grid.x, grid.y, grid.z);
  ++dispatches_;
}

void Recorder::dispatch_timed(const Pipeline& pipeline, const BindGroup& bind_group, Grid grid,
                              WGPUQuerySet queries, uint32_t begin) {
  end_pass();
  WGPUPassTimestampWrites writes{nullptr, queries, begin, begin + 1};
  WGPUComputePassDescriptor descriptor{};
  descriptor.label = view(pipeline.name());
  descriptor.timestampWrites = &writes;
  pass_ = wgpuCommandEncoderBeginComputePass(encoder_, &descriptor);
  dispatch(pipeline, bind_group, grid);
  end_pass();
}

void Recorder::copy(const Buffer& source, uint64_t source_offset, const Buffer& destination,
                    uint64_t destination_offset, uint64_t size) {
  end_pass();
  wgpuCommandEncoderCopyBufferToBuffer(encoder_, source.get(), source_offset, destination.get(), destination_offset,
                                       size);
}

void Recorder::resolve(WGPUQuerySet queries, uint32_t count, const Buffer& destination) {
  end_pass();
  wgpuCommandEncoderResolveQuerySet(encoder_, queries, 0, count, destination.get(), 0);
}

void Recorder::submit() {
  end_pass();
  WGPUCommandBufferDescriptor descriptor{};
  descriptor.label = view(label_);
  WGPUCommandBuffer commands = wgpuCommandEncoderFinish(encoder_, &descriptor);
  wgpuCommandEncoderRelease(encoder_);
  // Ready for more work: a recorder can be reused after submit, even one that failed.
  WGPUCommandEncoderDescriptor next{};
  next.label = view(label_);
  encoder_ = wgpuDeviceCreateCommandEncoder(device_.get(), &next);
  Handle<WGPUCommandBuffer, wgpuCommandBufferRelease> owned(commands);
  device_.submit(commands);
}

}  // namespace gerbil::gpu
