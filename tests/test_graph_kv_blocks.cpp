// The KV cache as blocks of one pool (kernels::KvBlocks, Model::kv_blocks()): a sequence whose blocks are
// scattered through the pool (another slot took blocks first, slots' blocks interleave, blocks given back and
// taken again) gives exactly the logits of the same tokens in a fresh model's contiguous blocks, and the fixtures'
// transformers logits; rewinding gives blocks back; a step that needs more blocks than are free throws, naming the
// slot, and changes nothing.
#include <filesystem>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gerbil/error.h"
#include "graph/model.h"
#include "kernels/model.h"
#include "support/device.h"
#include "support/logits.h"
#include "support/paths.h"
#include "test_model_support.h"

namespace gerbil::graph {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr uint32_t kBlock = kernels::kKvBlockTokens;

std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, 511);  // the fixtures' vocabulary
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = id(rng);
  return tokens;
}

ModelFiles open_fixture(const std::string& name) { return ModelFiles::open(test::fixtures_dir() / name); }

// The pieces a sequence is fed in: prompt chunks that end before, on and across block edges, then decode steps.
const std::vector<size_t> kPieces = {100, 156, 1, 150, 1, 1, 60};

// Feeds `tokens` to `slot` piece by piece (kPieces), calling `between` after each piece; returns every logit row.
std::vector<float> feed(Model& model, uint32_t slot, const std::vector<int32_t>& tokens,
                        const std::function<void(size_t piece)>& between = {}) {
  std::vector<float> logits;
  size_t start = 0;
  for (size_t i = 0; i < kPieces.size(); ++i) {
    auto rows = model.forward(std::span(tokens).subspan(start, kPieces[i]), true, slot);
    logits.insert(logits.end(), rows.begin(), rows.end());
    start += kPieces[i];
    if (between) between(i);
  }
  return logits;
}

class ScrambledBlocks : public ::testing::TestWithParam<std::string> {};

// Slot 0's blocks come after slot 1's and slot 2's, interleave with theirs, and include blocks slot 1 gave back:
// its logits equal, bit for bit, those of a single-slot model whose blocks are 0, 1, 2 in order.
TEST_P(ScrambledBlocks, LogitsEqualTheContiguousCase) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = open_fixture(GetParam());
  auto tokens = random_tokens(469, 7);  // the pieces' sum
  Model contiguous(test::device(), files, {.context = 600});
  auto want = feed(contiguous, 0, tokens);

  Model model(test::device(), files, {.context = 600, .slots = 3});
  auto other = random_tokens(300, 8);
  model.forward(other, false, 1);  // blocks 0 and 1
  model.forward(std::span(other).first(5), false, 2);  // block 2
  auto got = feed(model, 0, tokens, [&](size_t piece) {
    if (piece == 0) model.forward(std::span(other).first(260), false, 2);  // block 4, after slot 0's 3
    if (piece == 1) model.reset(1);  // blocks 0 and 1 back in the pool: slot 0's next is one of them
  });
  EXPECT_EQ(model.kv_blocks_held(0), 2u);
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ScrambledBlocks,
                         ::testing::Values("qwen2-tiny",         // fused q|k|v rotary store when decoding
                                           "qwen3-tiny",         // q/k norms: the separate store kernel
                                           "mistral-swa-tiny"),  // a window of 8 keys across block edges
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The fixture's prompt in a slot whose block another slot's blocks precede matches transformers.
TEST(KvBlocks, FixtureLogitsMatchInABlockAfterAnotherSlots) {
  GERBIL_REQUIRE_FIXTURES();
  std::filesystem::path dir = test::fixtures_dir() / "llama-tiny";
  ModelFiles files = ModelFiles::open(dir);
  Model model(test::device(), files, {.context = 300, .slots = 2});
  model.forward(random_tokens(270, 3), false, 1);  // blocks 0 and 1
  auto ids = nlohmann::json::parse(test::read_text(dir / "ref" / "input_ids.json")).get<std::vector<int32_t>>();
  auto got = model.forward(std::span(ids).first(10), true, 0);
  for (size_t t = 10; t < ids.size(); ++t) {
    auto row = model.forward(std::span(ids).subspan(t, 1), true, 0);
    got.insert(got.end(), row.begin(), row.end());
  }
  auto want = test::read_f32(dir / "ref" / "logits.f32");
  ASSERT_EQ(got.size(), want.size());
  size_t vocab = size_t(files.config().vocab_size);
  for (size_t t = 0; t < ids.size(); ++t)
    EXPECT_LT(test::relative_error(std::span(got).subspan(t * vocab, vocab), std::span(want).subspan(t * vocab, vocab)),
              1e-4)
        << "position " << t;
}

// The model counts the step graphs it records, one per new batch shape (its slots and their token counts), and
// the time spent recording them: a shape run again records none.
TEST(StepGraphs, OneIsRecordedForEachNewBatchShape) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = open_fixture("qwen2-tiny");
  Model model(test::device(), files, {.context = 64, .slots = 2});
  const Model::GraphsRecorded before = model.graphs_recorded();
  model.forward(random_tokens(5, 1), false, 0);
  EXPECT_EQ(model.graphs_recorded().count, before.count + 1);
  EXPECT_GT(model.graphs_recorded().seconds, before.seconds);
  model.forward(random_tokens(5, 2), false, 0);  // the same shape
  EXPECT_EQ(model.graphs_recorded().count, before.count + 1);
  model.forward(random_tokens(5, 3), false, 1);  // another slot
  model.forward(random_tokens(4, 4), false, 0);  // another length
  EXPECT_EQ(model.graphs_recorded().count, before.count + 3);
}

// With pipelines created at load, a throwaway prompt and decode step run too (Model::warm_up); they leave the
// cache empty and every block free, so the first request's logits are those of a model loaded without them.
TEST(KvBlocks, TheWarmUpAtLoadLeavesNoTrace) {
  GERBIL_REQUIRE_FIXTURES();
  std::filesystem::path dir = test::fixtures_dir() / "qwen2-tiny";
  ModelFiles files = ModelFiles::open(dir);
  Model warmed(test::device(), files, {.context = 64, .pipelines_at_load = true});
  EXPECT_GT(warmed.load_stats().warm_up_seconds, 0.0);
  EXPECT_EQ(warmed.position(0), 0u);
  EXPECT_EQ(warmed.kv_blocks().free, warmed.kv_blocks().total);
  Model cold(test::device(), files, {.context = 64});
  EXPECT_EQ(cold.load_stats().warm_up_seconds, 0.0);
  auto ids = nlohmann::json::parse(test::read_text(dir / "ref" / "input_ids.json")).get<std::vector<int32_t>>();
  EXPECT_EQ(warmed.forward(ids, true), cold.forward(ids, true));
}

TEST(KvBlocks, SlotsTakeBlocksAsTheyGrowAndRewindingGivesThemBack) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = open_fixture("qwen2-tiny");
  Model model(test::device(), files, {.context = 600, .slots = 2});
  // By default the pool holds slots x context tokens: 2 x 3 blocks.
  EXPECT_EQ(model.kv_blocks().total, 6u);
  EXPECT_EQ(model.kv_blocks().free, 6u);
  uint64_t row_bytes = uint64_t(files.config().num_kv_heads) * uint64_t(files.config().head_dim) * 4;
  EXPECT_EQ(model.kv_cache_bytes(), 2 * uint64_t(files.config().num_layers) * 6 * kBlock * row_bytes);
  auto tokens = random_tokens(300, 1);
  model.forward(std::span(tokens).first(1), false, 0);
  EXPECT_EQ(model.kv_blocks_held(0), 1u);
  model.forward(std::span(tokens).subspan(1, 299), false, 0);
  EXPECT_EQ(model.kv_blocks_held(0), 2u);
  EXPECT_EQ(model.kv_blocks().free, 4u);
  EXPECT_EQ(model.kv_blocks_needed(0, 600), 1u);
  model.rewind(257, 0);  // still into the second block
  EXPECT_EQ(model.kv_blocks_held(0), 2u);
  model.rewind(256, 0);
  EXPECT_EQ(model.kv_blocks_held(0), 1u);
  EXPECT_EQ(model.kv_blocks().free, 5u);
  model.reset(0);
  EXPECT_EQ(model.kv_blocks_held(0), 0u);
  EXPECT_EQ(model.kv_blocks().free, 6u);
  // A smaller pool, rounded up to whole blocks.
  Model small(test::device(), files, {.context = 600, .slots = 2, .kv_tokens = 300});
  EXPECT_EQ(small.kv_blocks().total, 2u);
  EXPECT_EQ(small.kv_cache_bytes(), 2 * uint64_t(files.config().num_layers) * 2 * kBlock * row_bytes);
}

// A pool of 4 blocks: slot 0 fills block 0, slot 1 blocks 1 and 2; one is free. A step in which both need a
// block throws, naming slot 1, and takes none (not even slot 0's); a prompt that needs two throws; slot 0 then
// goes on as a fresh model would, taking the last block, and slot 1's decoding, with none left, throws before
// its first step.
TEST(KvBlocks, AStepWithoutFreeBlocksThrowsAndChangesNothing) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = open_fixture("qwen2-tiny");
  auto tokens = random_tokens(kBlock + 1, 2), other = random_tokens(2 * kBlock, 3);
  auto first = std::span(tokens).first(kBlock), next = std::span(tokens).subspan(kBlock, 1);
  Model fresh(test::device(), files, {.context = 1024});
  fresh.forward(first);
  auto want = fresh.forward(next);

  Model model(test::device(), files, {.context = 1024, .slots = 2, .kv_tokens = 4 * kBlock});
  model.forward(first, false, 0);
  model.forward(other, false, 1);
  ASSERT_EQ(model.kv_blocks().free, 1u);
  auto unchanged = [&] {
    EXPECT_EQ(model.position(0), kBlock);
    EXPECT_EQ(model.position(1), 2 * kBlock);
    EXPECT_EQ(model.kv_blocks_held(0), 1u);
    EXPECT_EQ(model.kv_blocks_held(1), 2u);
    EXPECT_EQ(model.kv_blocks().free, 1u);
  };
  std::vector<int32_t> seven = {7};
  std::vector<Segment> batch = {{0, next}, {1, seven}};
  EXPECT_THAT([&] { model.forward_batch(batch); },
              ThrowsMessage<Error>(AllOf(HasSubstr("KV cache full: slot 1 needs 513 tokens"),
                                         HasSubstr("1 of the pool's 4 blocks are free"))));
  unchanged();
  EXPECT_THAT([&] { model.forward(std::span(other).first(300), false, 1); },
              ThrowsMessage<Error>(HasSubstr("KV cache full: slot 1 needs 812 tokens (4 blocks of 256; it holds 2)")));
  unchanged();
  EXPECT_EQ(model.forward(next, false, 0), want);
  EXPECT_EQ(model.kv_blocks().free, 0u);
  EXPECT_THAT([&] { model.decode_greedy(7, 3, [](int32_t) { return true; }, 1); },
              ThrowsMessage<Error>(HasSubstr("KV cache full: slot 1 needs 513 tokens")));
  EXPECT_EQ(model.position(1), 2 * kBlock);
  // Slot 0's blocks back in the pool: slot 1 goes on.
  model.reset(0);
  EXPECT_NO_THROW(model.decode_greedy(7, 3, [](int32_t) { return true; }, 1));
  EXPECT_EQ(model.position(1), 2 * kBlock + 3);
}

// A pool larger than one storage binding of the adapter (or than the 2^32 elements the kernels index) is refused
// at load, naming the option that sizes it.
TEST(KvBlocks, APoolPastOneBindingIsRefusedAtLoad) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = open_fixture("qwen2-tiny");
  EXPECT_THAT([&] { Model(test::device(), files, {.context = 1024, .kv_tokens = UINT32_MAX}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("a KV-cache pool of 4294967296 tokens (16777216 blocks of 256)"),
                                         HasSubstr("--kv-tokens"))));
}

// Batched steps whose sequences cross block edges (slot 0 from 250 tokens on, its second block taken while slot 1
// holds its first) match each sequence run alone: their logits, and the ids picked on the GPU, down to a step of
// one segment (whose pick forward_batch_pick reads like a batch's).
TEST(KvBlocks, BatchedStepsAcrossBlockEdgesMatchEachSequenceAlone) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = open_fixture("qwen2-tiny");
  auto a = random_tokens(250, 11), b = random_tokens(100, 12);
  Model alone_a(test::device(), files, {.context = 600});
  Model alone_b(test::device(), files, {.context = 600});
  alone_a.forward(a);
  alone_b.forward(b);
  Model model(test::device(), files, {.context = 600, .slots = 2});
  model.forward(a, false, 0);
  model.forward(b, false, 1);
  for (int step = 0; step < 8; ++step) {
    std::vector<int32_t> ta = {int32_t(step * 7 % 512)}, tb = {int32_t(step * 13 % 512)};
    auto want_a = alone_a.forward(ta), want_b = alone_b.forward(tb);
    std::vector<Segment> batch = {{0, ta}, {1, tb}};
    auto got = model.forward_batch(batch);
    size_t vocab = want_a.size();
    EXPECT_LT(test::relative_error(std::span(got).first(vocab), want_a), 1e-5) << "step " << step;
    EXPECT_LT(test::relative_error(std::span(got).subspan(vocab, vocab), want_b), 1e-5) << "step " << step;
  }
  auto picks_alone = [&](Model& m, int32_t first, uint32_t steps) {
    std::vector<int32_t> ids;
    m.decode_greedy(first, steps, [&](int32_t id) { return ids.push_back(id), true; });
    return ids;
  };
  auto want_a = picks_alone(alone_a, 3, 10), want_b = picks_alone(alone_b, 4, 6);
  std::vector<int32_t> got_a = {3}, got_b = {4};
  for (int step = 0; step < 10; ++step) {
    std::vector<Segment> batch = {{0, std::span(&got_a.back(), 1)}};
    if (step < 6) batch.push_back({1, std::span(&got_b.back(), 1)});
    auto picks = model.forward_batch_pick(batch);
    got_a.push_back(int32_t(picks[0]));
    if (step < 6) got_b.push_back(int32_t(picks[1]));
  }
  EXPECT_EQ(std::vector<int32_t>(got_a.begin() + 1, got_a.end()), want_a);
  EXPECT_EQ(std::vector<int32_t>(got_b.begin() + 1, got_b.end()), want_b);
}

// A context left open is the model's own, cut to what one storage binding holds per layer's pool for every slot
// (then halved while the GPU's memory refuses it, which a CPU adapter does not show); one asked for is kept.
TEST(DefaultContext, IsTheModelsWithinOneBindingPerLayer) {
  constexpr uint64_t kBinding = (4ull << 30) - 1;                    // an H200's maxStorageBufferBindingSize
  constexpr uint64_t kElements = kBlock * 8 * 128, kBytes = 2 * kElements;  // Llama-3-8B's f16 blocks: 512 KiB
  ModelOptions one;
  EXPECT_EQ(default_kv_cache_size(one, 131072, kBytes, kElements, kBinding).context, 131072u);
  EXPECT_TRUE(default_kv_cache_size(one, 131072, kBytes, kElements, kBinding).sized_to_device);
  EXPECT_EQ(default_kv_cache_size(one, 0, kBytes, kElements, kBinding).context, kFallbackContext);
  ModelOptions many{.slots = 64};  // 8,191 blocks a binding: 127 whole contexts' worth each
  EXPECT_EQ(default_kv_cache_size(many, 131072, kBytes, kElements, kBinding).context, 127 * kBlock);
  ModelOptions asked{.context = 1000, .slots = 64};
  EXPECT_EQ(default_kv_cache_size(asked, 131072, kBytes, kElements, kBinding).context, 1000u);
  EXPECT_FALSE(default_kv_cache_size(asked, 131072, kBytes, kElements, kBinding).sized_to_device);
  ModelOptions pooled{.slots = 64, .kv_tokens = 4096};  // the pool is asked for: the context stays the model's
  EXPECT_EQ(default_kv_cache_size(pooled, 131072, kBytes, kElements, kBinding).context, 131072u);
  EXPECT_FALSE(default_kv_cache_size(pooled, 131072, kBytes, kElements, kBinding).sized_to_device);
  // u32 element indices bound the pool too: 2^32 / (256 x 8,192) = 2,047 blocks.
  EXPECT_EQ(default_kv_cache_size(many, 131072, 4, kBlock * 8192, UINT64_MAX).context, 2047 / 64 * kBlock);
}

// The llama-tiny fixture with a context of 8,192 positions, written into `dir`.
ModelFiles llama_with_8192_positions(const test::ScratchDir& dir) {
  test::copy_fixture("llama-tiny", dir.path(), {}, [](nlohmann::json& config) {
    config["max_position_embeddings"] = 8192;
  });
  return ModelFiles::open(dir.path());
}

// A model whose config allows 8,192 positions gets them all by default (it was held to 4,096), for each slot.
TEST(DefaultContext, ModelTakesItsWholeContext) {
  GERBIL_REQUIRE_FIXTURES();
  test::ScratchDir dir;
  auto files = llama_with_8192_positions(dir);
  Model model(test::device(), files, {.slots = 2, .kv_cache = KvCache::F32});
  EXPECT_EQ(model.context(), 8192u);
  uint64_t kv_width = uint64_t(files.config().num_kv_heads) * files.config().head_dim;
  EXPECT_EQ(model.kv_cache_bytes(), 2 * uint64_t(files.config().num_layers) * 2 * 8192 * kv_width * 4);
}

// Where the GPU's memory (here a device's memory limit, which refuses buffers as a full GPU does) does not hold the
// model's whole context, the default context is halved until it does, and the model it leaves computes what an
// unlimited one does; a context that was asked for is not cut but refused, as is a memory too small for 512 tokens.
TEST(DefaultContext, IsHalvedUntilTheModelFitsTheMemory) {
  GERBIL_REQUIRE_FIXTURES();
  test::ScratchDir dir;
  auto files = llama_with_8192_positions(dir);
  ModelOptions options{.slots = 2, .kv_cache = KvCache::F32};
  auto tokens = random_tokens(40, 11);
  uint64_t whole_context_bytes = 0, whole_cache_bytes = 0, weight_bytes = 0;
  std::vector<float> want;
  {
    gpu::Device unlimited;
    Model model(unlimited, files, options);
    ASSERT_EQ(model.context(), 8192u);
    whole_context_bytes = unlimited.buffer_bytes();
    whole_cache_bytes = model.kv_cache_bytes();
    weight_bytes = model.weight_bytes();
    want = model.forward(tokens, true);
  }
  gpu::Device limited({.memory_limit = whole_context_bytes - 1});
  Model model(limited, files, options);
  EXPECT_EQ(model.context(), 4096u);
  uint64_t kv_width = uint64_t(files.config().num_kv_heads) * files.config().head_dim;
  EXPECT_EQ(model.kv_cache_bytes(), 2 * uint64_t(files.config().num_layers) * 2 * 4096 * kv_width * 4);
  EXPECT_GE(limited.buffer_bytes(), model.weight_bytes() + model.kv_cache_bytes());  // the count covers the model
  EXPECT_EQ(model.forward(tokens, true), want);

  // The whole context needs room beyond allocate()'s buffers for what steps create when first built (their
  // dispatches' uniform buffers): 1,000 bytes more is too little, 1 MiB enough, and the steps then run within it.
  gpu::Device snug({.memory_limit = whole_context_bytes + 1000});
  EXPECT_EQ(Model(snug, files, options).context(), 4096u);
  gpu::Device roomy({.memory_limit = whole_context_bytes + (1 << 20)});
  Model whole(roomy, files, options);
  EXPECT_EQ(whole.context(), 8192u);
  EXPECT_EQ(whole.forward(tokens, true), want);
  for (int32_t token : {3, 5, 7}) whole.forward(std::vector<int32_t>{token});

  ModelOptions asked = options;
  asked.context = 8192;
  EXPECT_THAT([&] { Model refused(limited, files, asked); },
              ThrowsMessage<Error>(AllOf(HasSubstr("16384 tokens"), HasSubstr("memory limit"), HasSubstr("--ctx"))));
  // Room for the weights and a cache of 256 tokens a slot, not 512 and the step's buffers.
  gpu::Device small({.memory_limit = weight_bytes + whole_cache_bytes / 32});
  EXPECT_THAT([&] { Model refused(small, files, options); },
              ThrowsMessage<Error>(AllOf(HasSubstr("the KV cache of 1024 tokens"), HasSubstr("do not fit"))));
  gpu::Device tiny({.memory_limit = 1024});  // not even the weights
  EXPECT_THAT([&] { Model refused(tiny, files, options); },
              ThrowsMessage<Error>(AllOf(HasSubstr("creating buffer"), HasSubstr("memory limit of 1024 bytes"))));
}

}  // namespace
}  // namespace gerbil::graph
