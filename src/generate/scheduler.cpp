#include "generate/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "gerbil/error.h"
#include "generate/stop_strings.h"
#include "kernels/model.h"

namespace gerbil {
namespace {

using Clock = std::chrono::steady_clock;

// Log-probabilities of LOGITS (temperature 1, nothing masked or penalised, as OpenAI reports them): the
// chosen id's and the TOP most likely ones'.
StepLogprobs logprobs_of(std::span<const float> logits, int32_t chosen, uint32_t top) {
  float best = -std::numeric_limits<float>::infinity();
  for (float x : logits)
    if (x > best) best = x;
  double sum = 0;
  for (float x : logits)
    if (!std::isnan(x)) sum += std::exp(double(x) - best);
  float log_sum = float(std::log(sum)) + best;
  StepLogprobs out{{chosen, logits[size_t(chosen)] - log_sum}, {}};
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  top = std::min<uint32_t>(top, uint32_t(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + top, ids.end(), [&](int32_t a, int32_t b) {
    float x = logits[size_t(a)], y = logits[size_t(b)];
    return x > y || (x == y && a < b);
  });
  for (uint32_t i = 0; i < top; ++i) out.top.push_back({ids[i], logits[size_t(ids[i])] - log_sum});
  return out;
}

// A constraint that allows no id leaves the sequence nothing to draw: on the host or the GPU, the same error.
[[noreturn]] void no_token_allowed(size_t generated) {
  fail("the output constraint allows no token after {} generated tokens", generated);
}

// Sets the logits of the ids CONSTRAINT rules out to -inf; throws when it allows none.
void apply_constraint(TokenConstraint& constraint, std::span<float> logits, size_t generated) {
  std::vector<uint8_t> allowed(logits.size(), 1);
  constraint.mask(allowed);
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!allowed[i]) logits[i] = -std::numeric_limits<float>::infinity();
    any = any || allowed[i];
  }
  if (!any) no_token_allowed(generated);
}

}  // namespace

struct Scheduler::Sequence {
  // TOKEN_COUNT: the ids the sampler may draw (the tokenizer's, where the model's logits are padded past it).
  Sequence(uint64_t id, SequenceRequest&& request, SequenceCallback&& on_event, const Tokenizer* tokenizer,
           const ModelConfig& config, uint32_t token_count)
      : id(id),
        request(std::move(request)),
        on_event(std::move(on_event)),
        sampler(this->request.options.sampling, token_count),
        filter(this->request.options.stop_strings),
        stop_ids(this->request.options.stop_ids),
        history(this->request.prompt),
        start(Clock::now()) {
    if (tokenizer) decoder.emplace(*tokenizer, this->request.skip_special_tokens);
    if (stop_ids.empty())
      for (int64_t eos : config.eos_token_ids) stop_ids.push_back(int32_t(eos));
    result.seed = sampler.seed();
    result.stats.prompt_tokens = this->request.prompt.size();
  }

  const std::vector<int32_t>& prompt() const { return request.prompt; }
  SeenTokens seen() const { return SeenTokens::split(history, prompt().size()); }
  const GenerateOptions& options() const { return request.options; }
  bool prefilling() const { return !next; }
  // Whether its draws need the step's logits on the host (the GPU picks ids with neither; a constraint becomes a
  // mask of the ids it allows).
  bool draws_on_host() const { return request.logprobs || !request.logit_bias.empty(); }
  // Its settings as the GPU draws with them: greedy decoding is drawing the best one (top-k 1), after the
  // penalties where there are any.
  graph::Model::GpuSampling gpu_sampling() const {
    const SamplingParams& p = options().sampling;
    return {p.greedy() ? 1.0f : p.temperature, p.greedy() ? 1u : uint32_t(std::max(p.top_k, 0)),
            p.top_p,  p.min_p,
            sampler.seed(), p.repetition_penalty,
            p.presence_penalty, p.frequency_penalty};
  }
  // Whether the cache must take tokens before the next draw or decode step: the prompt's, or after a preemption
  // (Scheduler::unblock) those the sequence had.
  bool feeding() const { return !next || fed < refeed; }
  // Whether a step that feeds it N tokens ends with its next id to draw: it decodes, or they end its prompt.
  bool draws_after(size_t n) const { return !feeding() || (!next && fed + n == input().size()); }
  std::span<const int32_t> input() const { return next ? std::span(history).first(refeed) : std::span(prompt()); }

  uint64_t id;
  SequenceRequest request;
  SequenceCallback on_event;
  std::atomic<bool> cancelled{false};
  Sampler sampler;
  std::optional<StreamDecoder> decoder;
  StopStringFilter filter;
  std::vector<int32_t> stop_ids;
  std::vector<int32_t> history;  // the prompt and every drawn id
  size_t fed = 0;                // input() tokens in the slot's cache
  size_t refeed = 0;             // tokens of `history` to feed again after a preemption
  std::optional<int32_t> next;   // the last drawn id, fed by the next step
  // Whether the GPU's token counts of its slot, which its penalties read there, are its seen() tokens: written
  // before its first draw in a batch on the GPU, kept by the draws there, stale after a draw on the host or a
  // solo run (whose steps in flight at a stop counted ids never delivered).
  bool counts_on_gpu = false;
  Generation result;
  SequenceEvent pending;  // what the next event delivers
  Clock::time_point start, prefill_start, decode_start;
};

struct Scheduler::Slot {
  uint32_t index = 0;
  std::vector<int32_t> cached;  // the tokens whose keys and values the slot's cache holds
  std::unique_ptr<Sequence> sequence;
  uint64_t last_used = 0;
};

Scheduler::Scheduler(graph::Model& model, const Tokenizer* tokenizer, const SchedulerOptions& options)
    : options_(options), model_(model), tokenizer_(tokenizer) {
  if (options_.parallel == 0) fail("the scheduler needs at least one parallel sequence (--parallel)");
  if (options_.parallel > model.slots())
    fail("{} parallel sequences need as many KV-cache slots; the model has {}", options_.parallel, model.slots());
  for (uint32_t i = 0; i < options_.parallel; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->index = i;
  }
  record_blocks();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { shutdown(false); }

uint32_t Scheduler::context() const { return model_.context(); }

uint64_t Scheduler::submit(SequenceRequest request, SequenceCallback on_event) {
  if (request.prompt.empty()) fail("the prompt is empty");
  if (request.prompt.size() >= model_.context())
    fail("the prompt has {} tokens but the context holds {} (prompt and answer; --ctx)", request.prompt.size(),
         model_.context());
  uint64_t pool_tokens = uint64_t(model_.kv_blocks().total) * model_.kv_block_tokens();
  if (request.prompt.size() >= pool_tokens)
    fail("the prompt has {} tokens but the KV-cache pool holds {} (prompt and answer; --kv-tokens)",
         request.prompt.size(), pool_tokens);
  for (size_t i = 0; i < request.prompt.size(); ++i)
    check_token_id(model_.config(), request.prompt[i], fmt::format("prompt token {}", i));
  if (!tokenizer_ && !request.options.stop_strings.empty()) fail("stop strings need a tokenizer");
  if (request.top_logprobs > kMaxTopLogprobs)
    fail("top_logprobs is {}; at most {} are returned", request.top_logprobs, kMaxTopLogprobs);
  for (auto [id, bias] : request.logit_bias) {
    check_token_id(model_.config(), id, "logit_bias token");
    if (!std::isfinite(bias)) fail("logit_bias of token {} is {}; it must be finite", id, bias);
  }
  std::lock_guard lock(mutex_);
  if (stopping_) fail("the scheduler is shutting down");
  // Requests queued and not yet admitted take the free slots first; max_queue more may wait beyond them.
  size_t free_slots = size_t(std::count_if(slots_.begin(), slots_.end(), [](auto& slot) { return !slot->sequence; }));
  if (queue_.size() >= options_.max_queue + free_slots)
    throw QueueFull(fmt::format("{} requests are already waiting (--max-queue {}) and no slot is free", queue_.size(),
                                options_.max_queue));
  uint64_t id = next_id_++;
  // Built here, on the caller's thread, so bad sampling settings or stop strings throw to the caller.
  queue_.push_back(std::make_unique<Sequence>(id, std::move(request), std::move(on_event), tokenizer_,
                                              model_.config(), model_.token_count()));
  waiting_ = queue_.size();
  wake_.notify_all();
  return id;
}

void Scheduler::cancel(uint64_t id) {
  std::lock_guard lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it)
    if ((*it)->id == id) {
      withdrawn_.push_back(std::move(*it));
      queue_.erase(it);
      waiting_ = queue_.size();
      wake_.notify_all();
      return;
    }
  for (auto& slot : slots_)
    if (slot->sequence && slot->sequence->id == id) slot->sequence->cancelled = true;
}

void Scheduler::shutdown(bool finish) {
  {
    std::lock_guard lock(mutex_);
    // The first call decides; a later one may still turn finishing into cancelling, never back.
    finish_on_stop_ = stopping_ ? finish_on_stop_ && finish : finish;
    stopping_ = true;
    wake_.notify_all();
  }
  std::lock_guard join(join_mutex_);
  if (thread_.joinable()) thread_.join();
}

void Scheduler::forget_cache() {
  std::lock_guard lock(mutex_);
  for (auto& slot : slots_)
    if (!slot->sequence) slot->cached.clear();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s = stats_;
  s.queued = queue_.size();
  s.active = size_t(std::count_if(slots_.begin(), slots_.end(), [](auto& slot) { return slot->sequence != nullptr; }));
  return s;
}

bool Scheduler::any_active() const {
  return std::any_of(slots_.begin(), slots_.end(), [](auto& slot) { return slot->sequence != nullptr; });
}

void Scheduler::loop() {
  for (;;) {
    std::vector<std::unique_ptr<Sequence>> withdrawn;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !withdrawn_.empty() || any_active(); });
      if (stopping_ && !finish_on_stop_) {
        for (auto& sequence : queue_) withdrawn_.push_back(std::move(sequence));
        queue_.clear();
        waiting_ = 0;
        for (auto& slot : slots_)
          if (slot->sequence) slot->sequence->cancelled = true;
      }
      withdrawn.swap(withdrawn_);
      admit();
      if (stopping_ && queue_.empty() && withdrawn.empty() && !any_active()) return;
    }
    for (auto& sequence : withdrawn) finish_unstarted(std::move(sequence));
    step();
  }
}

// Moves queued requests into free slots, each into the slot whose cache shares the longest prefix with its
// prompt (the least recently used among equals). Called with the lock held.
void Scheduler::admit() {
  while (!queue_.empty()) {
    auto& sequence = queue_.front();
    Slot* best = nullptr;
    size_t best_common = 0;
    for (auto& slot : slots_) {
      if (slot->sequence) continue;
      const auto& cached = slot->cached;
      const auto& prompt = sequence->prompt();
      size_t common = size_t(std::mismatch(cached.begin(), cached.begin() + std::ptrdiff_t(std::min(cached.size(), prompt.size())),
                                           prompt.begin()).first - cached.begin());
      if (!best || common > best_common || (common == best_common && slot->last_used < best->last_used)) {
        best = slot.get();
        best_common = common;
      }
    }
    if (!best) return;
    // At least one prompt token must run to produce the first logits.
    size_t reuse = std::min(best_common, sequence->prompt().size() - 1);
    model_.rewind(uint32_t(std::min<size_t>(reuse, model_.position(best->index))), best->index);
    best->cached.resize(model_.position(best->index));
    sequence->fed = best->cached.size();
    sequence->result.stats.prefilled_tokens = sequence->prompt().size() - sequence->fed;
    sequence->prefill_start = Clock::now();
    best->sequence = std::move(sequence);
    best->last_used = ++admitted_;
    queue_.pop_front();
    waiting_ = queue_.size();
  }
}

// One step: cancellations, then the next token of every decoding sequence and prompt chunks of the prefilling
// ones as far as the step's rows allow, in one batched model step; then a draw for each sequence that has
// logits to draw from.
void Scheduler::step() {
  for (auto& slot : slots_) {
    Sequence* sequence = slot->sequence.get();
    if (sequence && sequence->cancelled) finish(*slot, FinishReason::Cancelled);
    else if (sequence && sequence->options().max_new_tokens == 0) finish(*slot, FinishReason::MaxTokens);
  }
  std::vector<Slot*> decoding, prefilling;
  for (auto& slot : slots_)
    if (slot->sequence) (slot->sequence->feeding() ? prefilling : decoding).push_back(slot.get());
  if (decoding.empty() && prefilling.empty()) return record_blocks();
  if (decoding.size() == 1 && prefilling.empty() && !newcomer_can_join() && decode_solo_on_gpu(*decoding.front()))
    return record_blocks();

  // Blocks for the next token of every decoding sequence, oldest first: idle slots' caches are given up for them;
  // one that still gets none waits.
  std::sort(decoding.begin(), decoding.end(), [](Slot* a, Slot* b) { return a->sequence->id < b->sequence->id; });
  uint64_t wanted = 0;
  for (Slot* slot : decoding) wanted += model_.kv_blocks_needed(slot->index, model_.position(slot->index) + 1);
  reclaim_blocks(wanted);
  uint64_t available = model_.kv_blocks().free;
  std::vector<Slot*> owners;
  for (Slot* slot : decoding) {
    uint32_t need = model_.kv_blocks_needed(slot->index, model_.position(slot->index) + 1);
    if (need > available) continue;
    available -= need;
    owners.push_back(slot);
  }
  // Their rows in slot order: the same slots decoding together are the same step graph (graph::Model keeps one per
  // batch shape), whichever sequences they hold.
  std::sort(owners.begin(), owners.end(), [](Slot* a, Slot* b) { return a->index < b->index; });
  std::vector<graph::Segment> segments;
  for (Slot* slot : owners) segments.push_back({slot->index, std::span(&*slot->sequence->next, 1)});
  uint32_t rows = uint32_t(segments.size());
  // The next step of these rows alone may already be queued (graph::Model::forward_batch_pick): it is taken before
  // the prompts join, which would discard it (its products have run). The prompts then join the step after.
  const bool masked = std::ranges::any_of(owners, [](Slot* slot) { return bool(slot->sequence->request.constraint); });
  const bool prompts_wait = !prefilling.empty() && model_.step_ahead_for(segments, masked);
  if (prompts_wait) prefilling.clear();
  // A step is queued ahead only where the next one is likely the same rows: no prompt joins it, and no sequence
  // ends for its length.
  const bool queue_ahead = !prompts_wait && prefilling.empty() && !newcomer_can_take_a_slot() &&
                           std::none_of(owners.begin(), owners.end(), [&](Slot* slot) { return ends_after_next(*slot); });
  // The oldest prompt first, so a long one is not starved by newer short ones; each chunk as long as the step's
  // rows and the free blocks (idle slots' caches given up for it) allow.
  std::sort(prefilling.begin(), prefilling.end(), [](Slot* a, Slot* b) { return a->sequence->id < b->sequence->id; });
  for (Slot* slot : prefilling) {
    Sequence& s = *slot->sequence;
    uint32_t budget = model_.max_chunk() - rows;
    if (options_.prefill_chunk) budget = std::min(budget, options_.prefill_chunk);
    size_t n = std::min<size_t>(budget, s.input().size() - s.fed);
    if (n == 0) break;
    uint64_t used = model_.kv_blocks().free - available;  // taken by this step's earlier segments
    reclaim_blocks(used + model_.kv_blocks_needed(slot->index, s.fed + n));
    available = model_.kv_blocks().free - used;
    n = size_t(std::min<uint64_t>(n, tokens_within(*slot, available) - s.fed));
    if (n == 0) continue;  // waits for blocks
    available -= model_.kv_blocks_needed(slot->index, s.fed + n);
    segments.push_back({slot->index, s.input().subspan(s.fed, n)});
    owners.push_back(slot);
    rows += uint32_t(n);
  }
  if (segments.empty()) return unblock();

  if (pick_on_gpu(owners, segments, queue_ahead)) return record_blocks();
  std::vector<float> logits;
  try {
    logits = model_.forward_batch(segments);
  } catch (const std::exception& e) {
    for (Slot* slot : owners) finish(*slot, FinishReason::Cancelled, e.what());
    return;
  }
  size_t vocab = size_t(model_.config().vocab_size);
  for (size_t i = 0; i < owners.size(); ++i) {
    if (!took_step(*owners[i], segments[i].tokens)) continue;
    try {
      draw(*owners[i], std::span(logits).subspan(i * vocab, vocab));
    } catch (const std::exception& e) {
      abandon(*owners[i], e.what());
    }
  }
  record_blocks();
}

// Takes the tokens a step fed SLOT's sequence into its record of the cache and its progress; returns whether the
// step's logits (its segment's last row) hold the sequence's next id to draw (Sequence::draws_after).
bool Scheduler::took_step(Slot& slot, std::span<const int32_t> tokens) {
  Sequence& s = *slot.sequence;
  const bool feeding = s.feeding(), draws = s.draws_after(tokens.size());
  slot.cached.insert(slot.cached.end(), tokens.begin(), tokens.end());
  if (!feeding) return true;
  s.fed += tokens.size();
  if (draws) {  // its prompt's last chunk (a refed sequence decodes its next id in the next step)
    s.result.stats.prefill_seconds = seconds_since(s.prefill_start);
    s.decode_start = Clock::now();
  }
  return draws;
}

void Scheduler::reclaim_blocks(uint64_t needed) {
  while (model_.kv_blocks().free < needed) {
    Slot* oldest = nullptr;
    for (auto& slot : slots_)
      if (!slot->sequence && model_.kv_blocks_held(slot->index) > 0 && (!oldest || slot->last_used < oldest->last_used))
        oldest = slot.get();
    if (!oldest) return;
    std::lock_guard lock(mutex_);
    model_.reset(oldest->index);
    oldest->cached.clear();
  }
}

uint64_t Scheduler::tokens_within(const Slot& slot, uint64_t available) const {
  uint64_t tokens = (model_.kv_blocks_held(slot.index) + available) * model_.kv_block_tokens();
  return std::min<uint64_t>(tokens, model_.context());
}

void Scheduler::unblock() {
  // The youngest that holds blocks (one that holds none frees nothing); there is one: the blocks that are not
  // free belong to running sequences once idle slots' caches are given up.
  Slot* youngest = nullptr;
  size_t active = 0;
  for (auto& slot : slots_) {
    if (!slot->sequence) continue;
    ++active;
    bool holds = model_.kv_blocks_held(slot->index) > 0;
    if (holds && (!youngest || slot->sequence->id > youngest->sequence->id)) youngest = slot.get();
  }
  if (!youngest) return record_blocks();
  Sequence& s = *youngest->sequence;
  graph::KvBlockCount blocks = model_.kv_blocks();
  if (active > 1) {
    // Preempted: its tokens are fed again once blocks are free (the delivered ones stay delivered).
    std::lock_guard lock(mutex_);
    if (s.next) s.refeed = s.history.size() - 1;  // all but the id its next step feeds
    model_.reset(youngest->index);
    youngest->cached.clear();
    s.fed = 0;
    s.result.stats.prefilled_tokens = s.prompt().size();  // none of its prompt comes from the cache now
  } else {
    uint32_t held = model_.kv_blocks_held(youngest->index);
    finish(*youngest, FinishReason::Cancelled,
           fmt::format("KV cache full: the sequence needs {} tokens ({} blocks of {}) and the running sequences hold "
                       "{} of the pool's {} blocks (--kv-tokens)",
                       model_.position(youngest->index) + 1, held + 1, model_.kv_block_tokens(),
                       blocks.total - blocks.free, blocks.total));
  }
  record_blocks();
}

void Scheduler::record_blocks() {
  graph::KvBlockCount blocks = model_.kv_blocks();
  std::lock_guard lock(mutex_);
  stats_.kv_blocks_used = blocks.total - blocks.free;
  stats_.kv_blocks_total = blocks.total;
  graph::Model::GraphsRecorded graphs = model_.graphs_recorded();
  stats_.graphs_recorded = graphs.count;
  stats_.graph_seconds = graphs.seconds;
  graph::Model::StepsAhead ahead = model_.steps_ahead();
  stats_.steps_ahead_queued = ahead.queued;
  stats_.steps_ahead_taken = ahead.taken;
}

// Whether a waiting request could join the running sequence (a slot is free beside it): then the solo loop
// stops so that the next step batches them.
bool Scheduler::newcomer_can_join() const { return waiting_ > 0 && slots_.size() > 1; }

// Whether a waiting request will be admitted before the next step: one waits and a slot is free.
bool Scheduler::newcomer_can_take_a_slot() const {
  return waiting_ > 0 && std::any_of(slots_.begin(), slots_.end(), [](auto& slot) { return !slot->sequence; });
}

// Whether SLOT's sequence, decoding, ends with the id its next step draws, whatever that id is: its max_new_tokens
// or the context reached (accept()).
bool Scheduler::ends_after_next(const Slot& slot) const {
  const Sequence& s = *slot.sequence;
  const size_t tokens = s.result.tokens.size() + 1;
  return tokens >= s.options().max_new_tokens || s.prompt().size() + tokens > model_.context();
}

bool Scheduler::cancelling_all() const {
  std::lock_guard lock(mutex_);
  return stopping_ && !finish_on_stop_;
}

// A step whose sequences have nothing to report (log-probabilities, logit biases): the next id of each one that
// draws after it (decoding, or at its prompt's end) is picked on the GPU (the argmax, or drawn with its settings and
// penalties; a constrained one's among the ids its mask allows, which the host works out while the step's products
// run), and only the ids come back, not the logits. A row with nothing to draw yet (a prompt's earlier chunk, a
// preempted sequence fed again) picks an argmax that is dropped. QUEUE_AHEAD: the next step of the same rows may be
// queued before this one's ids are read (graph::Model::forward_batch_pick). Returns false, doing nothing, where that
// does not apply.
bool Scheduler::pick_on_gpu(const std::vector<Slot*>& owners, std::span<const graph::Segment> segments,
                            bool queue_ahead) {
  if (!model_.can_pick_in_batch()) return false;
  std::vector<bool> drawing(owners.size());
  std::vector<graph::Model::GpuSampling> settings(owners.size(), graph::Model::GpuSampling{.top_k = 1});
  bool constrained = false;
  for (size_t i = 0; i < owners.size(); ++i) {
    const Sequence& s = *owners[i]->sequence;
    drawing[i] = s.draws_after(segments[i].tokens.size());
    if (!drawing[i]) continue;
    settings[i] = s.gpu_sampling();
    if (s.draws_on_host() || !(settings[i].argmax() || model_.sampling_on_gpu(settings[i]))) return false;
    constrained = constrained || s.request.constraint;
  }
  // A mask that fails (a constraint that allows no id) ends its own sequence after the step, not the batch.
  std::vector<graph::Model::TokenMask> masks;
  std::vector<std::string> mask_errors(owners.size());
  for (size_t i = 0; constrained && i < owners.size(); ++i) {
    Sequence& s = *owners[i]->sequence;
    if (!drawing[i] || !s.request.constraint) {
      masks.emplace_back();
      continue;
    }
    masks.emplace_back([this, &s, &error = mask_errors[i]](std::span<uint32_t> bits) {
      try {
        fill_mask(s, bits);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
  }
  std::vector<uint32_t> picked;
  try {
    for (size_t i = 0; i < owners.size(); ++i) {
      Sequence& s = *owners[i]->sequence;
      model_.set_sampling(owners[i]->index, settings[i]);
      if (settings[i].penalized() && !s.counts_on_gpu) {
        model_.write_token_counts(owners[i]->index, s.seen());
        s.counts_on_gpu = true;
      }
    }
    picked = model_.forward_batch_pick(segments, masks, queue_ahead);
  } catch (const std::exception& e) {
    for (Slot* slot : owners) finish(*slot, FinishReason::Cancelled, e.what());
    return true;
  }
  for (size_t i = 0; i < owners.size(); ++i) {
    Slot& slot = *owners[i];
    if (!took_step(slot, segments[i].tokens)) continue;
    if (!mask_errors[i].empty()) {
      abandon(slot, mask_errors[i]);
      continue;
    }
    if (picked[i] == kernels::kNoToken) {
      finish(slot, FinishReason::Cancelled,
             fmt::format("decoding: every logit at position {} is NaN (NaN in the model's weights or activations)",
                         model_.position(slot.index) - 1));
      continue;
    }
    try {
      if (slot.sequence->request.constraint) slot.sequence->request.constraint->accept(int32_t(picked[i]));
      if (accept(slot, int32_t(picked[i]))) deliver(*slot.sequence);
    } catch (const std::exception& e) {
      abandon(slot, e.what());
    }
  }
  return true;
}

// Sets BITS (a bit per id of the model's token_count(), all clear) to the ids S's constraint allows next; throws
// where it allows none.
void Scheduler::fill_mask(Sequence& s, std::span<uint32_t> bits) const {
  const size_t ids = model_.token_count();
  std::fill(bits.begin(), bits.end(), ~0u);
  if (ids % 32 != 0) bits.back() = (1u << ids % 32) - 1;
  s.request.constraint->mask_bits(bits, ids);
  if (std::all_of(bits.begin(), bits.end(), [](uint32_t word) { return word == 0; }))
    no_token_allowed(s.result.tokens.size());
}

// A sequence decoding alone, with no request able to join it and no log-probabilities or logit biases: its tokens
// are picked on the GPU and the steps queued back to back (graph::Model::decode_greedy / decode_sampled), until it
// ends or a request arrives that a free slot can take (then it stops, and the next step batches it with the
// newcomer). A constraint goes to the GPU as each step's mask of allowed ids (the logits stay there; each pick waits
// for the host's mask, which the host works out while the step's products run). Returns false, doing nothing,
// where the GPU cannot pick with the sequence's settings.
bool Scheduler::decode_solo_on_gpu(Slot& slot) {
  Sequence& s = *slot.sequence;
  if (s.request.logprobs || !s.request.logit_bias.empty()) return false;
  const graph::Model::GpuSampling on_gpu = s.gpu_sampling();
  if (!on_gpu.argmax() && !model_.sampling_on_gpu(on_gpu)) return false;
  int32_t first = *s.next;
  uint32_t steps = s.options().max_new_tokens - uint32_t(s.result.tokens.size());
  // As many steps as the free blocks hold (each step feeds a token); where none, an idle slot's cache gives one
  // up; alone, a sequence that still gets none can never go on.
  uint32_t position = model_.position(slot.index);
  if (tokens_within(slot, model_.kv_blocks().free) <= position) reclaim_blocks(1);
  steps = uint32_t(std::min<uint64_t>(steps, tokens_within(slot, model_.kv_blocks().free) - position));
  if (steps == 0) {
    unblock();
    return true;
  }
  graph::Model::TokenMask mask;
  if (s.request.constraint) mask = [&](std::span<uint32_t> bits) { fill_mask(s, bits); };
  auto on_token = [&](int32_t id) {
    slot.cached.push_back(*s.next);  // the step that drew `id` fed the previous id
    if (s.request.constraint) s.request.constraint->accept(id);
    if (!accept(slot, id)) return false;  // finished: `s` is gone
    deliver(s);
    return !s.cancelled && !newcomer_can_join() && !cancelling_all();
  };
  s.counts_on_gpu = false;
  try {
    if (on_gpu.argmax())
      model_.decode_greedy(first, steps, on_token, slot.index, mask);
    else
      model_.decode_sampled(first, steps, on_gpu, s.seen(), on_token, slot.index, mask);
  } catch (const std::exception& e) {
    slot.cached.resize(std::min(slot.cached.size(), size_t(model_.position(slot.index))));
    abandon(slot, e.what());
    return true;
  }
  if (slot.sequence) slot.cached.resize(model_.position(slot.index));
  return true;
}

// Draws the next id of the slot's sequence from LOGITS (its last position's row; used as scratch): the ids its
// constraint rules out are masked, and the sampler never draws past the tokenizer's vocabulary.
void Scheduler::draw(Slot& slot, std::span<float> logits) {
  Sequence& s = *slot.sequence;
  std::optional<std::vector<float>> raw;
  if (s.request.logprobs) raw.emplace(logits.begin(), logits.begin() + model_.token_count());
  for (auto [id, bias] : s.request.logit_bias) logits[size_t(id)] += bias;
  if (s.request.constraint) apply_constraint(*s.request.constraint, logits, s.result.tokens.size());
  // The position of the token fed (the step has moved past it), as the GPU sampler hashes it.
  int32_t id = s.sampler.sample(logits, s.seen(), model_.position(slot.index) - 1);
  s.counts_on_gpu = false;
  {
    std::lock_guard lock(mutex_);
    ++stats_.host_draws;
  }
  std::optional<StepLogprobs> logprobs;
  if (raw) logprobs = logprobs_of(*raw, id, s.request.top_logprobs);
  if (s.request.constraint) s.request.constraint->accept(id);
  if (accept(slot, id, std::move(logprobs))) deliver(s);  // else finished, and `s` is gone
}

// Takes one drawn id (and its log-probabilities, where asked); returns whether the sequence goes on (else it is
// finished and its slot free).
bool Scheduler::accept(Slot& slot, int32_t id, std::optional<StepLogprobs> logprobs) {
  Sequence& s = *slot.sequence;
  const GenerateOptions& o = s.options();
  if (s.result.tokens.empty()) s.result.stats.time_to_first_token = seconds_since(s.start);
  s.history.push_back(id);
  s.next.reset();
  if (!o.ignore_eos && std::find(s.stop_ids.begin(), s.stop_ids.end(), id) != s.stop_ids.end()) {
    finish(slot, FinishReason::EndOfSequence);
    return false;
  }
  // An end-of-sequence id is not part of the answer, nor are its log-probabilities: one entry per id delivered.
  s.result.tokens.push_back(id);
  s.pending.ids.push_back(id);
  if (logprobs) s.pending.logprobs.push_back(std::move(*logprobs));
  if (s.decoder) {
    bool hit = false;
    std::string piece = s.filter.add(s.decoder->step(id), hit);
    s.result.text += piece;
    s.pending.text += piece;
    if (hit) {
      finish(slot, FinishReason::StopString);
      return false;
    }
  }
  if (s.cancelled) {
    finish(slot, FinishReason::Cancelled);
    return false;
  }
  if (s.result.tokens.size() >= o.max_new_tokens) {
    finish(slot, FinishReason::MaxTokens);
    return false;
  }
  // The newest token is fed at position prompt + tokens - 1: it needs a free cache slot.
  if (s.prompt().size() + s.result.tokens.size() > model_.context()) {
    finish(slot, FinishReason::ContextFull);
    return false;
  }
  s.next = id;
  return true;
}

// Hands the sequence's pending event to its callback; a callback that returns false or throws cancels it.
void Scheduler::deliver(Sequence& s) {
  if (s.pending.text.empty() && s.pending.ids.empty() && !s.pending.done) return;
  SequenceEvent event = std::move(s.pending);
  s.pending = {};
  bool going = false;
  try {
    going = s.on_event(event);
  } catch (...) {
  }
  if (!going) s.cancelled = true;
}

void Scheduler::finish(Slot& slot, FinishReason reason, std::string error) {
  std::unique_ptr<Sequence> sequence;
  {
    std::lock_guard lock(mutex_);
    sequence = std::move(slot.sequence);
    slot.cached.resize(std::min(slot.cached.size(), size_t(model_.position(slot.index))));
    if (!error.empty()) {
      // The step failed: what the cache holds for this slot is no longer trusted.
      model_.reset(slot.index);
      slot.cached.clear();
    }
  }
  Sequence& s = *sequence;
  if (s.decoder && (reason == FinishReason::EndOfSequence || reason == FinishReason::MaxTokens ||
                    reason == FinishReason::ContextFull)) {
    bool hit = false;
    std::string tail = s.filter.add(s.decoder->finish(), hit);
    if (!hit) tail += s.filter.flush();
    if (hit) reason = FinishReason::StopString;
    s.result.text += tail;
    s.pending.text += tail;
  }
  s.result.finish = reason;
  s.result.stats.generated_tokens = s.result.tokens.size();
  if (s.decode_start != Clock::time_point{}) s.result.stats.decode_seconds = seconds_since(s.decode_start);
  s.pending.done = true;
  s.pending.result = s.result;
  s.pending.error = std::move(error);
  {
    std::lock_guard lock(mutex_);
    ++(s.pending.error.empty() ? (reason == FinishReason::Cancelled ? stats_.cancelled : stats_.finished) : stats_.failed);
    stats_.prompt_tokens += s.prompt().size();
    stats_.cached_tokens += s.prompt().size() - s.result.stats.prefilled_tokens;
    stats_.generated_tokens += s.result.tokens.size();
  }
  deliver(s);
}

// An exception while taking the sequence's id (from its stream decoder, say) ends it with that error; it may
// have been thrown after the sequence finished.
void Scheduler::abandon(Slot& slot, const std::string& error) {
  if (slot.sequence) finish(slot, FinishReason::Cancelled, error);
}

void Scheduler::finish_unstarted(std::unique_ptr<Sequence> sequence) {
  sequence->result.finish = FinishReason::Cancelled;
  sequence->pending.done = true;
  sequence->pending.result = sequence->result;
  {
    std::lock_guard lock(mutex_);
    ++stats_.cancelled;
  }
  deliver(*sequence);
}

Generation Scheduler::run(SequenceRequest request, const TextCallback& on_text, const std::atomic<bool>* cancel) {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  Generation result;
  std::string error;
  std::exception_ptr thrown;  // from ON_TEXT: rethrown here, on the caller's thread
  uint64_t id = submit(std::move(request), [&](const SequenceEvent& event) {
    bool going = true;
    if (on_text && !event.text.empty()) {
      try {
        going = on_text(event.text, event.ids.empty() ? -1 : event.ids.back());
      } catch (...) {
        thrown = std::current_exception();
        going = false;
      }
    }
    going = going && !(cancel && cancel->load());  // read after ON_TEXT, which may have set it
    if (event.done) {
      std::lock_guard lock(mutex);
      result = event.result;
      error = event.error;
      done = true;
      finished.notify_all();
    }
    return going;
  });
  std::unique_lock lock(mutex);
  while (!finished.wait_for(lock, std::chrono::milliseconds(20), [&] { return done; }))
    if (cancel && cancel->load()) this->cancel(id);
  if (thrown) std::rethrow_exception(thrown);
  if (!error.empty()) fail("{}", error);
  return result;
}

}  // namespace gerbil
