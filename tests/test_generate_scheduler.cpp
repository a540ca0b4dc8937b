// The scheduler on the reference fixtures (and on a llama.cpp GGUF file of Q4_0 blocks): prompts answered together
// in one batch (several KV-cache slots, prompt chunks interleaved with the other sequences' decode steps) give the
// same greedy tokens as each answered alone, and as transformers; cancellation frees a slot; a request that cannot
// run is refused.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "generate/scheduler.h"
#include "graph/model.h"
#include "kernels/model.h"
#include "model/weights.h"
#include "support/device.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace gerbil {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<int32_t> ids_of(const nlohmann::json& array) { return array.get<std::vector<int32_t>>(); }

SequenceRequest greedy_request(std::vector<int32_t> prompt, uint32_t new_tokens) {
  SequenceRequest request;
  request.prompt = std::move(prompt);
  request.options.sampling.temperature = 0;
  request.options.max_new_tokens = new_tokens;
  request.options.ignore_eos = true;
  return request;
}

// Each request run together gave the tokens it gave alone, and ran to its token budget.
void expect_alone_tokens(const std::vector<Generation>& together, const std::vector<Generation>& alone) {
  ASSERT_EQ(together.size(), alone.size());
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].finish, FinishReason::MaxTokens) << "request " << i;
  }
}

// Submits every request at once and waits for all; returns each one's result in order.
std::vector<Generation> run_together(Scheduler& scheduler, std::vector<SequenceRequest> requests) {
  std::mutex mutex;
  std::condition_variable all_done;
  std::map<size_t, Generation> results;
  std::vector<std::string> errors;
  for (size_t i = 0; i < requests.size(); ++i)
    scheduler.submit(std::move(requests[i]), [&, i](const SequenceEvent& event) {
      if (event.done) {
        std::lock_guard lock(mutex);
        results[i] = event.result;
        if (!event.error.empty()) errors.push_back(event.error);
        all_done.notify_all();
      }
      return true;
    });
  std::unique_lock lock(mutex);
  all_done.wait(lock, [&] { return results.size() == requests.size(); });
  EXPECT_THAT(errors, ::testing::IsEmpty());
  std::vector<Generation> out;
  for (auto& [i, result] : results) out.push_back(std::move(result));
  return out;
}

// The requests (made by `requests`, SequenceRequest being move-only) each answered alone, one after another, by a
// model of one slot.
using Requests = std::function<std::vector<SequenceRequest>()>;
std::vector<Generation> answers_alone(const ModelFiles& files, const Requests& requests) {
  graph::Model model(test::device(), files, {.context = 48});
  Scheduler scheduler(model, nullptr);
  std::vector<Generation> alone;
  for (auto& request : requests()) alone.push_back(scheduler.run(std::move(request)));
  return alone;
}

// The requests answered together give the tokens each gave alone. Four slots for eight requests, and steps of at
// most 6 rows: prompts are prefilled in chunks beside the other sequences' decode steps, and requests wait for a
// slot. Then eight slots and steps of up to 16 rows: all eight decode together, beside prompt chunks. Steps of 5
// to 16 rows run their products on linear_rows.wgsl (4 columns a thread up to 8 rows, 2 beyond), whose sums are
// in another order than the matrix-vector and tiled kernels' that answer alone: the tokens must not depend on it.
// `rows_shapes`: what the shapes of some product that linear_rows.wgsl takes in such a step hold. Every model
// here batches its sequences in one step.
void expect_batches_answer_alike(const ModelFiles& files, const Requests& requests,
                                 const std::vector<Generation>& alone, const std::string& rows_shapes) {
  for (auto [slots, chunk] : {std::pair{4u, 6u}, std::pair{8u, kernels::kLinearRowsMax}}) {
    SCOPED_TRACE(testing::Message() << slots << " slots, steps of at most " << chunk << " rows");
    graph::Model model(test::device(), files, {.context = 48, .slots = slots, .max_chunk = chunk});
    ASSERT_TRUE(model.can_batch()) << "its sequences would run one after another";
    auto entries = model.describe(chunk);
    ASSERT_TRUE(std::any_of(entries.begin(), entries.end(), [&](auto& e) {
      return e.kernel == "linear_rows" && e.shapes.find(rows_shapes) != std::string::npos;
    })) << "no linear_rows product of " << rows_shapes;
    Scheduler scheduler(model, nullptr, {.parallel = slots});
    expect_alone_tokens(run_together(scheduler, requests()), alone);
    SchedulerStats stats = scheduler.stats();
    EXPECT_EQ(stats.finished, alone.size());
    EXPECT_EQ(stats.active, 0u);
  }
}

// Prompts of other lengths cut from `ids`, each answered with 10 tokens.
void add_cut_prompts(std::vector<SequenceRequest>& requests, const std::vector<int32_t>& ids) {
  for (size_t length : {3, 20, 11, 1, 17, 6, 9})
    requests.push_back(greedy_request({ids.begin(), ids.begin() + std::ptrdiff_t(length)}, 10));
}

class Batching : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    GERBIL_REQUIRE_FIXTURES();
    dir_ = test::fixtures_dir() / GetParam();
    auto greedy = nlohmann::json::parse(test::read_text(dir_ / "ref/greedy.json"));
    reference_prompt_ = ids_of(greedy["prompt_ids"]);
    reference_answer_ = ids_of(greedy["new_ids"]);
    input_ids_ = ids_of(nlohmann::json::parse(test::read_text(dir_ / "ref/input_ids.json")));
  }

  // The reference prompt (answered by transformers) and prompts of other lengths cut from the input ids.
  std::vector<SequenceRequest> requests() const {
    std::vector<SequenceRequest> out;
    out.push_back(greedy_request(reference_prompt_, uint32_t(reference_answer_.size())));
    add_cut_prompts(out, input_ids_);
    return out;
  }

  fs::path dir_;
  std::vector<int32_t> reference_prompt_, reference_answer_, input_ids_;
};

TEST_P(Batching, GreedyAnswersDoNotDependOnTheBatch) {
  ModelFiles files = ModelFiles::open(dir_);
  std::vector<Generation> alone = answers_alone(files, [&] { return requests(); });
  EXPECT_EQ(alone[0].tokens, reference_answer_) << "alone, against transformers";
  expect_batches_answer_alike(files, [&] { return requests(); }, alone, "");
}

// A seeded sampled request gives the same tokens drawn on the host (with log-probabilities), alone (drawn on the
// GPU: the first id at the prompt's last chunk, then graph::Model::decode_sampled) and
// batched with a longer greedy one (each id drawn on the GPU by its own row of the batched step's sampler chain):
// all hash the same random numbers from (seed, position). Flat and cut settings, with penalties (the GPU keeps
// each slot's counts); the requests alone share one model, whose sampled step records the sampler's levels after
// the first only for the cut settings (kernels::sample_levels), so its settings change between requests. Then all
// together with two greedy ones, each row drawing with its own settings: no id comes from the host, not even a
// prompt's first (picked at its last chunk's step).
TEST_P(Batching, SeededSamplesDoNotDependOnTheBatch) {
  ModelFiles files = ModelFiles::open(dir_);
  graph::Model alone_model(test::device(), files, {.context = 48});
  Scheduler alone_scheduler(alone_model, nullptr);
  const std::vector<SamplingParams> settings = {
      SamplingParams{.temperature = 1.5f, .seed = 1234},
      SamplingParams{.temperature = 0.9f, .top_k = 20, .top_p = 0.9f, .seed = 99},
      SamplingParams{.temperature = 1.2f, .min_p = 0.02f, .repetition_penalty = 1.3f, .frequency_penalty = 0.2f,
                     .seed = 7}};
  auto seeded = [&](const SamplingParams& sampling) {
    SequenceRequest request = greedy_request(reference_prompt_, 12);
    request.options.sampling = sampling;
    return request;
  };
  auto greedy = [&] { return greedy_request({input_ids_.begin(), input_ids_.begin() + 5}, 30); };
  std::vector<Generation> alone;
  const std::vector<int32_t> greedy_alone = alone_scheduler.run(greedy()).tokens;  // top-k 1 beside sampled rows
  for (const SamplingParams& sampling : settings) {
    SCOPED_TRACE(testing::Message() << "temperature " << sampling.temperature << " seed " << sampling.seed);
    alone.push_back(alone_scheduler.run(seeded(sampling)));
    EXPECT_EQ(alone.back().tokens.size(), 12u);
    SequenceRequest on_host = seeded(sampling);  // log-probabilities: every id drawn on the host, the first too
    on_host.logprobs = true;
    EXPECT_EQ(alone_scheduler.run(std::move(on_host)).tokens, alone.back().tokens);
    graph::Model model(test::device(), files, {.context = 48, .slots = 2});
    Scheduler scheduler(model, nullptr, {.parallel = 2});
    std::vector<SequenceRequest> requests;
    requests.push_back(seeded(sampling));
    requests.push_back(greedy());
    auto together = run_together(scheduler, std::move(requests));
    ASSERT_EQ(together.size(), 2u);
    EXPECT_EQ(together[0].tokens, alone.back().tokens);
    EXPECT_EQ(together[1].tokens, greedy_alone);
    EXPECT_EQ(scheduler.stats().host_draws, 0u) << "the batch's ids drawn on the host";
  }
  // All three and two greedy ones, one of which ends early: the batch after it is another, and the penalized
  // sequence's counts on the GPU must not hold a draw of a step that did not count.
  graph::Model model(test::device(), files, {.context = 48, .slots = 5});
  Scheduler scheduler(model, nullptr, {.parallel = 5});
  std::vector<SequenceRequest> requests;
  for (const SamplingParams& sampling : settings) requests.push_back(seeded(sampling));
  requests.push_back(greedy());
  requests.push_back(greedy_request({input_ids_.begin(), input_ids_.begin() + 5}, 4));
  auto together = run_together(scheduler, std::move(requests));
  ASSERT_EQ(together.size(), 5u);
  for (size_t i = 0; i < settings.size(); ++i) EXPECT_EQ(together[i].tokens, alone[i].tokens) << "settings " << i;
  EXPECT_EQ(together[3].tokens, greedy_alone);
  EXPECT_EQ(together[4].tokens, std::vector<int32_t>(greedy_alone.begin(), greedy_alone.begin() + 4));
  EXPECT_EQ(scheduler.stats().host_draws, 0u);
  // The penalized rows' steps were queued ahead (their products: the picks waited for the host).
  EXPECT_GT(scheduler.stats().steps_ahead_taken, 0u);
}

// qwen2 and llama batch in one step; so does gpt2, whose learned positions are gathered per segment (the batch
// answers alike only where each segment's rows take their own slot's positions); gemma3 and mistral-swa have
// sliding windows (and gemma3 q/k norms).
INSTANTIATE_TEST_SUITE_P(Fixtures, Batching,
                         ::testing::Values("qwen2-tiny", "llama-tiny", "gpt2-tiny", "gemma3-tiny", "mistral-swa-tiny"));

// The same for a GGUF file of block-quantized weights made by llama.cpp (tests/data/gguf/llamacpp; Q4_0, its LM
// head Q6_K): steps of 5 to 16 rows (and of 2 to 4 where the adapter's tuning asks) decode the blocks in
// linear_rows.wgsl, single steps in linear_q_matvec.wgsl. Its two prompts and prompts cut from the longer one.
TEST(GgufBatching, GreedyAnswersDoNotDependOnTheBatch) {
  fs::path dir = test::project_root() / "tests" / "data" / "gguf" / "llamacpp";
  nlohmann::json fixture, references = nlohmann::json::parse(test::read_text(dir / "references.json"));
  for (const nlohmann::json& f : references["fixtures"])
    if (f["file"] == "llama-Q4_0.gguf") fixture = f;
  ASSERT_FALSE(fixture.is_null()) << "llama-Q4_0.gguf is not in references.json";
  ModelFiles files = ModelFiles::open(dir / "llama-Q4_0.gguf");
  auto requests = [&] {
    std::vector<SequenceRequest> out;
    for (const nlohmann::json& prompt : fixture["prompt_ids"]) out.push_back(greedy_request(ids_of(prompt), 10));
    add_cut_prompts(out, ids_of(fixture["prompt_ids"].back()));
    return out;
  };
  std::vector<Generation> alone = answers_alone(files, requests);
  expect_batches_answer_alike(files, requests, alone, "type=Q4_0 ");
}

// Random prompts from the fixtures' 512 ids.
std::vector<int32_t> random_prompt(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> id(0, 511);
  std::vector<int32_t> prompt(n);
  for (int32_t& t : prompt) t = id(rng);
  return prompt;
}

// A KV-cache pool of 3 blocks (768 tokens) for 4 sequences of up to 600 tokens: prompts and answers of many
// lengths, some crossing block edges while decoding, one needing the whole pool, wait for blocks (and give them
// back and feed their tokens again when none is free), take the blocks finished ones kept for reuse, and each
// gets the greedy answer it gets alone in a pool of its own.
TEST(SchedulerBlocks, APoolSmallerThanEverySlotsContextFinishesEverySequence) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(test::fixtures_dir() / "qwen2-tiny");
  std::mt19937 rng(5);
  std::vector<std::pair<size_t, uint32_t>> shapes = {{250, 12}, {20, 8},  {500, 20}, {5, 10},
                                                     {300, 6},  {120, 140}, {255, 3}, {10, 4}};
  std::vector<std::vector<int32_t>> prompts;
  for (auto [length, answer] : shapes) prompts.push_back(random_prompt(length, rng));
  auto requests = [&] {
    std::vector<SequenceRequest> out;
    for (size_t i = 0; i < shapes.size(); ++i) out.push_back(greedy_request(prompts[i], shapes[i].second));
    return out;
  };
  std::vector<Generation> alone;
  {
    graph::Model model(test::device(), files, {.context = 600});
    Scheduler scheduler(model, nullptr);
    for (auto& request : requests()) alone.push_back(scheduler.run(std::move(request)));
  }
  graph::Model model(test::device(), files, {.context = 600, .slots = 4, .kv_tokens = 768, .max_chunk = 128});
  ASSERT_EQ(model.kv_blocks().total, 3u);
  Scheduler scheduler(model, nullptr, {.parallel = 4});
  expect_alone_tokens(run_together(scheduler, requests()), alone);
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.finished, alone.size());
  EXPECT_EQ(stats.kv_blocks_total, 3u);
  EXPECT_LE(stats.kv_blocks_used, 3u);
}

// Alone in a pool of 2 blocks, a sequence that grows past 512 tokens can never get its third block: it ends with
// an error saying so, and the pool serves the next request.
TEST(SchedulerBlocks, ASequenceThatCanNeverFitEndsWithAnError) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(test::fixtures_dir() / "qwen2-tiny");
  graph::Model model(test::device(), files, {.context = 600, .slots = 2, .kv_tokens = 512});
  Scheduler scheduler(model, nullptr, {.parallel = 2});
  std::mt19937 rng(6);
  EXPECT_THAT([&] { scheduler.submit(greedy_request(random_prompt(512, rng), 1), {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("512 tokens but the KV-cache pool holds 512")));
  std::promise<SequenceEvent> last;
  scheduler.submit(greedy_request(random_prompt(500, rng), 30), [&](const SequenceEvent& event) {
    if (event.done) last.set_value(event);
    return true;
  });
  SequenceEvent done = last.get_future().get();
  EXPECT_THAT(done.error, HasSubstr("KV cache full: the sequence needs 513 tokens (3 blocks of 256)"));
  EXPECT_EQ(done.result.tokens.size(), 13u);  // positions 500..511 fed: the 13th id drawn, then no block
  EXPECT_EQ(scheduler.run(greedy_request({1, 2, 3}, 4)).tokens.size(), 4u);
}

// A follow-up request that found most of its prompt cached, then gave its blocks back to an older sequence that
// needed them (a preemption), computes its whole prompt again: it reports no cached tokens.
TEST(SchedulerBlocks, APreemptedSequenceReportsItsPromptComputedAgain) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(test::fixtures_dir() / "qwen2-tiny");
  graph::Model model(test::device(), files, {.context = 600, .slots = 2, .kv_tokens = 768});
  ASSERT_EQ(model.kv_blocks().total, 3u);
  Scheduler scheduler(model, nullptr, {.parallel = 2});
  std::mt19937 rng(7);
  std::vector<int32_t> conversation = random_prompt(250, rng);
  Generation first = scheduler.run(greedy_request(conversation, 5));
  // Its slot keeps the prompt and 4 of the 5 ids (the last was never fed) in one block.
  conversation.insert(conversation.end(), first.tokens.begin(), first.tokens.end());
  for (int32_t id : random_prompt(10, rng)) conversation.push_back(id);
  // The older sequence grows to 520 tokens (3 blocks) while the follow-up, which needs a second block, waits
  // holding one: the follow-up gives it back.
  auto results = run_together(scheduler, [&] {
    std::vector<SequenceRequest> requests;
    requests.push_back(greedy_request(random_prompt(500, rng), 20));
    requests.push_back(greedy_request(conversation, 30));
    return requests;
  }());
  EXPECT_EQ(results[1].stats.prefilled_tokens, conversation.size());
  EXPECT_EQ(scheduler.stats().cached_tokens, 0u);
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GERBIL_REQUIRE_FIXTURES();
    files_.emplace(ModelFiles::open(test::fixtures_dir() / "qwen2-tiny"));
    model_.emplace(test::device(), *files_, graph::ModelOptions{.context = 40, .slots = 2});
  }
  std::optional<ModelFiles> files_;
  std::optional<graph::Model> model_;
};

// A submitted request's events as they come: the ids so far and, at the end, the result.
class Watched {
 public:
  // The callback to submit with; each event first waits `delay` (on the scheduler's thread).
  SequenceCallback callback(std::chrono::milliseconds delay = {}) {
    return [this, delay](const SequenceEvent& event) {
      std::this_thread::sleep_for(delay);
      std::lock_guard lock(mutex_);
      seen_ += event.ids.size();
      if (event.done) result_ = event.result;
      changed_.notify_all();
      return true;
    };
  }
  // Waits until `ids` ids have come, or the end.
  void wait_for(size_t ids) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return seen_ >= ids || result_; });
  }
  const Generation& result() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return result_.has_value(); });
    return *result_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t seen_ = 0;
  std::optional<Generation> result_;
};

// Decode steps of the same rows are queued ahead of the host (graph::Model::forward_batch_pick). A prompt that
// arrives meanwhile waits for the step queued ahead instead of discarding it, and the step that draws a sequence's
// last id (its max_new_tokens) queues none: every step queued ahead is taken, and each answer is the one it gives
// alone.
TEST(StepsAhead, ArrivalsAndDeparturesDiscardNone) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(test::fixtures_dir() / "qwen2-tiny");
  const std::vector<std::pair<std::vector<int32_t>, uint32_t>> asks = {
      {{41, 42, 43, 44, 45}, 24}, {{51, 52, 53}, 24}, {{61, 62, 63, 64, 65, 66, 67}, 9}, {{71, 72, 73, 74}, 6}};
  std::vector<Generation> alone;
  {
    graph::Model model(test::device(), files, {.context = 48});
    Scheduler scheduler(model, nullptr);
    for (const auto& [prompt, tokens] : asks) alone.push_back(scheduler.run(greedy_request(prompt, tokens)));
  }
  graph::Model model(test::device(), files, {.context = 48, .slots = 3});
  Scheduler scheduler(model, nullptr, {.parallel = 3});
  std::vector<Watched> watched(asks.size());
  // The last request arrives once the first has 10 ids (the third, of 9, has ended by then), from the scheduler's
  // own thread, while the step after is already queued.
  auto first_watch = watched[0].callback();
  bool arrived = false;
  size_t first_ids = 0;
  auto first = [&](const SequenceEvent& event) {
    first_ids += event.ids.size();
    if (!arrived && first_ids >= 10) {
      arrived = true;
      scheduler.submit(greedy_request(asks[3].first, asks[3].second), watched[3].callback());
    }
    return first_watch(event);
  };
  scheduler.submit(greedy_request(asks[0].first, asks[0].second), first);
  for (size_t i = 1; i < 3; ++i) scheduler.submit(greedy_request(asks[i].first, asks[i].second), watched[i].callback());
  for (size_t i = 0; i < asks.size(); ++i) {
    EXPECT_EQ(watched[i].result().tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(watched[i].result().finish, FinishReason::MaxTokens) << "request " << i;
  }
  scheduler.shutdown(true);  // the stats of the last step are recorded after its ids are delivered
  SchedulerStats stats = scheduler.stats();
  EXPECT_GT(stats.steps_ahead_queued, 10u);
  EXPECT_EQ(stats.steps_ahead_taken, stats.steps_ahead_queued);
}

// Three requests answered together in three slots, one of them (ENDING: its slot) ending at a stop id, which the
// scheduler cannot foresee: the step queued ahead for the batch is taken without that sequence's row, and the next
// one is queued over the remaining rows, whose inputs are the picks of rows they no longer sit in (where the ending
// slot came first). With WITH_NEWCOMER a fourth request arrives as that sequence ends, from the scheduler's own
// thread: it takes the slot (its cache rewound) and waits for that step. Every step queued ahead is taken, and each
// answer is the one it gives alone: greedy, and greedy after a repetition penalty (whose steps queue only their
// products ahead, and whose dropped row must not count an id in its slot's counts). With ENDING_SAMPLES the ending
// request samples (seeded) where the others are greedy: once it has ended, the newcomer waits only for a step whose
// picks are the greedy batch's.
void expect_a_stop_discards_no_step(size_t ending, bool with_newcomer, bool ending_samples = false) {
  ModelFiles files = ModelFiles::open(test::fixtures_dir() / "qwen2-tiny");
  for (float penalty : {1.0f, 1.3f}) {
    SCOPED_TRACE(testing::Message() << "repetition penalty " << penalty);
    auto request = [&](std::vector<int32_t> prompt, uint32_t tokens, std::vector<int32_t> stop_ids = {},
                       bool samples = false) {
      SequenceRequest r = greedy_request(std::move(prompt), tokens);
      if (samples) r.options.sampling.temperature = 0.8f, r.options.sampling.seed = 11;
      r.options.sampling.repetition_penalty = penalty;
      r.options.ignore_eos = stop_ids.empty();
      r.options.stop_ids = std::move(stop_ids);
      return r;
    };
    std::vector<std::pair<std::vector<int32_t>, uint32_t>> asks = {
        {{41, 42, 43, 44, 45}, 24}, {{51, 52, 53}, 24}, {{61, 62, 63, 64, 65, 66, 67}, 24}, {{71, 72, 73, 74}, 6}};
    if (!with_newcomer) asks.pop_back();
    std::vector<int32_t> stop_ids;  // the ending one's
    std::vector<Generation> alone;
    {
      graph::Model model(test::device(), files, {.context = 48});
      Scheduler scheduler(model, nullptr);
      // It ends at the first id of its answer, from the fifth on, that it has not drawn before.
      std::vector<int32_t> free_run =
          scheduler.run(request(asks[ending].first, asks[ending].second, {}, ending_samples)).tokens;
      size_t end = 4;
      while (end < free_run.size() &&
             std::ranges::count(free_run.begin(), free_run.begin() + std::ptrdiff_t(end), free_run[end]) > 0)
        ++end;
      ASSERT_LT(end, free_run.size()) << "no id of the ending answer is new after its fourth";
      stop_ids = {free_run[end]};
      for (size_t i = 0; i < asks.size(); ++i)
        alone.push_back(scheduler.run(request(asks[i].first, asks[i].second,
                                              i == ending ? stop_ids : std::vector<int32_t>{}, i == ending && ending_samples)));
      ASSERT_EQ(alone[ending].finish, FinishReason::EndOfSequence);
      ASSERT_EQ(alone[ending].tokens.size(), end);
    }
    graph::Model model(test::device(), files, {.context = 48, .slots = 3});
    Scheduler scheduler(model, nullptr, {.parallel = 3});
    std::vector<Watched> watched(asks.size());
    auto ending_watch = watched[ending].callback();
    auto ending_callback = [&](const SequenceEvent& event) {
      if (event.done && with_newcomer) scheduler.submit(request(asks[3].first, asks[3].second), watched[3].callback());
      return ending_watch(event);
    };
    for (size_t i = 0; i < 3; ++i)  // in slot order: request i takes slot i
      scheduler.submit(request(asks[i].first, asks[i].second, i == ending ? stop_ids : std::vector<int32_t>{},
                               i == ending && ending_samples),
                       i == ending ? SequenceCallback(ending_callback) : watched[i].callback());
    for (size_t i = 0; i < alone.size(); ++i) {
      EXPECT_EQ(watched[i].result().tokens, alone[i].tokens) << "request " << i;
      EXPECT_EQ(watched[i].result().finish, alone[i].finish) << "request " << i;
    }
    scheduler.shutdown(true);  // the stats of the last step are recorded after its ids are delivered
    SchedulerStats stats = scheduler.stats();
    EXPECT_GT(stats.steps_ahead_queued, 10u);
    EXPECT_EQ(stats.steps_ahead_taken, stats.steps_ahead_queued);
    EXPECT_EQ(stats.host_draws, 0u);
  }
}

TEST(StepsAhead, ASequenceEndingAtAStopIdDiscardsNone) {
  GERBIL_REQUIRE_FIXTURES();
  expect_a_stop_discards_no_step(2, true);
}

// A sampled sequence ends amid greedy ones as a request arrives.
TEST(StepsAhead, ASampledSequenceEndingAmidGreedyOnesDiscardsNone) {
  GERBIL_REQUIRE_FIXTURES();
  expect_a_stop_discards_no_step(2, true, true);
}

// The first slot's sequence ends and nobody takes its slot: the two others decode on, each from its own id.
TEST(StepsAhead, TheFirstSlotEndingLeavesTheOthersTheirOwnIds) {
  GERBIL_REQUIRE_FIXTURES();
  expect_a_stop_discards_no_step(0, false);
}

TEST_F(SchedulerTest, CancellingARunningRequestFreesItsSlot) {
  Watched watched;  // outlives the scheduler, which holds its callback
  Scheduler scheduler(*model_, nullptr, {.parallel = 2});
  uint64_t id = scheduler.submit(greedy_request({1, 2, 3}, 30), watched.callback());
  watched.wait_for(2);
  scheduler.cancel(id);
  const Generation& result = watched.result();
  EXPECT_EQ(result.finish, FinishReason::Cancelled);
  EXPECT_LT(result.tokens.size(), 30u);
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.cancelled, 1u);
  EXPECT_EQ(stats.active, 0u);
  // The slot serves the next request as if nothing had happened.
  Generation next = scheduler.run(greedy_request({4, 5, 6}, 5));
  EXPECT_EQ(next.tokens.size(), 5u);
}

// A shutdown that does not finish, called while an earlier one lets a sequence finish (the server's second
// Ctrl-C), cancels that sequence, and both calls return once the scheduler has stopped.
TEST_F(SchedulerTest, ASecondShutdownCancelsWhatTheFirstLetsFinish) {
  Watched watched;  // outlives the scheduler, which holds its callback
  Scheduler scheduler(*model_, nullptr, {.parallel = 2});
  // 20 ms an event: 30 tokens take 0.6 s, and both calls land mid-way.
  scheduler.submit(greedy_request({1, 2, 3}, 30), watched.callback(std::chrono::milliseconds(20)));
  watched.wait_for(2);
  std::thread finishing([&] { scheduler.shutdown(/*finish=*/true); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  scheduler.shutdown(/*finish=*/false);
  finishing.join();
  const Generation& result = watched.result();
  EXPECT_EQ(result.finish, FinishReason::Cancelled);
  EXPECT_LT(result.tokens.size(), 30u);
}

// A callback that throws on its third event cancels its sequence there (the exception goes no further), and
// the same request afterwards gives what it gave before.
TEST_F(SchedulerTest, ACallbackThatThrowsCancelsOnlyItsSequence) {
  Scheduler scheduler(*model_, nullptr, {.parallel = 2});
  Generation expected = scheduler.run(greedy_request({7, 8, 9}, 6));
  std::promise<Generation> cancelled;
  int events = 0;
  scheduler.submit(greedy_request({7, 8, 9}, 6), [&](const SequenceEvent& event) {
    if (event.done) cancelled.set_value(event.result);
    else if (++events == 3) throw std::runtime_error("callback failed");
    return true;
  });
  Generation g = cancelled.get_future().get();
  EXPECT_EQ(g.finish, FinishReason::Cancelled);
  EXPECT_EQ(g.tokens.size(), 3u);
  EXPECT_EQ(scheduler.run(greedy_request({7, 8, 9}, 6)).tokens, expected.tokens);
}

// A tokenizer of VOCAB ids whose texts are "<0>", "<1>", ...; its decoder rewrites "<A><B>" (A then B) as
// "rewritten", so a stream decoder that has returned "<A>" fails at B: its text changed after it was returned.
Tokenizer rewriting_tokenizer(int32_t vocab, int32_t a, int32_t b) {
  nlohmann::json ids = nlohmann::json::object();
  for (int32_t id = 0; id < vocab; ++id) ids[fmt::format("<{}>", id)] = id;
  nlohmann::json json = {
      {"model", {{"type", "BPE"}, {"vocab", ids}, {"merges", nlohmann::json::array()}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Fuse"}},
          {{"type", "Replace"}, {"pattern", {{"String", fmt::format("<{}><{}>", a, b)}}}, {"content", "rewritten"}}}}}}};
  return Tokenizer::from_json(json, "rewriting.json");
}

// A sequence whose stream decoder throws while it decodes in a batch with another (its ids picked on the GPU)
// ends with that error, and the scheduler goes on: before, the exception left the scheduler's thread and ended
// the process.
TEST_F(SchedulerTest, ADecoderErrorInABatchEndsOnlyThatSequence) {
  ASSERT_TRUE(model_->can_pick_in_batch());
  const std::vector<int32_t> prompt = {11, 12, 13};
  std::vector<int32_t> answer = Scheduler(*model_, nullptr).run(greedy_request(prompt, 8)).tokens;
  // The first pair of successive ids from the third on that did not come earlier: the decoder fails there.
  auto pair_came_earlier = [&](size_t i) {
    for (size_t j = 1; j < i; ++j)
      if (answer[j - 1] == answer[i - 1] && answer[j] == answer[i]) return true;
    return false;
  };
  size_t fails_at = 2;
  while (fails_at < answer.size() && pair_came_earlier(fails_at)) ++fails_at;
  ASSERT_LT(fails_at, answer.size()) << "the answer repeats one pair of ids";
  Tokenizer tokenizer = rewriting_tokenizer(int32_t(model_->token_count()), answer[fails_at - 1], answer[fails_at]);

  Scheduler scheduler(*model_, &tokenizer, {.parallel = 2});
  // The second request is queued before the first's second step: from the third step on, both decode together.
  std::promise<void> second_queued;
  std::shared_future<void> queued = second_queued.get_future().share();
  std::promise<SequenceEvent> first_done, second_done;
  bool first_event = true;
  scheduler.submit(greedy_request(prompt, 8), [&](const SequenceEvent& event) {
    if (std::exchange(first_event, false)) queued.wait();
    if (event.done) first_done.set_value(event);
    return true;
  });
  scheduler.submit(greedy_request(prompt, 8), [&](const SequenceEvent& event) {
    if (event.done) second_done.set_value(event);
    return true;
  });
  second_queued.set_value();
  for (auto* done : {&first_done, &second_done}) {
    SequenceEvent last = done->get_future().get();
    EXPECT_THAT(last.error, HasSubstr("changed text that was already returned"));
    EXPECT_EQ(last.result.tokens, std::vector<int32_t>(answer.begin(), answer.begin() + std::ptrdiff_t(fails_at) + 1));
  }
  EXPECT_EQ(scheduler.stats().failed, 2u);
  EXPECT_EQ(scheduler.run(greedy_request(prompt, 1)).tokens, std::vector<int32_t>{answer[0]});
}

// Log-probabilities come one per delivered id, each for its id: the end-of-sequence id that ends an answer is not
// part of it and has none.
TEST_F(SchedulerTest, LogprobsComeOnePerDeliveredId) {
  const std::vector<int32_t> prompt = {21, 22, 23};
  std::vector<int32_t> answer = Scheduler(*model_, nullptr).run(greedy_request(prompt, 6)).tokens;
  // The first id that did not come earlier ends the answer there.
  size_t ends_at = 1;
  while (ends_at < answer.size() && std::count(answer.begin(), answer.begin() + std::ptrdiff_t(ends_at), answer[ends_at]))
    ++ends_at;
  ASSERT_LT(ends_at, answer.size()) << "the answer repeats one id";
  SequenceRequest request = greedy_request(prompt, 6);
  request.options.ignore_eos = false;
  request.options.stop_ids = {answer[ends_at]};
  request.logprobs = true;
  std::vector<int32_t> ids;
  std::vector<StepLogprobs> logprobs;
  std::promise<FinishReason> finished;
  Scheduler scheduler(*model_, nullptr);
  scheduler.submit(std::move(request), [&](const SequenceEvent& event) {
    EXPECT_EQ(event.logprobs.size(), event.ids.size());
    ids.insert(ids.end(), event.ids.begin(), event.ids.end());
    logprobs.insert(logprobs.end(), event.logprobs.begin(), event.logprobs.end());
    if (event.done) finished.set_value(event.result.finish);
    return true;
  });
  EXPECT_EQ(finished.get_future().get(), FinishReason::EndOfSequence);
  EXPECT_EQ(ids, std::vector<int32_t>(answer.begin(), answer.begin() + std::ptrdiff_t(ends_at)));
  ASSERT_EQ(logprobs.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(logprobs[i].chosen.id, ids[i]) << "id " << i;
}

// A constraint that allows a fifth of the ids, a different fifth after each id (so the model's own best is mostly
// ruled out), and checks that every id it is given was allowed.
class EveryFifthId final : public TokenConstraint {
 public:
  explicit EveryFifthId(int32_t last) : last_(last) {}
  void mask(std::span<uint8_t> allowed) override {
    for (size_t id = 0; id < allowed.size(); ++id)
      if (!allows(int32_t(id))) allowed[id] = 0;
  }
  void accept(int32_t id) override {
    EXPECT_TRUE(allows(id)) << "id " << id << " after " << last_;
    last_ = id;
  }
  bool complete() const override { return true; }

 private:
  bool allows(int32_t id) const { return (uint32_t(id) * 7 + uint32_t(last_)) % 5 == 0; }
  int32_t last_;
};

// A constrained sequence decoding alone picks on the GPU under each step's mask; with log-probabilities asked it
// draws on the host from the logits read back. Both give the same tokens, greedy and seeded, and not the
// unconstrained answer.
// 12 ids of PROMPT constrained to EveryFifthId at TEMPERATURE (seeded with SEED), with LOGPROBS (drawn on the host).
SequenceRequest every_fifth_id_request(std::vector<int32_t> prompt, float temperature, uint64_t seed, bool logprobs) {
  SequenceRequest r = greedy_request(prompt, 12);
  r.options.sampling.temperature = temperature;
  r.options.sampling.seed = seed;
  r.constraint = std::make_unique<EveryFifthId>(prompt.back());
  r.logprobs = logprobs;
  return r;
}

TEST_F(SchedulerTest, AConstrainedAnswerIsTheSameDrawnOnTheGpuOrOnTheHost) {
  const std::vector<int32_t> prompt = {41, 42, 43};
  Scheduler scheduler(*model_, nullptr);
  for (float temperature : {0.0f, 0.9f}) {
    SCOPED_TRACE(testing::Message() << "temperature " << temperature);
    auto request = [&](bool logprobs) { return every_fifth_id_request(prompt, temperature, 3, logprobs); };
    std::vector<int32_t> on_gpu = scheduler.run(request(false)).tokens;
    EXPECT_EQ(on_gpu, scheduler.run(request(true)).tokens);
    EXPECT_EQ(on_gpu.size(), 12u);
    SequenceRequest free = request(false);
    free.constraint.reset();
    EXPECT_NE(on_gpu, scheduler.run(std::move(free)).tokens);
  }
}

// Constrained sequences decoding together pick on the GPU, each row under its own mask: the same tokens as each
// drawn on the host from the logits read back (log-probabilities asked), greedy and seeded, and none drawn on the
// host (each prompt's first id is picked on the GPU at its last chunk).
TEST_F(SchedulerTest, ConstrainedAnswersInABatchAreTheSameDrawnOnTheGpuOrOnTheHost) {
  auto both = [&](bool logprobs) {
    std::vector<SequenceRequest> requests;
    requests.push_back(every_fifth_id_request({41, 42, 43}, 0.0f, 5, logprobs));
    requests.push_back(every_fifth_id_request({61, 62, 63, 64, 65}, 0.9f, 5, logprobs));
    return requests;
  };
  Scheduler on_host(*model_, nullptr, {.parallel = 2});
  auto drawn_on_host = run_together(on_host, both(true));
  on_host.shutdown(true);
  Scheduler on_gpu(*model_, nullptr, {.parallel = 2});
  auto picked_on_gpu = run_together(on_gpu, both(false));
  ASSERT_EQ(picked_on_gpu.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(picked_on_gpu[i].tokens, drawn_on_host[i].tokens) << "request " << i;
    EXPECT_EQ(picked_on_gpu[i].tokens.size(), 12u);
  }
  EXPECT_EQ(on_gpu.stats().host_draws, 0u);
  // Each step's products were queued before the host had read the ids before them: only the picks wait for the
  // masks.
  EXPECT_GT(on_gpu.stats().steps_ahead_taken, 0u);
}

// A constraint left with no id to allow (a broken grammar) ends its sequence with an error naming how far it got,
// on the GPU path and on the host path alike, and the scheduler goes on serving.
TEST_F(SchedulerTest, AConstraintThatAllowsNoIdEndsItsSequenceWithAnError) {
  class NothingAfterThree final : public TokenConstraint {
   public:
    void mask(std::span<uint8_t> allowed) override {
      if (accepted_ >= 3) std::fill(allowed.begin(), allowed.end(), 0);
    }
    void accept(int32_t) override { ++accepted_; }
    bool complete() const override { return false; }

   private:
    int accepted_ = 0;
  };
  Scheduler scheduler(*model_, nullptr);
  for (bool logprobs : {false, true}) {
    SCOPED_TRACE(logprobs ? "host path (log-probabilities)" : "GPU path");
    auto run = [&] {  // a fresh request each call: a failed expectation calls it again to describe it
      SequenceRequest request = greedy_request({51, 52, 53}, 10);
      request.constraint = std::make_unique<NothingAfterThree>();
      request.logprobs = logprobs;
      scheduler.run(std::move(request));
    };
    EXPECT_THAT(run, ::testing::ThrowsMessage<Error>(HasSubstr("the output constraint allows no token after 3 "
                                                               "generated tokens")));
  }
  EXPECT_EQ(scheduler.run(greedy_request({51, 52, 53}, 4)).tokens.size(), 4u);
  scheduler.shutdown(true);

  // In a batch picked on the GPU, the error ends only its own sequence.
  Scheduler batched(*model_, nullptr, {.parallel = 2});
  SequenceRequest broken = greedy_request({51, 52, 53}, 10);
  broken.constraint = std::make_unique<NothingAfterThree>();
  std::promise<std::string> error;
  batched.submit(std::move(broken), [&](const SequenceEvent& event) {
    if (event.done) error.set_value(event.error);
    return true;
  });
  Generation beside = batched.run(greedy_request({54, 55, 56, 57}, 12));
  EXPECT_THAT(error.get_future().get(), HasSubstr("the output constraint allows no token after 3 generated tokens"));
  EXPECT_EQ(beside.tokens.size(), 12u);
  EXPECT_EQ(batched.stats().host_draws, 0u);
}

// logit_bias moves the draws: +100 on one id makes every greedy token that id, -100 on the unbiased answer's first
// id makes the first token another; an id past the vocabulary is refused.
TEST_F(SchedulerTest, LogitBiasMovesTheDraws) {
  Scheduler scheduler(*model_, nullptr, {.parallel = 2});
  const std::vector<int32_t> prompt = {31, 32, 33};
  std::vector<int32_t> answer = scheduler.run(greedy_request(prompt, 4)).tokens;
  SequenceRequest favoured = greedy_request(prompt, 4);
  favoured.logit_bias = {{77, 100.0f}};
  EXPECT_EQ(scheduler.run(std::move(favoured)).tokens, std::vector<int32_t>(4, 77));
  SequenceRequest banned = greedy_request(prompt, 4);
  banned.logit_bias = {{answer[0], -100.0f}};
  EXPECT_NE(scheduler.run(std::move(banned)).tokens[0], answer[0]);
  SequenceRequest past = greedy_request(prompt, 4);
  past.logit_bias = {{99999, 1.0f}};
  EXPECT_THAT([&] { scheduler.submit(std::move(past), {}); }, ::testing::ThrowsMessage<Error>(HasSubstr("logit_bias")));
}

TEST_F(SchedulerTest, ZeroNewTokensGenerateNothing) {
  Scheduler scheduler(*model_, nullptr);
  Generation g = scheduler.run(greedy_request({1, 2}, 0));
  EXPECT_TRUE(g.tokens.empty());
  EXPECT_EQ(g.finish, FinishReason::MaxTokens);
}

TEST_F(SchedulerTest, RefusesWhatCannotRun) {
  Scheduler scheduler(*model_, nullptr, {.parallel = 1, .max_queue = 0});
  EXPECT_THAT([&] { scheduler.submit(greedy_request({}, 1), {}); }, ::testing::ThrowsMessage<Error>(HasSubstr("empty")));
  EXPECT_THAT([&] { scheduler.submit(greedy_request(std::vector<int32_t>(40, 1), 1), {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("40 tokens but the context holds 40")));
  EXPECT_THAT([&] { scheduler.submit(greedy_request({1, 99999}, 1), {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("prompt token 1")));
  // With no queue, a request runs only while a slot is free: the first takes the slot, the second finds none.
  uint64_t first = scheduler.submit(greedy_request({1, 2}, 30), {});
  EXPECT_THAT([&] { scheduler.submit(greedy_request({1}, 1), {}); },
              ::testing::ThrowsMessage<QueueFull>(HasSubstr("--max-queue 0")));
  scheduler.cancel(first);
  EXPECT_THAT([&] { Scheduler(*model_, nullptr, {.parallel = 3}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("the model has 2")));
}

}  // namespace
}  // namespace gerbil
