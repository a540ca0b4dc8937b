// The scheduler: the one generation path. Requests (a prompt, sampling settings, stop conditions, an
// optional token constraint) join a queue; up to `parallel` of them run at once, each in a slot of the
// model's KV-cache pool, whose blocks (graph::Model::kv_blocks) the slots share: a step takes blocks for the
// tokens it adds (decoding sequences first, then prompt chunks as far as blocks are free; a chunk that gets none
// waits), a finished sequence's blocks stay with its slot for a follow-up request that extends the conversation
// until a running sequence needs them (the least recently used slot's first), and where no running sequence can
// get a block at all, the youngest gives its blocks back and feeds its tokens again later, or, alone, ends with an
// error. Each step runs one batched model step over the active slots: the next token of
// every decoding sequence, plus a chunk of a prompt being prefilled, so a long prompt does not freeze the
// streams already running. Tokens are sampled per sequence with its own settings, penalties, mask and stop
// conditions, and streamed to the request's callback as final text.
//
// The server submits requests from its HTTP threads; gerbil::Engine and the CLI use run(), which submits
// one request and waits for it. Callbacks run on the scheduler's thread and must not block for long.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "generate/constraint.h"
#include "gerbil/error.h"
#include "generate/generation.h"
#include "graph/model.h"
#include "tokenizer/tokenizer.h"

namespace gerbil {

// A token's log-probability (natural log, of the distribution after temperature 1 and no truncation, as
// OpenAI reports it).
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};
struct StepLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the `top_logprobs` most likely ids, most likely first
};

struct SequenceRequest {
  std::vector<int32_t> prompt;  // no special tokens are added
  GenerateOptions options;
  std::unique_ptr<TokenConstraint> constraint;  // optional: restricts every drawn token
  bool logprobs = false;
  uint32_t top_logprobs = 0;  // at most kMaxTopLogprobs
  // Added to the logits of these ids before every draw (OpenAI's logit_bias); finite.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Whether special tokens are left out of the text (tool-call formats such as Mistral's [TOOL_CALLS] and
  // Llama 3's <|python_tag|> are special tokens that the output parser must see).
  bool skip_special_tokens = true;
};
constexpr uint32_t kMaxTopLogprobs = 20;

// What a sequence produced since its last event. The last event has `done` set and `result` filled.
struct SequenceEvent {
  std::string text;                   // final text (whole UTF-8 characters, stop strings held back)
  std::vector<int32_t> ids;           // the ids drawn since the last event
  std::vector<StepLogprobs> logprobs;  // one per id, when the request asked for them
  bool done = false;
  Generation result;   // when done: tokens, text, finish reason, stats, seed
  std::string error;   // when done and the sequence failed: why (the result holds what came before)
};
// Returning false cancels the sequence (its last event then comes with FinishReason::Cancelled).
using SequenceCallback = std::function<bool(const SequenceEvent&)>;

struct SchedulerOptions {
  uint32_t parallel = 1;      // sequences decoded at once (KV-cache slots)
  uint32_t max_queue = 64;    // requests waiting while every slot is taken; more are refused (QueueFull)
  uint32_t prefill_chunk = 0; // prompt tokens per step; 0: the model's max_chunk
};

// Thrown by submit() when max_queue requests already wait.
struct QueueFull : Error {
  using Error::Error;
};

struct SchedulerStats {
  size_t queued = 0, active = 0;
  uint64_t finished = 0, cancelled = 0, failed = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  uint64_t host_draws = 0;  // ids drawn on the host from read-back logits (the others are picked on the GPU)
  uint32_t kv_blocks_used = 0, kv_blocks_total = 0;  // the KV-cache pool's blocks after the last step
  // Step graphs the model recorded (each new batch shape) and the seconds spent recording them, after the last step.
  uint64_t graphs_recorded = 0;
  double graph_seconds = 0;
  // Batched decode steps queued ahead of the host, and those a next step took (graph::Model::steps_ahead).
  uint64_t steps_ahead_queued = 0, steps_ahead_taken = 0;
};

class Scheduler {
 public:
  Scheduler(graph::Model& model, const Tokenizer* tokenizer, const SchedulerOptions& options = {});
  ~Scheduler();  // cancels what runs and waits for the scheduler thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Thread-safe. Checks the request (throws gerbil::Error naming the problem: an empty prompt, a prompt the
  // context cannot hold, bad sampling settings) and queues it; returns its id. Throws QueueFull when the queue
  // is full, and gerbil::Error after shutdown().
  uint64_t submit(SequenceRequest request, SequenceCallback on_event);
  // Thread-safe: cancels a queued or running request (its callback gets a last event). Unknown ids are ignored.
  void cancel(uint64_t id);

  // Submits one request and waits for it: the single-sequence path of gerbil::Engine and the CLI. ON_TEXT
  // streams text; CANCEL stops it. Rethrows a failure of the sequence as gerbil::Error.
  Generation run(SequenceRequest request, const TextCallback& on_text = {},
                 const std::atomic<bool>* cancel = nullptr);

  // Stops taking requests; with `finish`, lets queued and running ones end, else cancels them. Then waits. A
  // later call without `finish` cancels what an earlier one was letting end (a second Ctrl-C); any thread may
  // call it, and each returns once the scheduler has stopped.
  void shutdown(bool finish);

  // Forgets the conversations the idle slots' caches hold: the next requests compute their whole prompts.
  void forget_cache();

  SchedulerStats stats() const;
  uint32_t parallel() const { return options_.parallel; }
  uint32_t context() const;  // tokens one sequence may hold (prompt and answer)

 private:
  struct Sequence;
  struct Slot;
  void loop();
  bool any_active() const;
  void admit();
  void step();
  bool newcomer_can_join() const;
  bool newcomer_can_take_a_slot() const;
  bool ends_after_next(const Slot& slot) const;
  // Whether a shutdown has asked to cancel what runs.
  bool cancelling_all() const;
  bool decode_solo_on_gpu(Slot& slot);
  bool pick_on_gpu(const std::vector<Slot*>& owners, std::span<const graph::Segment> segments, bool queue_ahead);
  bool took_step(Slot& slot, std::span<const int32_t> tokens);
  void fill_mask(Sequence& s, std::span<uint32_t> bits) const;
  void draw(Slot& slot, std::span<float> logits);
  bool accept(Slot& slot, int32_t id, std::optional<StepLogprobs> logprobs = {});
  void deliver(Sequence& sequence);
  void finish(Slot& slot, FinishReason reason, std::string error = {});
  void abandon(Slot& slot, const std::string& error);
  void finish_unstarted(std::unique_ptr<Sequence> sequence);
  // Gives idle slots' cached blocks back, least recently used first, until `needed` blocks are free or no idle
  // slot holds any.
  void reclaim_blocks(uint64_t needed);
  // The most tokens the slot can hold with the blocks it has and `available` more.
  uint64_t tokens_within(const Slot& slot, uint64_t available) const;
  // No running sequence could get a block: the youngest that holds blocks gives them back and feeds its tokens
  // again later (beside others), or, alone, can never fit and ends with an error.
  void unblock();
  void record_blocks();
  SchedulerOptions options_;
  graph::Model& model_;
  const Tokenizer* tokenizer_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> queue_;
  std::vector<std::unique_ptr<Sequence>> withdrawn_;  // cancelled while queued: their last event is still due
  std::atomic<size_t> waiting_{0};                    // queue_.size(), read without the lock by the decode loop
  std::vector<std::unique_ptr<Slot>> slots_;
  SchedulerStats stats_;
  uint64_t next_id_ = 1;
  uint64_t admitted_ = 0;  // admissions so far: orders slots by last use
  bool stopping_ = false, finish_on_stop_ = false;
  std::mutex join_mutex_;  // one shutdown() joins the thread at a time
  std::thread thread_;
};

}  // namespace gerbil
