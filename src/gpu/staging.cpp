#include "gpu/staging.h"

#include <array>
#include <fmt/format.h>

#include "gerbil/error.h"

namespace gerbil::gpu {

StagingRing::StagingRing(Device& device, uint64_t window_bytes, size_t windows, ForEach for_each)
    : device_(device), window_bytes_(window_bytes), for_each_(std::move(for_each)), windows_(windows),
      recorder_(device, "staged copies") {
  if (windows < 2) fail("a staging ring needs at least 2 windows, not {}", windows);
  if (window_bytes < 8 || window_bytes % 4 != 0)
    fail("a staging window of {} bytes is not a multiple of 4 of at least 8", window_bytes);
}

StagingRing::~StagingRing() {
  // A wait that fails here (the device lost) leaves nothing to wait for and no one to tell: the error that
  // unwound to here, if any, was reported first.
  for (Window& window : windows_)
    if (window.map) try {
        device_.wait(window.map->future);
      } catch (const Error&) {
      }
}

template <typename Fn>
void StagingRing::guarded(Fn&& change) {
  if (broken_) fail("staging: the ring is unusable after an earlier error (see that one)");
  try {
    change();
  } catch (...) {
    broken_ = true;
    throw;
  }
}

void StagingRing::write(const Buffer& destination, std::vector<Piece> pieces) {
  uint64_t total = 0;
  for (const Piece& piece : pieces) {
    if (piece.bytes + 4 > window_bytes_)
      fail("uploading buffer '{}': a piece of {} bytes does not fit a {}-byte staging window", destination.label(),
           piece.bytes, window_bytes_);
    total += piece.bytes;
  }
  uint64_t padded = destination.padded_size();
  if (total % 4 != 0 || total > padded)
    fail("uploading buffer '{}': its pieces add up to {} bytes, not whole words within its {}", destination.label(),
         total, padded);
  guarded([&] {
    if (!current_) acquire();
    uint64_t copied = 0, copy_at = used_;  // the buffer's bytes copied from earlier windows; where the rest begins
    for (Piece& piece : pieces) {
      if (used_ + piece.bytes > window_bytes_) {
        // This window ends inside the buffer: it copies out the buffer's whole words, and the 0 to 3 bytes after
        // them begin the next window.
        make_pieces();
        uint64_t end = copied + (used_ - copy_at), whole = end / 4 * 4;
        std::array<std::byte, 3> carry{};
        std::byte* window = current_->bytes.data();
        std::copy(window + copy_at + (whole - copied), window + used_, carry.begin());
        if (whole > copied) recorder_.copy(current_->buffer, copy_at, destination, copied, whole - copied);
        send();
        acquire();
        std::copy(carry.begin(), carry.begin() + std::ptrdiff_t(end - whole), current_->bytes.data());
        copied = whole, copy_at = 0, used_ = end - whole;
      }
      uint64_t bytes = piece.bytes;
      placed_.push_back({std::move(piece), used_});
      used_ += bytes;
    }
    if (used_ > copy_at) recorder_.copy(current_->buffer, copy_at, destination, copied, used_ - copy_at);
  });
}

void StagingRing::flush() {
  guarded([&] {
    if (current_) send();
  });
}

void StagingRing::acquire() {
  Window& window = windows_[next_];
  if (!window.buffer) {
    window.buffer = device_.create_mapped(fmt::format("staging window {}", next_), window_bytes_, BufferKind::Upload);
    window.bytes = device_.mapped_range(window.buffer);
  }
  next_ = (next_ + 1) % windows_.size();
  if (window.map) {
    Device::PendingMap map = std::move(*window.map);
    window.map.reset();
    window.bytes = device_.finish_map(map);
  }
  current_ = &window;
  used_ = 0;
}

void StagingRing::make_pieces() {
  std::byte* window = current_->bytes.data();
  for_each_(placed_.size(), [&](size_t i) {
    const Placed& placed = placed_[i];
    if (placed.piece.make)
      placed.piece.make(window + placed.at);
    else
      std::fill_n(window + placed.at, placed.piece.bytes, std::byte{0});
  });
  placed_.clear();
}

void StagingRing::send() {
  make_pieces();
  Window& window = *std::exchange(current_, nullptr);
  window.bytes = {};
  device_.unmap(window.buffer.get());
  recorder_.submit();
  window.map = device_.map_async(window.buffer, window_bytes_);
}

}  // namespace gerbil::gpu
