// GpuTimer on the default adapter (lavapipe in CI): GPU timestamps and the forced host-clock fallback both
// time each dispatch with a positive duration, a big dispatch takes longer than a tiny one, the timed work
// really runs (collect() submits it), and misuse (capacity, mixing recorders) is a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "gpu/profiler.h"

namespace gerbil::gpu {
namespace {

using ::testing::HasSubstr;

DeviceOptions profiling_options() {
  DeviceOptions options;
  request_precise_timestamps(options);
  return options;
}

Device& device() {
  static Device shared(profiling_options());
  return shared;
}

// Every thread iterates x = x / 2 + 1 (which tends to 2) `reps` times on its element.
constexpr std::string_view kSpin = R"(
struct Params { reps: u32 }
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@group(0) @binding(1) var<uniform> params: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.x >= arrayLength(&data)) { return; }
  var x = data[id.x];
  for (var i = 0u; i < params.reps; i++) { x = fma(x, 0.5, 1.0); }
  data[id.x] = x;
}
)";

// One spin dispatch over `workgroups` x 64 zeros with its own buffers.
struct Spin {
  Buffer data, params;
  BindGroup group;
  Grid grid;

  Spin(uint32_t workgroups, uint32_t reps) : grid{workgroups, 1, 1} {
    std::vector<float> zeros(workgroups * 64, 0.f);
    data = device().upload("spin data", std::span<const float>(zeros));
    uint32_t words[4] = {reps, 0, 0, 0};
    params = device().upload("spin params", std::span<const uint32_t>(words), BufferKind::Uniform);
    BufferBinding bindings[] = {{&data}, {&params}};
    group = device().bind(pipeline(), bindings);
  }
  static const Pipeline& pipeline() { return device().pipeline("spin", kSpin); }
  float first() { return device().read_as<float>(data, 0, 1)[0]; }
};

void expect_big_outlasts_tiny(TimerClock clock, bool timestamps) {
  GpuTimer timer(device(), 4, clock);
  EXPECT_EQ(timer.uses_timestamps(), timestamps);
  Spin tiny(1, 1), big(256, 4096);
  {
    // Run both once untimed: a driver may finish compiling a pipeline on its first use (lavapipe with a
    // cold shader cache put ~60 ms into the first timed pass), which would be charged to "tiny".
    Recorder warm_up(device(), "warm-up");
    warm_up.dispatch(Spin::pipeline(), tiny.group, tiny.grid);
    warm_up.dispatch(Spin::pipeline(), big.group, big.grid);
    warm_up.submit();
    device().wait_idle();
  }
  Recorder recorder(device(), "timed");
  timer.dispatch(recorder, Spin::pipeline(), tiny.group, tiny.grid, "tiny");
  timer.dispatch(recorder, Spin::pipeline(), big.group, big.grid, "big");
  EXPECT_EQ(timer.pending(), 2u);
  auto timings = timer.collect(recorder);  // submits the recorder
  ASSERT_EQ(timings.size(), 2u);
  EXPECT_EQ(timings[0].label, "tiny");
  EXPECT_EQ(timings[1].label, "big");
  EXPECT_GT(timings[0].ns, 0.0);
  EXPECT_GT(timings[1].ns, timings[0].ns);
  EXPECT_FLOAT_EQ(tiny.first(), 1.5f);  // two steps from 0: the warm-up's and the timed one
  EXPECT_FLOAT_EQ(big.first(), 2.f);   // converged
  EXPECT_EQ(timer.pending(), 0u);
  EXPECT_TRUE(timer.collect(recorder).empty());
}

TEST(GpuTimer, TimestampsTimeEachDispatch) {
  if (!device().features().timestamp_query) GTEST_SKIP() << "adapter lacks timestamp-query";
  expect_big_outlasts_tiny(TimerClock::Auto, true);
}

TEST(GpuTimer, HostClockWhenForced) { expect_big_outlasts_tiny(TimerClock::Host, false); }

TEST(GpuTimer, HostClockRunsEarlierWorkOfTheRecorderUntimed) {
  GpuTimer timer(device(), 1, TimerClock::Host);
  Spin earlier(1, 1), timed(1, 2);
  Recorder recorder(device(), "mixed");
  recorder.dispatch(Spin::pipeline(), earlier.group, earlier.grid);
  timer.dispatch(recorder, Spin::pipeline(), timed.group, timed.grid, "timed");
  EXPECT_FLOAT_EQ(earlier.first(), 1.f);
  EXPECT_FLOAT_EQ(timed.first(), 1.5f);
  EXPECT_EQ(timer.collect(recorder).size(), 1u);
}

TEST(GpuTimer, TimerIsReusableAfterCollect) {
  GpuTimer timer(device(), 1);
  Spin spin(1, 1);
  for (int round = 0; round < 2; ++round) {
    Recorder recorder(device(), "again");
    timer.dispatch(recorder, Spin::pipeline(), spin.group, spin.grid, "round");
    auto timings = timer.collect(recorder);
    ASSERT_EQ(timings.size(), 1u);
    EXPECT_GT(timings[0].ns, 0.0);
  }
  EXPECT_FLOAT_EQ(spin.first(), 1.5f);
}

TEST(GpuTimer, CapacityIsChecked) {
  EXPECT_THAT([] { GpuTimer(device(), 0); }, ::testing::ThrowsMessage<Error>(HasSubstr("capacity 0")));
  EXPECT_THAT([] { GpuTimer(device(), 2049); }, ::testing::ThrowsMessage<Error>(HasSubstr("1..2048")));
  GpuTimer timer(device(), 1);
  Spin spin(1, 1);
  Recorder recorder(device(), "full");
  timer.dispatch(recorder, Spin::pipeline(), spin.group, spin.grid, "first");
  EXPECT_THAT([&] { timer.dispatch(recorder, Spin::pipeline(), spin.group, spin.grid, "second"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("dispatch 'second' is past the timer's capacity of 1")));
  EXPECT_EQ(timer.collect(recorder).size(), 1u);
}

TEST(GpuTimer, TimedDispatchesShareOneRecorderUntilCollected) {
  GpuTimer timer(device(), 2);
  Spin spin(1, 1);
  Recorder first(device(), "first"), second(device(), "second");
  timer.dispatch(first, Spin::pipeline(), spin.group, spin.grid, "one");
  EXPECT_THAT([&] { timer.dispatch(second, Spin::pipeline(), spin.group, spin.grid, "two"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("dispatch 'two' goes to another recorder than the 1")));
  EXPECT_THAT([&] { timer.collect(second); },
              ::testing::ThrowsMessage<Error>(HasSubstr("collect() got another recorder")));
  EXPECT_EQ(timer.collect(first).size(), 1u);
  // Once collected, the timer takes any recorder.
  timer.dispatch(second, Spin::pipeline(), spin.group, spin.grid, "two");
  EXPECT_EQ(timer.collect(second).size(), 1u);
  EXPECT_FLOAT_EQ(spin.first(), 1.5f);
}

TEST(GpuTimer, PreciseTimestampsToggleIsAddedOnce) {
  DeviceOptions options;
  request_precise_timestamps(options);
  request_precise_timestamps(options);
  EXPECT_EQ(options.disable_toggles, std::vector<std::string>{"timestamp_quantization"});
}

}  // namespace
}  // namespace gerbil::gpu
