// Bytes made on the host reach GPU buffers through a few host-visible staging buffers ("windows") taken in turn.
//
// A storage buffer mapped at creation gets host staging memory of its own from Dawn, and a driver may take long to
// allocate it: on an H100 (NVIDIA's Vulkan driver) creating and mapping an 8B model's weight buffers that way took
// 9.1 of the 11.0 s its f16 weights took to load, and filling them 0.3 s (docs/PERFORMANCE.md, fiftieth session).
// A ring's windows are allocated once and reused: while the GPU copies one window out, the host fills the next.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "gpu/device.h"

namespace gerbil::gpu {

class StagingRing {
 public:
  // `bytes` bytes of a buffer, made at `out` by `make` (on any thread), or zeros if it is null.
  struct Piece {
    uint64_t bytes = 0;
    std::function<void(std::byte* out)> make;
  };
  // Runs body(i) for every i in [0, count), on as many threads as it likes, and returns when all are done.
  using ForEach = std::function<void(size_t count, const std::function<void(size_t)>& body)>;

  // `windows` staging buffers (at least 2, so that filling one overlaps the copies out of another) of
  // `window_bytes` each (a multiple of 4), each allocated when first taken; a window's pieces are made by
  // `for_each`.
  StagingRing(Device& device, uint64_t window_bytes, size_t windows, ForEach for_each);
  ~StagingRing();  // waits for the mappings under way (their callbacks write into the ring)
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // Notes `pieces` as the bytes of `destination` from its first one on, in order: whole words in all (their sizes
  // add up to a multiple of 4, at most its size padded to 4), each piece at most the window's size - 4 bytes. The
  // copies are recorded here (the Buffer may move or be released after, but not destroy()ed before the flush that
  // sends them); the pieces are made, window by window, as windows fill and at flush(), so what they read must
  // stay until then.
  void write(const Buffer& destination, std::vector<Piece> pieces);
  // Makes what the current window holds and sends it: every write so far is then on its way to the GPU, whose
  // queue orders the copies before later work.
  void flush();
  // After an error in write() past its checks, or in flush() (a piece's make() threw, a submission or a mapping
  // failed), the ring's windows and copies are half done: later calls fail, naming that.

 private:
  struct Window {
    Buffer buffer;
    std::span<std::byte> bytes;             // while mapped
    std::optional<Device::PendingMap> map;  // mapping again, behind the copies out of it
  };
  struct Placed {  // a piece noted in the current window, at byte `at`
    Piece piece;
    uint64_t at;
  };
  void acquire();                  // the next window, once the GPU has copied out what it held last
  void make_pieces();              // the current window's noted pieces, on every core
  void send();                     // the current window's copies, submitted; its mapping started again
  template <typename Fn>
  void guarded(Fn&& change);        // runs a change of the ring's state, marking the ring broken if it throws

  Device& device_;
  uint64_t window_bytes_;
  ForEach for_each_;
  std::vector<Window> windows_;
  size_t next_ = 0;
  Window* current_ = nullptr;
  std::vector<Placed> placed_;
  uint64_t used_ = 0;  // bytes of the current window taken
  bool broken_ = false;
  Recorder recorder_;
};

}  // namespace gerbil::gpu
