// The subset of the WebGPU C ABI (webgpu.h, as implemented by Dawn) that gerbil uses.
//
// No package ships webgpu.h, and its enum values and struct layouts moved between header versions, so
// this file declares exactly what the prebuilt Dawn in npm `bun-webgpu-linux-x64@0.1.7` implements.
// Every value and layout below was taken from that build's own definitions (npm `bun-webgpu@0.1.7`:
// index.js, structs_def.d.ts), not from the newest webgpu.h: for example `shader-f16` is 0xA here
// while newer headers number features differently. tests/test_gpu.cpp (the GpuAbi tests) checks the values against
// what the library reports (lavapipe must report shader-f16 and subgroups).
//
// Only the types and functions gerbil calls are declared. Struct sizes are pinned with static_assert.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

using WGPUBool = uint32_t;
using WGPUFlags = uint64_t;

#define GERBIL_WGPU_HANDLE(name) using name = struct name##Impl*
GERBIL_WGPU_HANDLE(WGPUInstance);
GERBIL_WGPU_HANDLE(WGPUAdapter);
GERBIL_WGPU_HANDLE(WGPUDevice);
GERBIL_WGPU_HANDLE(WGPUQueue);
GERBIL_WGPU_HANDLE(WGPUBuffer);
GERBIL_WGPU_HANDLE(WGPUShaderModule);
GERBIL_WGPU_HANDLE(WGPUBindGroupLayout);
GERBIL_WGPU_HANDLE(WGPUBindGroup);
GERBIL_WGPU_HANDLE(WGPUPipelineLayout);
GERBIL_WGPU_HANDLE(WGPUComputePipeline);
GERBIL_WGPU_HANDLE(WGPUCommandEncoder);
GERBIL_WGPU_HANDLE(WGPUComputePassEncoder);
GERBIL_WGPU_HANDLE(WGPUCommandBuffer);
GERBIL_WGPU_HANDLE(WGPUQuerySet);
GERBIL_WGPU_HANDLE(WGPUSurface);
GERBIL_WGPU_HANDLE(WGPUSampler);
GERBIL_WGPU_HANDLE(WGPUTextureView);
#undef GERBIL_WGPU_HANDLE

// ---- enums (values of this Dawn build) ----------------------------------------------------------------
enum WGPUSType : uint32_t {
  WGPUSType_ShaderSourceWGSL = 0x2,
  WGPUSType_DawnCacheDeviceDescriptor = 0x50007,
  WGPUSType_DawnTogglesDescriptor = 0x5000A,
};

enum WGPUCreatePipelineAsyncStatus : uint32_t {
  WGPUCreatePipelineAsyncStatus_Success = 1,
  WGPUCreatePipelineAsyncStatus_CallbackCancelled = 2,
  WGPUCreatePipelineAsyncStatus_ValidationError = 3,
  WGPUCreatePipelineAsyncStatus_InternalError = 4,
};

enum WGPUCallbackMode : uint32_t {
  WGPUCallbackMode_WaitAnyOnly = 1,
  WGPUCallbackMode_AllowProcessEvents = 2,
  WGPUCallbackMode_AllowSpontaneous = 3,
};

enum WGPUStatus : uint32_t { WGPUStatus_Success = 1, WGPUStatus_Error = 2 };

enum WGPUWaitStatus : uint32_t { WGPUWaitStatus_Success = 1, WGPUWaitStatus_TimedOut = 2 };

enum WGPURequestAdapterStatus : uint32_t {
  WGPURequestAdapterStatus_Success = 1,
  WGPURequestAdapterStatus_CallbackCancelled = 2,
  WGPURequestAdapterStatus_Unavailable = 3,
  WGPURequestAdapterStatus_Error = 4,
};

enum WGPURequestDeviceStatus : uint32_t {
  WGPURequestDeviceStatus_Success = 1,
  WGPURequestDeviceStatus_CallbackCancelled = 2,
  WGPURequestDeviceStatus_Error = 3,
};

enum WGPUMapAsyncStatus : uint32_t {
  WGPUMapAsyncStatus_Success = 1,
  WGPUMapAsyncStatus_CallbackCancelled = 2,
  WGPUMapAsyncStatus_Error = 3,
  WGPUMapAsyncStatus_Aborted = 4,
};

enum WGPUQueueWorkDoneStatus : uint32_t {
  WGPUQueueWorkDoneStatus_Success = 1,
  WGPUQueueWorkDoneStatus_CallbackCancelled = 2,
  WGPUQueueWorkDoneStatus_Error = 3,
};

enum WGPUPopErrorScopeStatus : uint32_t {
  WGPUPopErrorScopeStatus_Success = 1,
  WGPUPopErrorScopeStatus_CallbackCancelled = 2,
  WGPUPopErrorScopeStatus_Error = 3,
};

enum WGPUErrorType : uint32_t {
  WGPUErrorType_NoError = 1,
  WGPUErrorType_Validation = 2,
  WGPUErrorType_OutOfMemory = 3,
  WGPUErrorType_Internal = 4,
  WGPUErrorType_Unknown = 5,
};

enum WGPUErrorFilter : uint32_t {
  WGPUErrorFilter_Validation = 1,
  WGPUErrorFilter_OutOfMemory = 2,
  WGPUErrorFilter_Internal = 3,
};

enum WGPUDeviceLostReason : uint32_t {
  WGPUDeviceLostReason_Unknown = 1,
  WGPUDeviceLostReason_Destroyed = 2,
  WGPUDeviceLostReason_CallbackCancelled = 3,
  WGPUDeviceLostReason_FailedCreation = 4,
};

enum WGPUPowerPreference : uint32_t {
  WGPUPowerPreference_Undefined = 0,
  WGPUPowerPreference_LowPower = 1,
  WGPUPowerPreference_HighPerformance = 2,
};

enum WGPUFeatureLevel : uint32_t { WGPUFeatureLevel_Undefined = 0, WGPUFeatureLevel_Core = 2 };

enum WGPUBackendType : uint32_t {
  WGPUBackendType_Undefined = 0,
  WGPUBackendType_Null = 1,
  WGPUBackendType_WebGPU = 2,
  WGPUBackendType_D3D11 = 3,
  WGPUBackendType_D3D12 = 4,
  WGPUBackendType_Metal = 5,
  WGPUBackendType_Vulkan = 6,
  WGPUBackendType_OpenGL = 7,
  WGPUBackendType_OpenGLES = 8,
};

enum WGPUAdapterType : uint32_t {
  WGPUAdapterType_DiscreteGPU = 1,
  WGPUAdapterType_IntegratedGPU = 2,
  WGPUAdapterType_CPU = 3,
  WGPUAdapterType_Unknown = 4,
};

enum WGPUFeatureName : uint32_t {
  WGPUFeatureName_TimestampQuery = 0x3,
  WGPUFeatureName_ShaderF16 = 0xA,
  WGPUFeatureName_Subgroups = 0x11,
  WGPUFeatureName_ChromiumExperimentalSubgroupMatrix = 0x50038,
};

enum WGPUQueryType : uint32_t { WGPUQueryType_Occlusion = 1, WGPUQueryType_Timestamp = 2 };

// Bit flags (64-bit in this ABI).
constexpr WGPUFlags WGPUBufferUsage_MapRead = 1 << 0;
constexpr WGPUFlags WGPUBufferUsage_MapWrite = 1 << 1;
constexpr WGPUFlags WGPUBufferUsage_CopySrc = 1 << 2;
constexpr WGPUFlags WGPUBufferUsage_CopyDst = 1 << 3;
constexpr WGPUFlags WGPUBufferUsage_Uniform = 1 << 6;
constexpr WGPUFlags WGPUBufferUsage_Storage = 1 << 7;
constexpr WGPUFlags WGPUBufferUsage_QueryResolve = 1 << 9;
constexpr WGPUFlags WGPUMapMode_Read = 1 << 0;
constexpr WGPUFlags WGPUMapMode_Write = 1 << 1;

constexpr size_t WGPU_STRLEN = SIZE_MAX;
constexpr uint64_t WGPU_WHOLE_SIZE = UINT64_MAX;
constexpr uint32_t WGPU_QUERY_SET_INDEX_UNDEFINED = UINT32_MAX;

// ---- structs -------------------------------------------------------------------------------------------
struct WGPUStringView {
  const char* data;
  size_t length;
};

struct WGPUChainedStruct {
  const WGPUChainedStruct* next;
  WGPUSType sType;
};

struct WGPUFuture {
  uint64_t id;
};

struct WGPUFutureWaitInfo {
  WGPUFuture future;
  WGPUBool completed;
};

struct WGPUInstanceCapabilities {
  WGPUChainedStruct* nextInChain;
  WGPUBool timedWaitAnyEnable;
  size_t timedWaitAnyMaxCount;
};

struct WGPUInstanceDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUInstanceCapabilities capabilities;
};

struct WGPURequestAdapterOptions {
  const WGPUChainedStruct* nextInChain;
  WGPUFeatureLevel featureLevel;
  WGPUPowerPreference powerPreference;
  WGPUBool forceFallbackAdapter;
  WGPUBackendType backendType;
  WGPUSurface compatibleSurface;
};

using WGPURequestAdapterCallback = void (*)(WGPURequestAdapterStatus, WGPUAdapter, WGPUStringView message,
                                            void* userdata1, void* userdata2);
struct WGPURequestAdapterCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPURequestAdapterCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUAdapterInfo {
  WGPUChainedStruct* nextInChain;
  WGPUStringView vendor;
  WGPUStringView architecture;
  WGPUStringView device;
  WGPUStringView description;
  WGPUBackendType backendType;
  WGPUAdapterType adapterType;
  uint32_t vendorID;
  uint32_t deviceID;
  uint32_t subgroupMinSize;
  uint32_t subgroupMaxSize;
};

struct WGPULimits {
  WGPUChainedStruct* nextInChain;
  uint32_t maxTextureDimension1D;
  uint32_t maxTextureDimension2D;
  uint32_t maxTextureDimension3D;
  uint32_t maxTextureArrayLayers;
  uint32_t maxBindGroups;
  uint32_t maxBindGroupsPlusVertexBuffers;
  uint32_t maxBindingsPerBindGroup;
  uint32_t maxDynamicUniformBuffersPerPipelineLayout;
  uint32_t maxDynamicStorageBuffersPerPipelineLayout;
  uint32_t maxSampledTexturesPerShaderStage;
  uint32_t maxSamplersPerShaderStage;
  uint32_t maxStorageBuffersPerShaderStage;
  uint32_t maxStorageTexturesPerShaderStage;
  uint32_t maxUniformBuffersPerShaderStage;
  uint64_t maxUniformBufferBindingSize;
  uint64_t maxStorageBufferBindingSize;
  uint32_t minUniformBufferOffsetAlignment;
  uint32_t minStorageBufferOffsetAlignment;
  uint32_t maxVertexBuffers;
  uint64_t maxBufferSize;
  uint32_t maxVertexAttributes;
  uint32_t maxVertexBufferArrayStride;
  uint32_t maxInterStageShaderVariables;
  uint32_t maxColorAttachments;
  uint32_t maxColorAttachmentBytesPerSample;
  uint32_t maxComputeWorkgroupStorageSize;
  uint32_t maxComputeInvocationsPerWorkgroup;
  uint32_t maxComputeWorkgroupSizeX;
  uint32_t maxComputeWorkgroupSizeY;
  uint32_t maxComputeWorkgroupSizeZ;
  uint32_t maxComputeWorkgroupsPerDimension;
  uint32_t maxImmediateSize;
  uint32_t maxStorageBuffersInVertexStage;
  uint32_t maxStorageTexturesInVertexStage;
  uint32_t maxStorageBuffersInFragmentStage;
  uint32_t maxStorageTexturesInFragmentStage;
};

struct WGPUSupportedFeatures {
  size_t featureCount;
  const WGPUFeatureName* features;
};

struct WGPUQueueDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

using WGPUDeviceLostCallback = void (*)(const WGPUDevice* device, WGPUDeviceLostReason, WGPUStringView message,
                                        void* userdata1, void* userdata2);
struct WGPUDeviceLostCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUDeviceLostCallback callback;
  void* userdata1;
  void* userdata2;
};

using WGPUUncapturedErrorCallback = void (*)(const WGPUDevice* device, WGPUErrorType, WGPUStringView message,
                                             void* userdata1, void* userdata2);
struct WGPUUncapturedErrorCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUUncapturedErrorCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUDeviceDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  size_t requiredFeatureCount;
  const WGPUFeatureName* requiredFeatures;
  const WGPULimits* requiredLimits;
  WGPUQueueDescriptor defaultQueue;
  WGPUDeviceLostCallbackInfo deviceLostCallbackInfo;
  WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
};

struct WGPUDawnTogglesDescriptor {
  WGPUChainedStruct chain;
  size_t enabledToggleCount;
  const char* const* enabledToggles;
  size_t disabledToggleCount;
  const char* const* disabledToggles;
};

// Dawn's blob cache (chained to the device descriptor): Dawn asks `load` for a blob by key (returning its size,
// and copying it when `value` is large enough; 0: none) and hands new blobs to `store`. Compiled shaders and
// the Vulkan pipeline cache go through it.
using WGPUDawnLoadCacheDataFunction = size_t (*)(const void* key, size_t keySize, void* value, size_t valueSize,
                                                 void* userdata);
using WGPUDawnStoreCacheDataFunction = void (*)(const void* key, size_t keySize, const void* value, size_t valueSize,
                                                void* userdata);
struct WGPUDawnCacheDeviceDescriptor {
  WGPUChainedStruct chain;
  WGPUStringView isolationKey;
  WGPUDawnLoadCacheDataFunction loadDataFunction;
  WGPUDawnStoreCacheDataFunction storeDataFunction;
  void* functionUserdata;
};

using WGPURequestDeviceCallback = void (*)(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView message,
                                           void* userdata1, void* userdata2);
struct WGPURequestDeviceCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPURequestDeviceCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUBufferDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUFlags usage;
  uint64_t size;
  WGPUBool mappedAtCreation;
};

using WGPUBufferMapCallback = void (*)(WGPUMapAsyncStatus, WGPUStringView message, void* userdata1,
                                       void* userdata2);
struct WGPUBufferMapCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUBufferMapCallback callback;
  void* userdata1;
  void* userdata2;
};

using WGPUQueueWorkDoneCallback = void (*)(WGPUQueueWorkDoneStatus, void* userdata1, void* userdata2);
struct WGPUQueueWorkDoneCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUQueueWorkDoneCallback callback;
  void* userdata1;
  void* userdata2;
};

using WGPUPopErrorScopeCallback = void (*)(WGPUPopErrorScopeStatus, WGPUErrorType, WGPUStringView message,
                                           void* userdata1, void* userdata2);
struct WGPUPopErrorScopeCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUPopErrorScopeCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUShaderModuleDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUShaderSourceWGSL {
  WGPUChainedStruct chain;
  WGPUStringView code;
};

struct WGPUConstantEntry {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView key;
  double value;
};

struct WGPUComputeState {
  const WGPUChainedStruct* nextInChain;
  WGPUShaderModule module;
  WGPUStringView entryPoint;
  size_t constantCount;
  const WGPUConstantEntry* constants;
};

struct WGPUComputePipelineDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUPipelineLayout layout;  // null: "auto" layout derived from the shader
  WGPUComputeState compute;
};

using WGPUCreateComputePipelineAsyncCallback = void (*)(WGPUCreatePipelineAsyncStatus, WGPUComputePipeline,
                                                        WGPUStringView message, void* userdata1, void* userdata2);
struct WGPUCreateComputePipelineAsyncCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUCreateComputePipelineAsyncCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUBindGroupEntry {
  const WGPUChainedStruct* nextInChain;
  uint32_t binding;
  WGPUBuffer buffer;
  uint64_t offset;
  uint64_t size;
  WGPUSampler sampler;
  WGPUTextureView textureView;
};

struct WGPUBindGroupDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUBindGroupLayout layout;
  size_t entryCount;
  const WGPUBindGroupEntry* entries;
};

struct WGPUCommandEncoderDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUPassTimestampWrites {
  const WGPUChainedStruct* nextInChain;
  WGPUQuerySet querySet;
  uint32_t beginningOfPassWriteIndex;
  uint32_t endOfPassWriteIndex;
};

struct WGPUComputePassDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  const WGPUPassTimestampWrites* timestampWrites;
};

struct WGPUCommandBufferDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUQuerySetDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUQueryType type;
  uint32_t count;
};

// ---- layout checks (x86-64 / LP64) --------------------------------------------------------------------
static_assert(sizeof(WGPUStringView) == 16);
static_assert(sizeof(WGPUChainedStruct) == 16);
static_assert(sizeof(WGPUFutureWaitInfo) == 16);
static_assert(sizeof(WGPUInstanceDescriptor) == 32);
static_assert(sizeof(WGPURequestAdapterOptions) == 32);
static_assert(sizeof(WGPURequestAdapterCallbackInfo) == 40);
static_assert(sizeof(WGPUAdapterInfo) == 96);
static_assert(offsetof(WGPULimits, maxUniformBufferBindingSize) == 64);
static_assert(offsetof(WGPULimits, maxBufferSize) == 96);
static_assert(offsetof(WGPULimits, maxComputeWorkgroupsPerDimension) == 144);
static_assert(sizeof(WGPULimits) == 168);
static_assert(sizeof(WGPUDeviceDescriptor) == 144);
static_assert(offsetof(WGPUDeviceDescriptor, deviceLostCallbackInfo) == 72);
static_assert(sizeof(WGPUDawnTogglesDescriptor) == 48);
static_assert(sizeof(WGPUDawnCacheDeviceDescriptor) == 56);
static_assert(sizeof(WGPUCreateComputePipelineAsyncCallbackInfo) == 40);
static_assert(sizeof(WGPUBufferDescriptor) == 48);
static_assert(sizeof(WGPUShaderSourceWGSL) == 32);
static_assert(sizeof(WGPUConstantEntry) == 32);
static_assert(sizeof(WGPUComputeState) == 48);
static_assert(sizeof(WGPUComputePipelineDescriptor) == 80);
static_assert(sizeof(WGPUBindGroupEntry) == 56);
static_assert(sizeof(WGPUBindGroupDescriptor) == 48);
static_assert(sizeof(WGPUPassTimestampWrites) == 24);
static_assert(sizeof(WGPUComputePassDescriptor) == 32);
static_assert(sizeof(WGPUQuerySetDescriptor) == 32);

// ---- functions -----------------------------------------------------------------------------------------
WGPUInstance wgpuCreateInstance(const WGPUInstanceDescriptor* descriptor);
WGPUStatus wgpuGetInstanceCapabilities(WGPUInstanceCapabilities* capabilities);
WGPUFuture wgpuInstanceRequestAdapter(WGPUInstance, const WGPURequestAdapterOptions*,
                                      WGPURequestAdapterCallbackInfo);
WGPUWaitStatus wgpuInstanceWaitAny(WGPUInstance, size_t futureCount, WGPUFutureWaitInfo* futures,
                                   uint64_t timeoutNS);
void wgpuInstanceProcessEvents(WGPUInstance);
void wgpuInstanceRelease(WGPUInstance);

WGPUStatus wgpuAdapterGetInfo(WGPUAdapter, WGPUAdapterInfo* info);
void wgpuAdapterInfoFreeMembers(WGPUAdapterInfo info);
WGPUStatus wgpuAdapterGetLimits(WGPUAdapter, WGPULimits* limits);
void wgpuAdapterGetFeatures(WGPUAdapter, WGPUSupportedFeatures* features);
WGPUBool wgpuAdapterHasFeature(WGPUAdapter, WGPUFeatureName);
void wgpuSupportedFeaturesFreeMembers(WGPUSupportedFeatures features);
WGPUFuture wgpuAdapterRequestDevice(WGPUAdapter, const WGPUDeviceDescriptor*, WGPURequestDeviceCallbackInfo);
void wgpuAdapterRelease(WGPUAdapter);

WGPUQueue wgpuDeviceGetQueue(WGPUDevice);
WGPUStatus wgpuDeviceGetLimits(WGPUDevice, WGPULimits* limits);
WGPUBool wgpuDeviceHasFeature(WGPUDevice, WGPUFeatureName);
WGPUBuffer wgpuDeviceCreateBuffer(WGPUDevice, const WGPUBufferDescriptor*);
WGPUShaderModule wgpuDeviceCreateShaderModule(WGPUDevice, const WGPUShaderModuleDescriptor*);
WGPUComputePipeline wgpuDeviceCreateComputePipeline(WGPUDevice, const WGPUComputePipelineDescriptor*);
WGPUFuture wgpuDeviceCreateComputePipelineAsync(WGPUDevice, const WGPUComputePipelineDescriptor*,
                                                WGPUCreateComputePipelineAsyncCallbackInfo);
WGPUBindGroup wgpuDeviceCreateBindGroup(WGPUDevice, const WGPUBindGroupDescriptor*);
WGPUCommandEncoder wgpuDeviceCreateCommandEncoder(WGPUDevice, const WGPUCommandEncoderDescriptor*);
WGPUQuerySet wgpuDeviceCreateQuerySet(WGPUDevice, const WGPUQuerySetDescriptor*);
void wgpuDevicePushErrorScope(WGPUDevice, WGPUErrorFilter);
WGPUFuture wgpuDevicePopErrorScope(WGPUDevice, WGPUPopErrorScopeCallbackInfo);
void wgpuDeviceDestroy(WGPUDevice);
void wgpuDeviceRelease(WGPUDevice);

void wgpuQueueSubmit(WGPUQueue, size_t commandCount, const WGPUCommandBuffer* commands);
void wgpuQueueWriteBuffer(WGPUQueue, WGPUBuffer, uint64_t bufferOffset, const void* data, size_t size);
WGPUFuture wgpuQueueOnSubmittedWorkDone(WGPUQueue, WGPUQueueWorkDoneCallbackInfo);
void wgpuQueueRelease(WGPUQueue);

WGPUFuture wgpuBufferMapAsync(WGPUBuffer, WGPUFlags mode, size_t offset, size_t size, WGPUBufferMapCallbackInfo);
const void* wgpuBufferGetConstMappedRange(WGPUBuffer, size_t offset, size_t size);
void* wgpuBufferGetMappedRange(WGPUBuffer, size_t offset, size_t size);
void wgpuBufferUnmap(WGPUBuffer);
uint64_t wgpuBufferGetSize(WGPUBuffer);
void wgpuBufferDestroy(WGPUBuffer);
void wgpuBufferRelease(WGPUBuffer);

void wgpuShaderModuleRelease(WGPUShaderModule);
WGPUBindGroupLayout wgpuComputePipelineGetBindGroupLayout(WGPUComputePipeline, uint32_t groupIndex);
void wgpuComputePipelineRelease(WGPUComputePipeline);
void wgpuBindGroupLayoutRelease(WGPUBindGroupLayout);
void wgpuBindGroupRelease(WGPUBindGroup);

WGPUComputePassEncoder wgpuCommandEncoderBeginComputePass(WGPUCommandEncoder, const WGPUComputePassDescriptor*);
void wgpuCommandEncoderCopyBufferToBuffer(WGPUCommandEncoder, WGPUBuffer source, uint64_t sourceOffset,
                                          WGPUBuffer destination, uint64_t destinationOffset, uint64_t size);
void wgpuCommandEncoderClearBuffer(WGPUCommandEncoder, WGPUBuffer, uint64_t offset, uint64_t size);
void wgpuCommandEncoderResolveQuerySet(WGPUCommandEncoder, WGPUQuerySet, uint32_t firstQuery, uint32_t queryCount,
                                       WGPUBuffer destination, uint64_t destinationOffset);
WGPUCommandBuffer wgpuCommandEncoderFinish(WGPUCommandEncoder, const WGPUCommandBufferDescriptor*);
void wgpuCommandEncoderRelease(WGPUCommandEncoder);
void wgpuCommandBufferRelease(WGPUCommandBuffer);

void wgpuComputePassEncoderSetPipeline(WGPUComputePassEncoder, WGPUComputePipeline);
void wgpuComputePassEncoderSetBindGroup(WGPUComputePassEncoder, uint32_t groupIndex, WGPUBindGroup,
                                        size_t dynamicOffsetCount, const uint32_t* dynamicOffsets);
void wgpuComputePassEncoderDispatchWorkgroups(WGPUComputePassEncoder, uint32_t x, uint32_t y, uint32_t z);
void wgpuComputePassEncoderEnd(WGPUComputePassEncoder);
void wgpuComputePassEncoderRelease(WGPUComputePassEncoder);

void wgpuQuerySetDestroy(WGPUQuerySet);
void wgpuQuerySetRelease(WGPUQuerySet);

}  // extern "C"
