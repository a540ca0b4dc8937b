// The staging ring (gpu/staging.h) on the real default adapter: buffers made of pieces of every size, through
// windows so small that most buffers cross several and most windows end inside a word, read back byte for byte
// from poisoned buffers; and each misuse named.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <random>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "gpu/staging.h"

namespace gerbil::gpu {
namespace {

using ::testing::HasSubstr;

Device& device() {
  static Device shared;
  return shared;
}

// Pieces made on two threads at once, the odd ones on the second, so that nothing depends on the order they are
// made in.
// Rethrows what either thread threw, as graph::parallel_for does.
void two_threads(size_t count, const std::function<void(size_t)>& body) {
  std::exception_ptr odd_error;
  std::thread odd([&] {
    try {
      for (size_t i = 1; i < count; i += 2) body(i);
    } catch (...) {
      odd_error = std::current_exception();
    }
  });
  try {
    for (size_t i = 0; i < count; i += 2) body(i);
  } catch (...) {
    odd.join();
    throw;
  }
  odd.join();
  if (odd_error) std::rethrow_exception(odd_error);
}

// A buffer's expected bytes and the pieces that make them: random sizes of 0 to `largest` bytes, a third of them
// zeros, the last one rounding the total up to whole words.
struct Planned {
  std::vector<std::byte> bytes;
  std::vector<StagingRing::Piece> pieces;
};

Planned plan(std::mt19937& random, size_t count, uint64_t largest) {
  Planned planned;
  auto add = [&](uint64_t size, bool zeros) {
    uint64_t at = planned.bytes.size();
    for (uint64_t i = 0; i < size; ++i) planned.bytes.push_back(zeros ? std::byte{0} : std::byte(random() | 1));
    if (zeros) {
      planned.pieces.push_back({size, {}});
      return;
    }
    auto source = std::make_shared<std::vector<std::byte>>(planned.bytes.begin() + std::ptrdiff_t(at),
                                                           planned.bytes.end());
    planned.pieces.push_back({size, [source](std::byte* out) { std::copy(source->begin(), source->end(), out); }});
  };
  for (size_t i = 0; i < count; ++i) add(random() % (largest + 1), random() % 3 == 0);
  add((4 - planned.bytes.size() % 4) % 4, false);
  return planned;
}

TEST(StagingRing, BuffersCrossingWindowsArriveWhole) {
  uint32_t seed = std::random_device()();
  std::printf("seed %u\n", seed);  // printed whatever the failure, an exception's too
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 random(seed);
  for (auto [window_bytes, windows] : {std::pair<uint64_t, size_t>{8, 2}, {20, 3}, {64, 2}, {4096, 3}}) {
    SCOPED_TRACE(::testing::Message() << windows << " windows of " << window_bytes << " bytes");
    StagingRing ring(device(), window_bytes, windows, two_threads);
    std::vector<Planned> planned;
    std::vector<Buffer> buffers;
    for (int b = 0; b < 12; ++b) {
      planned.push_back(plan(random, random() % 40, window_bytes - 4));
      // Some buffers a byte smaller than their pieces: the pieces' last byte lies in the padding of the buffer's
      // last word.
      uint64_t pieces_bytes = planned.back().bytes.size();
      uint64_t size = std::max<uint64_t>(1, pieces_bytes - (b % 3 == 0 && pieces_bytes > 0 ? 1 : 0));
      buffers.push_back(device().create_buffer("staged " + std::to_string(b), size));
      device().write<std::byte>(buffers.back(), std::vector<std::byte>(size, std::byte{0xee}));
      ring.write(buffers.back(), planned.back().pieces);
      if (b % 5 == 4) ring.flush();  // a flush between writes, as the weights' upload makes after each layer
    }
    ring.flush();
    for (size_t b = 0; b < buffers.size(); ++b) {
      std::vector<std::byte> expected = planned[b].bytes;
      expected.resize(buffers[b].size(), std::byte{0xee});
      EXPECT_EQ(device().read(buffers[b]), expected) << "buffer " << b;
    }
  }
}

TEST(StagingRing, AWindowIsUsedAgainOnlyOnceItsCopiesAreDone) {
  // Two windows of 16 bytes carry 4 KiB: each window is refilled 128 times, each time right after the GPU was
  // handed its last copies.
  StagingRing ring(device(), 16, 2, two_threads);
  std::vector<std::byte> expected(4096);
  std::vector<StagingRing::Piece> pieces;
  for (size_t i = 0; i < expected.size(); i += 4) {
    for (size_t j = 0; j < 4; ++j) expected[i + j] = std::byte((i / 4 * 13 + j) & 0xff);
    pieces.push_back({4, [&expected, i](std::byte* out) { std::copy_n(expected.begin() + std::ptrdiff_t(i), 4, out); }});
  }
  Buffer buffer = device().create_buffer("refilled", expected.size());
  ring.write(buffer, pieces);
  ring.flush();
  EXPECT_EQ(device().read(buffer), expected);
}

TEST(StagingRing, MisuseIsNamed) {
  EXPECT_THAT([] { StagingRing(device(), 64, 1, two_threads); },
              ::testing::ThrowsMessage<Error>(HasSubstr("at least 2 windows, not 1")));
  EXPECT_THAT([] { StagingRing(device(), 30, 2, two_threads); },
              ::testing::ThrowsMessage<Error>(HasSubstr("staging window of 30 bytes")));
  StagingRing ring(device(), 16, 2, two_threads);
  Buffer small = device().create_buffer("small", 6);
  EXPECT_THAT([&] { ring.write(small, {{8, {}}, {4, {}}}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("'small': its pieces add up to 12 bytes, not whole words "
                                                        "within its 8")));
  EXPECT_THAT([&] { ring.write(small, {{6, {}}}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("add up to 6 bytes")));
  EXPECT_THAT([&] { ring.write(small, {{13, {}}}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("'small': a piece of 13 bytes does not fit a 16-byte")));
}

TEST(StagingRing, AnErrorPastTheChecksLeavesTheRingRefusingMore) {
  StagingRing ring(device(), 16, 2, two_threads);
  Buffer first = device().create_buffer("first", 24), second = device().create_buffer("second", 4);
  // The second piece does not fit the first window: making the first one, at that window's end, throws.
  std::vector<StagingRing::Piece> pieces{{10, [](std::byte*) { fail("piece 1 is bad"); }}, {10, {}}, {4, {}}};
  EXPECT_THAT([&] { ring.write(first, pieces); }, ::testing::ThrowsMessage<Error>(HasSubstr("piece 1 is bad")));
  EXPECT_THAT([&] { ring.write(second, {{4, {}}}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("the ring is unusable after an earlier error")));
  EXPECT_THAT([&] { ring.flush(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("the ring is unusable after an earlier error")));
}

}  // namespace
}  // namespace gerbil::gpu
