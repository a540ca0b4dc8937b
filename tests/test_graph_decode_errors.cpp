// GPU decoding when the consumer of its tokens throws: the exception reaches the caller, the read-backs still in
// flight are drained and unmapped, the cache keeps the tokens delivered before the throw, and the next decode on
// the same model gives what a fresh model gives.
#include <gtest/gtest.h>

#include "graph/model.h"
#include "model/weights.h"
#include "support/device.h"
#include "support/paths.h"

namespace gerbil {
namespace {

TEST(DecodeErrors, AThrowingConsumerLeavesTheModelUsable) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(test::fixtures_dir() / "llama-tiny");
  const std::vector<int32_t> prompt = {5, 77, 301, 12};
  auto decode = [&](graph::Model& model, uint32_t steps) {
    model.reset();
    model.forward(prompt);
    std::vector<int32_t> ids;
    model.decode_greedy(9, steps, [&](int32_t id) { return ids.push_back(id), true; });
    return ids;
  };
  graph::Model fresh(test::device(), files, {.context = 32});
  std::vector<int32_t> expected = decode(fresh, 10);

  graph::Model model(test::device(), files, {.context = 32});
  model.forward(prompt);
  int seen = 0;
  EXPECT_THROW(model.decode_greedy(9, 10,
                                   [&](int32_t) -> bool {
                                     if (++seen == 3) throw std::runtime_error("consumer failed");
                                     return true;
                                   }),
               std::runtime_error);
  // The cache holds the prompt, the first id and the two ids delivered before the third.
  EXPECT_EQ(model.position(), prompt.size() + 3);
  for (int round = 0; round < 3; ++round) EXPECT_EQ(decode(model, 10), expected) << "round " << round;
}

}  // namespace
}  // namespace gerbil
