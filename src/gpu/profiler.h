// GPU timing of individual dispatches, for `gerbil bench` and per-dispatch model profiles.
//
// With the timestamp-query feature each timed dispatch runs in its own compute pass whose begin and end
// timestamps land in a query set; collect() resolves them and returns end - begin in nanoseconds of GPU
// time. Without the feature (or when host timing is forced) every timed dispatch is submitted on its
// own and timed on the host from submit to the queue reporting the work done, which includes the
// submit and wake-up overhead and, since it drains the queue, serialises the recorded work.
//
// Dawn quantizes timestamps by default (a browser defence against timing attacks), which rounds short
// dispatches to zero: create the device with request_precise_timestamps() when profiling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/device.h"

namespace gerbil::gpu {

// Adds the Dawn toggle that turns timestamp quantization off to `options`.
void request_precise_timestamps(DeviceOptions& options);

struct Timing {
  std::string label;
  double ns = 0;  // duration of the dispatch
};

enum class TimerClock {
  Auto,  // GPU timestamps when the device has timestamp-query, else the host clock
  Host,  // host clock around submit + wait for the queue, even when timestamps exist
};

class GpuTimer {
 public:
  // `capacity`: how many dispatches can be timed between two collect() calls (at most 2048, since a
  // query set holds at most 4096 timestamps).
  GpuTimer(Device& device, uint32_t capacity, TimerClock clock = TimerClock::Auto);

  bool uses_timestamps() const { return static_cast<bool>(queries_); }
  uint32_t capacity() const { return capacity_; }
  size_t pending() const { return labels_.size(); }  // timed dispatches not yet collected

  // Records one timed dispatch into `recorder`; all timed dispatches between two collect() calls go to the
  // same recorder. With the host clock this submits the recorder (work already in it first, untimed), so
  // the dispatch is timed alone.
  void dispatch(Recorder& recorder, const Pipeline& pipeline, const BindGroup& bind_group, Grid grid,
                std::string label);

  // Appends the timestamp resolve to `recorder` (the one the timed dispatches went to), submits it, waits,
  // and returns one Timing per dispatch() since the last collect(), in order; the timer is then empty
  // again. Resolving in the same recorder guarantees the timed passes are submitted: a GPU waits forever
  // on a timestamp that was recorded but never submitted.
  std::vector<Timing> collect(Recorder& recorder);

 private:
  Device& device_;
  uint32_t capacity_;
  QuerySetHandle queries_;  // empty when timing on the host
  Buffer resolved_;
  const Recorder* recorder_ = nullptr;  // where the pending dispatches went (only compared, never used)
  std::vector<std::string> labels_;
  std::vector<double> host_ns_;
};

}  // namespace gerbil::gpu
