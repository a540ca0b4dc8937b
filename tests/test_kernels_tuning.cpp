// The adapter's tuning: the probe measures sane figures (whatever the adapter's speed: nothing here depends on
// timing), the tuning file round-trips, a corrupt file is measured again with a warning rather than an error,
// and the launch rules follow the tuning they are given.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <unistd.h>

#include "gerbil/error.h"
#include "kernels/model.h"
#include "kernels/tuning.h"
#include "support/device.h"

namespace gerbil::kernels {
namespace {

using ::testing::HasSubstr;
using test::device;

// A cache folder of its own (GERBIL_CACHE_DIR) for the test, removed after it.
class TuningCache : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(folder_);
    setenv("GERBIL_CACHE_DIR", folder_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("GERBIL_CACHE_DIR");
    std::filesystem::remove_all(folder_);
  }
  std::filesystem::path folder_ =
      std::filesystem::temp_directory_path() / ("gerbil-tuning-test-" + std::to_string(::getpid()));
};

void write_text(const std::filesystem::path& file, const std::string& text) { std::ofstream(file) << text; }

TEST_F(TuningCache, FileRoundTripsAndLivesUnderTheCacheFolder) {
  auto file = tuning_file(device().adapter());
  EXPECT_EQ(file.parent_path(), folder_);
  EXPECT_THAT(file.filename().string(), HasSubstr(adapter_key(device().adapter())));
  Tuning written{.resident_workgroups = 1056, .resident_tiles = 264, .probe_seconds = 0.25};
  write_tuning(file, device().adapter(), written);
  Tuning read = read_tuning(file);
  EXPECT_EQ(read.resident_workgroups, 1056u);
  EXPECT_EQ(read.resident_tiles, 264u);
  EXPECT_EQ(read.probe_seconds, 0.25);
}

TEST_F(TuningCache, ReadingNamesTheFileAndWhatIsWrong) {
  auto file = folder_ / "tuning.json";
  write_text(file, "{not json");
  EXPECT_THAT([&] { read_tuning(file); }, ThrowsMessage<Error>(AllOf(HasSubstr(file.string()), HasSubstr("JSON"))));
  write_text(file, R"({"version": 2, "resident_workgroups": 0, "resident_tiles": 4})");
  EXPECT_THAT([&] { read_tuning(file); }, ThrowsMessage<Error>(HasSubstr("'resident_workgroups'")));
  write_text(file, R"({"version": 2, "resident_workgroups": 8, "resident_tiles": "many"})");
  EXPECT_THAT([&] { read_tuning(file); }, ThrowsMessage<Error>(HasSubstr("'resident_tiles'")));
  write_text(file, R"({"version": 99, "resident_workgroups": 8, "resident_tiles": 2})");
  EXPECT_THAT([&] { read_tuning(file); }, ThrowsMessage<Error>(HasSubstr("version 99")));
  // Version 1's probe timed on the host clock, which a busy machine could fool: its files are measured again.
  write_text(file, R"({"version": 1, "resident_workgroups": 8, "resident_tiles": 2})");
  EXPECT_THAT([&] { read_tuning(file); }, ThrowsMessage<Error>(HasSubstr("version 1 is not 2")));
}

TEST_F(TuningCache, ACorruptFileIsMeasuredAgainWithAWarning) {
  gpu::Device fresh;
  auto file = tuning_file(fresh.adapter());
  write_text(file, "garbage");
  testing::internal::CaptureStderr();
  const Tuning& tuned = tuning(fresh);
  std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_THAT(warning, AllOf(HasSubstr("warning"), HasSubstr(file.string()), HasSubstr("measuring the adapter again")));
  EXPECT_GE(tuned.resident_workgroups, 1u);
  EXPECT_EQ(tuned.resident_tiles, std::max(1u, tuned.resident_workgroups / 4));
  // The file now holds the new measurement, which the next device reads instead of probing.
  Tuning kept = read_tuning(file);
  EXPECT_EQ(kept.resident_workgroups, tuned.resident_workgroups);
  write_tuning(file, fresh.adapter(), {.resident_workgroups = 77, .resident_tiles = 19});
  gpu::Device another;
  EXPECT_EQ(tuning(another).resident_workgroups, 77u);
  EXPECT_EQ(tuning(another).resident_tiles, 19u);
}

TEST_F(TuningCache, WithoutACacheFolderTheProbeStillServes) {
  setenv("GERBIL_CACHE_DIR", "off", 1);
  EXPECT_TRUE(tuning_file(device().adapter()).empty());
  gpu::Device fresh;
  EXPECT_GE(tuning(fresh).resident_workgroups, 1u);
  EXPECT_TRUE(std::filesystem::is_empty(folder_));
}

// The launch rules read the device's tuning: the same prompt product is shared out over the resident tiles,
// and a decode product with 8 KiB rows runs on a grid of the resident workgroups.
TEST(TunedRules, FollowTheDevicesTuning) {
  gpu::Device fresh;
  LinearParams p{512, 4096, 6144, 6144, 0, 0, 0};
  fresh.set_tuning({.resident_workgroups = 1056, .resident_tiles = 264});
  EXPECT_EQ(linear_split_workers(fresh, p), 264u);
  EXPECT_EQ(linear_split_scratch_bound(fresh), 2u * 264 * 128 * 128);
  fresh.set_tuning({.resident_workgroups = 320, .resident_tiles = 80});
  EXPECT_EQ(linear_split_workers(fresh, p), 80u);
  EXPECT_EQ(linear_split_scratch_bound(fresh), 2u * 80 * 128 * 128);
  if (linear_can_fuse(fresh, 1, 4096, WeightType::F16)) {
    EXPECT_EQ(linear_matvec_blocking(fresh, 4096, 4096, WeightType::F16).workgroups, 320u);
  }
}

// The choices no GPU's figures are written into: the H200's tuning (1,056 resident workgroups, 264 resident
// tiles) gives the constants they replace (128 tiles, hidden size 4,096), lavapipe's (1, 1) its own, and the
// prompt products' tile follows the resident tiles it is given.
TEST(TunedChoices, FollowTheResidentCounts) {
  EXPECT_EQ(tiled_fill(264), 128u);  // an H200
  EXPECT_EQ(tiled_fill(1), 1u);      // lavapipe
  EXPECT_EQ(tiled_fill(80), 32u);
  EXPECT_EQ(tiled_fill(512), 256u);
  EXPECT_EQ(prepared_norm_min_hidden(1056), 4096u);  // an H200: llama3-8b prepares, qwen2.5-7b (3,584) does not
  EXPECT_EQ(prepared_norm_min_hidden(1), 4u);        // lavapipe: every model
  EXPECT_EQ(prepared_norm_min_hidden(320), 1024u);
  // M = 512, N = 896: 28 tiles of 128 x 128, 56 of 128 x 64, 112 of 64 x 64.
  LinearParams p{512, 896, 896, 896, 0, 0, 0};
  EXPECT_EQ(linear_grid(p, 264).x, 112u);  // fill 128: 64 x 64
  EXPECT_EQ(linear_grid(p, 64).x, 56u);    // fill 32: 128 x 64
  EXPECT_EQ(linear_grid(p, 1).x, 28u);     // fill 1: 128 x 128
  // Exactly the H200's fill (M = 512, N = 4096: 128 tiles of 128 x 128) keeps the large tile.
  EXPECT_EQ(linear_grid({512, 4096, 4096, 4096, 0, 0, 0}, 264).x, 128u);
}

}  // namespace
}  // namespace gerbil::kernels
