// Pipelines created ahead of use: a PipelineCollection notes what code would create without creating it, then
// creates it all at once (Dawn's asynchronous creation); the pipelines then serve that code with no compile.
// And the disk cache Dawn's blob cache writes through: blobs round-trip by key, a foreign or short file is a
// miss, and a device with a cache folder stores its compiled pipelines there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <unistd.h>

#include "gerbil/error.h"
#include "gpu/device.h"
#include "gpu/disk_cache.h"
#include "support/device.h"

namespace gerbil::gpu {
namespace {

using ::testing::HasSubstr;
using test::device;

// out[i] = i * SCALE, a constant each pipeline is compiled with.
constexpr std::string_view kScaled = R"(
override SCALE: f32 = 1.0;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.x < arrayLength(&out)) { out[id.x] = f32(id.x) * SCALE; }
}
)";

std::vector<float> run_scaled(Device& device, const Pipeline& pipeline) {
  Buffer out = device.create_buffer("out", 64 * 4);
  BufferBinding binding{&out};
  BindGroup group = device.bind(pipeline, std::span(&binding, 1));
  Recorder recorder(device);
  recorder.dispatch(pipeline, group, {1, 1, 1});
  recorder.submit();
  return device.read_as<float>(out);
}

// A fresh folder, removed at the end of the test.
struct TempFolder {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("gerbil-gpu-test-" + std::to_string(::getpid()) + "-" + std::to_string(next++));
  static inline int next = 0;
  ~TempFolder() { std::filesystem::remove_all(path); }
};

std::span<const std::byte> bytes(std::string_view text) { return std::as_bytes(std::span(text.data(), text.size())); }

TEST(PipelineCollection, NotesPipelinesThenCreatesThemTogether) {
  Device& d = device();
  const Pipeline* stand_in = nullptr;
  {
    Device::PipelineCollection collection(d);
    EXPECT_TRUE(d.collecting());
    stand_in = &d.pipeline("scaled", kScaled, {{"SCALE", 3.0}});
    EXPECT_EQ(stand_in->get(), nullptr);  // noted, not compiled
    EXPECT_EQ(&d.pipeline("scaled", kScaled, {{"SCALE", 3.0}}), stand_in);  // noted once
    d.pipeline("scaled", kScaled, {{"SCALE", 5.0}});
    Buffer stand_in_buffer = d.create_buffer("stand-in", 16);
    EXPECT_FALSE(stand_in_buffer);  // no GPU memory while collecting
    EXPECT_THAT([&] { Device::PipelineCollection second(d); }, ThrowsMessage<Error>(HasSubstr("already open")));
    EXPECT_EQ(collection.create(), 2u);
    EXPECT_FALSE(d.collecting());
  }
  const Pipeline& three = d.pipeline("scaled", kScaled, {{"SCALE", 3.0}});
  ASSERT_NE(three.get(), nullptr);
  auto out = run_scaled(d, three);
  auto five = run_scaled(d, d.pipeline("scaled", kScaled, {{"SCALE", 5.0}}));
  for (uint32_t i = 0; i < 64; ++i) {
    EXPECT_EQ(out[i], 3.0f * float(i));
    EXPECT_EQ(five[i], 5.0f * float(i));
  }
}

TEST(PipelineCollection, ClosedWithoutCreatingLeavesNothingBehind) {
  Device& d = device();
  { Device::PipelineCollection collection(d); d.pipeline("scaled", kScaled, {{"SCALE", 7.0}}); }
  EXPECT_FALSE(d.collecting());
  const Pipeline& seven = d.pipeline("scaled", kScaled, {{"SCALE", 7.0}});
  ASSERT_NE(seven.get(), nullptr);
  EXPECT_EQ(run_scaled(d, seven)[9], 63.0f);
}

TEST(CreatePipelines, NamesTheKernelThatFails) {
  std::vector<Device::PipelineSpec> specs = {{"scaled", kScaled, {{"SCALE", 2.0}}},
                                             {"scaled", kScaled, {{"NO_SUCH_CONSTANT", 1.0}}}};
  EXPECT_THAT([&] { device().create_pipelines(specs); },
              ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'scaled'"), HasSubstr("creating the compute pipeline"))));
}

TEST(DiskCache, BlobsRoundTripByKeyAndForeignFilesMiss) {
  TempFolder dir;
  DiskCache cache(dir.path / "blobs");
  EXPECT_FALSE(cache.load(bytes("missing")));
  std::string value(1000, 'v');
  value[17] = '\0';
  cache.store(bytes("key one"), bytes(value));
  cache.store(bytes("key two"), bytes("second"));
  auto one = cache.load(bytes("key one"));
  ASSERT_TRUE(one);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(one->data()), one->size()), value);
  auto two = cache.load(bytes("key two"));
  ASSERT_TRUE(two);
  EXPECT_EQ(two->size(), 6u);
  // Every file cut short (or overwritten by something else) reads as a miss, never an error.
  for (const auto& entry : std::filesystem::directory_iterator(cache.folder())) {
    std::filesystem::resize_file(entry.path(), 5);
  }
  EXPECT_FALSE(cache.load(bytes("key one")));
  EXPECT_FALSE(cache.load(bytes("key two")));
}

TEST(DiskCache, FolderFollowsTheEnvironment) {
  const char* saved = std::getenv("GERBIL_CACHE_DIR");
  std::string restore = saved ? saved : "";
  setenv("GERBIL_CACHE_DIR", "/some/where", 1);
  EXPECT_EQ(cache_dir(), std::filesystem::path("/some/where"));
  setenv("GERBIL_CACHE_DIR", "off", 1);
  EXPECT_TRUE(cache_dir().empty());
  unsetenv("GERBIL_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(cache_dir(), std::filesystem::path("/xdg/gerbil"));
  if (saved) setenv("GERBIL_CACHE_DIR", restore.c_str(), 1);
}

TEST(DiskCache, DawnStoresCompiledPipelinesThere) {
  TempFolder dir;
  setenv("GERBIL_CACHE_DIR", dir.path.c_str(), 1);
  {
    Device fresh;
    const Pipeline& pipeline = fresh.pipeline("scaled", kScaled, {{"SCALE", 11.0}});
    EXPECT_EQ(run_scaled(fresh, pipeline)[2], 22.0f);
  }
  unsetenv("GERBIL_CACHE_DIR");
  size_t blobs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path / "dawn")) blobs += entry.is_regular_file();
  EXPECT_GT(blobs, 0u);
}

}  // namespace
}  // namespace gerbil::gpu
