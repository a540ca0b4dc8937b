#include "gpu/profiler.h"

#include <algorithm>
#include <chrono>

#include "gerbil/error.h"

namespace gerbil::gpu {
namespace {

constexpr uint32_t kMaxQueries = 4096;  // WebGPU's limit on the size of a query set

// Timestamps are only compared with each other: Dawn quantizes them unless told not to, and a driver may
// reset its counter between passes, so a negative difference carries no information and counts as 0.
double duration_ns(uint64_t begin, uint64_t end) { return end > begin ? static_cast<double>(end - begin) : 0.0; }

}  // namespace

void request_precise_timestamps(DeviceOptions& options) {
  const std::string toggle = "timestamp_quantization";
  auto& disabled = options.disable_toggles;
  if (std::find(disabled.begin(), disabled.end(), toggle) == disabled.end()) disabled.push_back(toggle);
}

GpuTimer::GpuTimer(Device& device, uint32_t capacity, TimerClock clock) : device_(device), capacity_(capacity) {
  if (capacity == 0 || capacity > kMaxQueries / 2)
    fail("GpuTimer: capacity {} must be 1..{} dispatches (two timestamps each)", capacity, kMaxQueries / 2);
  if (clock == TimerClock::Host || !device.features().timestamp_query) return;
  WGPUQuerySetDescriptor descriptor{};
  descriptor.label = {"gerbil timer", WGPU_STRLEN};
  descriptor.type = WGPUQueryType_Timestamp;
  descriptor.count = 2 * capacity;
  device.check_errors();
  queries_ = QuerySetHandle(wgpuDeviceCreateQuerySet(device.get(), &descriptor));
  device.check_errors();
  if (!queries_) fail("GpuTimer: creating a query set of {} timestamps failed", 2 * capacity);
  resolved_ = device.create_buffer("gerbil timer timestamps", 2 * capacity * sizeof(uint64_t),
                                   BufferKind::QueryResolve);
}

void GpuTimer::dispatch(Recorder& recorder, const Pipeline& pipeline, const BindGroup& bind_group, Grid grid,
                        std::string label) {
  if (labels_.size() == capacity_)
    fail("GpuTimer: dispatch '{}' is past the timer's capacity of {}; collect() first", label, capacity_);
  if (recorder_ && recorder_ != &recorder)
    fail("GpuTimer: dispatch '{}' goes to another recorder than the {} timed before it; collect() first", label,
         labels_.size());
  recorder_ = &recorder;
  if (uses_timestamps()) {
    recorder.dispatch_timed(pipeline, bind_group, grid, queries_.get(), 2 * labels_.size());
  } else {
    using Clock = std::chrono::steady_clock;
    recorder.submit();  // earlier work must not count
    device_.wait_idle();
    auto start = Clock::now();
    recorder.dispatch(pipeline, bind_group, grid);
    recorder.submit();
    device_.wait_idle();
    host_ns_.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count());
  }
  labels_.push_back(std::move(label));
}

std::vector<Timing> GpuTimer::collect(Recorder& recorder) {
  if (recorder_ && recorder_ != &recorder)
    fail("GpuTimer: collect() got another recorder than the one its {} timed dispatches went to", labels_.size());
  std::vector<std::string> labels = std::exchange(labels_, {});
  std::vector<double> host_ns = std::exchange(host_ns_, {});
  recorder_ = nullptr;
  std::vector<uint64_t> stamps;
  if (uses_timestamps() && !labels.empty()) {
    uint32_t count = 2 * labels.size();
    recorder.resolve(queries_.get(), count, resolved_);
    recorder.submit();
    stamps = device_.read_as<uint64_t>(resolved_, 0, count);
  } else {
    recorder.submit();
    device_.wait_idle();
  }
  std::vector<Timing> timings;
  for (size_t i = 0; i < labels.size(); ++i) {
    double ns = uses_timestamps() ? duration_ns(stamps[2 * i], stamps[2 * i + 1]) : host_ns[i];
    timings.push_back({std::move(labels[i]), ns});
  }
  return timings;
}

}  // namespace gerbil::gpu
