// The device layer on the real default adapter (lavapipe in CI): ABI values, buffers, pipelines,
// the recorder, timestamps, and every error path turning into a clear gerbil::Error.
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "gpu/device.h"

namespace gerbil::gpu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

Device& device() {
  static Device shared;
  return shared;
}

// Adds 1 to every element; dispatching it N times in one pass must add N (barriers between dispatches).
constexpr std::string_view kIncrement = R"(
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.x < arrayLength(&data)) { data[id.x] = data[id.x] + 1u; }
}
)";

TEST(GpuAbi, InstanceSupportsTimedWaits) {
  WGPUInstanceCapabilities capabilities{};
  ASSERT_EQ(wgpuGetInstanceCapabilities(&capabilities), WGPUStatus_Success);
  EXPECT_EQ(capabilities.timedWaitAnyEnable, 1u);
  EXPECT_GT(capabilities.timedWaitAnyMaxCount, 0u);
}

TEST(GpuAbi, AdapterIsDescribedAndFeatureValuesMatchThisDawn) {
  const AdapterInfo& info = device().adapter();
  EXPECT_FALSE(info.description.empty());
  EXPECT_EQ(info.backend, "Vulkan");
  // lavapipe supports shader-f16 and subgroups: if the feature enum values were those of another
  // webgpu.h version, these would read as other features and come back false.
  if (info.device.find("llvmpipe") != std::string::npos) {
    EXPECT_EQ(info.adapter_type, "CPU");
    EXPECT_TRUE(device().features().shader_f16);
    EXPECT_TRUE(device().features().subgroups);
    EXPECT_TRUE(device().features().timestamp_query);
  }
  EXPECT_GE(device().limits().maxComputeInvocationsPerWorkgroup, 256u);
  EXPECT_GE(device().limits().maxStorageBufferBindingSize, 128u << 20);
  EXPECT_EQ(device().limits().maxComputeWorkgroupsPerDimension, 65535u);
}

TEST(GpuDevice, ShaderF16CanBeTurnedOff) {
  Device without_f16({.allow_shader_f16 = false});
  EXPECT_FALSE(without_f16.features().shader_f16);
}

TEST(GpuDevice, UnknownAdapterNameListsTheAvailableOnes) {
  try {
    Device none({.adapter = "no-such-gpu-xyz"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no-such-gpu-xyz"));
    EXPECT_THAT(e.what(), HasSubstr(device().adapter().backend));
  }
}

// Placeholders stand in for unused writable bindings: distinct 16-byte ranges of one buffer, a fixed number.
TEST(GpuDevice, PlaceholdersAreDistinctRangesAndBounded) {
  BufferBinding a = device().placeholder(0), b = device().placeholder(15);
  EXPECT_EQ(a.buffer, b.buffer);
  EXPECT_EQ(a.size, 16u);
  EXPECT_GE(b.offset, a.offset + 15 * 16);
  EXPECT_EQ(b.offset % device().limits().minStorageBufferOffsetAlignment, 0u);
  EXPECT_THAT([] { device().placeholder(16); }, ::testing::ThrowsMessage<Error>(HasSubstr("placeholder binding 16")));
}

TEST(GpuBuffer, RoundTripsOddSizes) {
  for (size_t bytes : {1u, 3u, 13u, 4096u, (1u << 20) + 3}) {
    std::vector<std::byte> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = std::byte(i * 7 + 3);
    Buffer buffer = device().create_buffer("roundtrip", bytes);
    device().write<std::byte>(buffer, data);
    EXPECT_EQ(device().read(buffer), data) << bytes << " bytes";
  }
}

TEST(GpuBuffer, MappedAtCreationHoldsWhatThreadsWrote) {
  for (size_t bytes : {1u, 13u, (1u << 20) + 3}) {
    Buffer buffer = device().create_mapped("mapped", bytes);
    std::span<std::byte> mapped = device().mapped_range(buffer);
    ASSERT_EQ(mapped.size(), (bytes + 3) / 4 * 4);
    std::vector<std::byte> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = std::byte(i * 11 + 5);
    // Two threads fill the halves, as the weight upload's workers do.
    size_t half = bytes / 2;
    std::thread other([&] { std::memcpy(mapped.data() + half, data.data() + half, bytes - half); });
    std::memcpy(mapped.data(), data.data(), half);
    other.join();
    device().unmap(buffer.get());
    EXPECT_EQ(device().read(buffer), data) << bytes << " bytes";
  }
}

TEST(GpuErrors, MappedRangeOfAnUnmappedBufferNamesIt) {
  Buffer buffer = device().create_buffer("plain", 16);
  EXPECT_THAT([&] { device().mapped_range(buffer); },
              ::testing::ThrowsMessage<Error>(HasSubstr("buffer 'plain' is not mapped")));
}

TEST(GpuBuffer, ReadsAnOffsetRange) {
  std::vector<uint32_t> values(100);
  std::iota(values.begin(), values.end(), 0u);
  Buffer buffer = device().upload("range", std::span<const uint32_t>(values));
  EXPECT_EQ(device().read_as<uint32_t>(buffer, 40, 3), (std::vector<uint32_t>{10, 11, 12}));
}

TEST(GpuErrors, WritePastTheEndNamesTheBuffer) {
  Buffer buffer = device().create_buffer("small", 16);
  std::vector<float> values(5);
  EXPECT_THAT([&] { device().write<float>(buffer, values); },
              ::testing::ThrowsMessage<Error>(HasSubstr("'small' of 16 bytes")));
}

TEST(GpuErrors, BufferLargerThanTheAdapterAllows) {
  uint64_t too_big = device().limits().maxBufferSize + 1;
  EXPECT_THAT([&] { device().create_buffer("huge", too_big); },
              ::testing::ThrowsMessage<Error>(HasSubstr("exceeds the adapter's maxBufferSize")));
}

TEST(GpuErrors, BindingLargerThanTheStorageBindingLimit) {
  uint64_t limit = device().limits().maxStorageBufferBindingSize;
  if (limit >= device().limits().maxBufferSize) GTEST_SKIP() << "binding limit equals buffer limit here";
  Buffer big = device().create_buffer("big", limit + 4);
  const Pipeline& pipeline = device().pipeline("increment", kIncrement);
  BufferBinding binding{&big};
  EXPECT_THAT([&] { device().bind(pipeline, std::span(&binding, 1)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("maxStorageBufferBindingSize")));
}

// A memory limit refuses the buffer that would pass it with OutOfMemory (what sizes itself to the memory catches
// that), and counts the padded bytes of live buffers: a move carries them, destroy() and destruction give them back,
// a refused buffer takes none.
TEST(GpuDevice, MemoryLimitRefusesBuffersPastItAndCountsWhatIsFreed) {
  Device limited({.memory_limit = 4096});
  EXPECT_EQ(limited.memory_limit(), 4096u);
  Buffer first = limited.create_buffer("first", 2997);  // padded to 3,000
  EXPECT_EQ(limited.buffer_bytes(), 3000u);
  EXPECT_THAT([&] { limited.create_buffer("second", 1097); },
              ::testing::ThrowsMessage<OutOfMemory>(AllOf(HasSubstr("'second' (1097 bytes)"), HasSubstr("4100 bytes"),
                                                          HasSubstr("memory limit of 4096 bytes"))));
  EXPECT_EQ(limited.buffer_bytes(), 3000u);
  Buffer second = limited.create_buffer("second", 1096);
  EXPECT_EQ(limited.buffer_bytes(), 4096u);
  Buffer moved = std::move(first);
  EXPECT_EQ(limited.buffer_bytes(), 4096u);
  moved.destroy();
  EXPECT_EQ(limited.buffer_bytes(), 1096u);
  {
    Buffer scoped = limited.create_mapped("scoped", 3000);
    EXPECT_EQ(limited.buffer_bytes(), 4096u);
    limited.unmap(scoped.get());
  }
  EXPECT_EQ(limited.buffer_bytes(), 1096u);
  second = Buffer();
  EXPECT_EQ(limited.buffer_bytes(), 0u);
}

TEST(GpuErrors, ReadingADestroyedBuffer) {
  Buffer buffer = device().create_buffer("gone", 64);
  buffer.destroy();
  EXPECT_THAT([&] { device().read(buffer); }, ::testing::ThrowsMessage<Error>(HasSubstr("'gone', which was destroyed")));
}

TEST(GpuErrors, WgslCompileErrorNamesKernelAndLine) {
  constexpr std::string_view broken = "@compute @workgroup_size(1)\nfn main() {\n  let x: u32 = 1.5;\n}\n";
  try {
    device().pipeline("broken_kernel", broken);
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("broken_kernel"));
    EXPECT_THAT(e.what(), HasSubstr(":3:"));  // line 3 of the WGSL
  }
  // The device stays usable after the error.
  EXPECT_NO_THROW(device().pipeline("increment", kIncrement));
}

TEST(GpuErrors, ValidationErrorAtBindingIsThrown) {
  const Pipeline& pipeline = device().pipeline("increment", kIncrement);
  Buffer uniform = device().create_buffer("a uniform", 16, BufferKind::Uniform);
  BufferBinding binding{&uniform};
  EXPECT_THAT([&] { device().bind(pipeline, std::span(&binding, 1)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("validation error")));
}

TEST(GpuRecorder, ManyDispatchesInOnePassAreOrdered) {
  std::vector<uint32_t> zeros(1000, 0);
  Buffer data = device().upload("counter", std::span<const uint32_t>(zeros));
  const Pipeline& pipeline = device().pipeline("increment", kIncrement);
  BufferBinding binding{&data};
  BindGroup group = device().bind(pipeline, std::span(&binding, 1));
  Recorder recorder(device(), "increments");
  for (int i = 0; i < 500; ++i) recorder.dispatch(pipeline, group, {16, 1, 1});
  EXPECT_EQ(recorder.dispatch_count(), 500u);
  recorder.submit();
  auto result = device().read_as<uint32_t>(data);
  EXPECT_EQ(result, std::vector<uint32_t>(1000, 500));
}

TEST(GpuRecorder, TimestampsBracketADispatch) {
  if (!device().features().timestamp_query) GTEST_SKIP() << "adapter lacks timestamp-query";
  WGPUQuerySetDescriptor descriptor{};
  descriptor.type = WGPUQueryType_Timestamp;
  descriptor.count = 2;
  QuerySetHandle queries(wgpuDeviceCreateQuerySet(device().get(), &descriptor));
  std::vector<uint32_t> zeros(1 << 16, 0);
  Buffer data = device().upload("timed", std::span<const uint32_t>(zeros));
  const Pipeline& pipeline = device().pipeline("increment", kIncrement);
  BufferBinding binding{&data};
  BindGroup group = device().bind(pipeline, std::span(&binding, 1));
  Buffer resolved = device().create_buffer("timestamps", 16, BufferKind::QueryResolve);
  Buffer readable = device().create_buffer("timestamps copy", 16);
  Recorder recorder(device(), "timed");
  recorder.dispatch_timed(pipeline, group, {1024, 1, 1}, queries.get(), 0);
  recorder.resolve(queries.get(), 2, resolved);
  recorder.copy(resolved, 0, readable, 0, 16);
  recorder.submit();
  auto stamps = device().read_as<uint64_t>(readable);
  ASSERT_EQ(stamps.size(), 2u);
  EXPECT_GE(stamps[1], stamps[0]);
  EXPECT_EQ(device().read_as<uint32_t>(data, 0, 3), (std::vector<uint32_t>{1, 1, 1}));
}

}  // namespace
}  // namespace gerbil::gpu
