// A model on the GPU: weights, a KV cache sized to the context, activation buffers allocated once, and
// the forward graph of one step — the dispatches of a prefill of T tokens, or of a decode step (T = 1) —
// built by one decoder-block builder from the architecture's description (model/architecture.h).
//
// A step is recorded into one command buffer; consecutive dispatches share one compute pass. Graphs are
// built once per step shape and reused: between steps only the token ids and the position-dependent
// uniforms (position offset, key count) are rewritten, so a decode step allocates nothing.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpu/profiler.h"
#include "graph/gpu_weights.h"
#include "graph/seen_tokens.h"
#include "kernels/dispatch.h"
#include "kernels/model.h"
#include "model/weights.h"

namespace gerbil::graph {

// Whether a decode step's products that write the residual stream also write x * the weight of the RMSNorm
// the next product applies (its "prepared" input; see linear_matvec_sg.wgsl's NORM_OUT): where the measured
// rule says it pays (Auto), or always / never (tests, tuning on other GPUs).
enum class PreparedNorms { Auto, Always, Never };

// The KV cache's element type (kernels::KvType). Auto: f16 for f16, bf16, GPTQ, AWQ and GGUF checkpoints, f32 for
// float32 ones and odd head dims (model.cpp's resolve_kv_cache); F16 halves the cache's memory, keys and values
// rounded to f16; Q8 stores about a quarter of f32's bytes (int8 with an f32 scale per token and kv head,
// kernels::KvType::Q8), each value within half its row's absmax / 127, and needs head_dim a multiple of 4.
enum class KvCache { Auto, F32, F16, Q8 };

struct ModelOptions {
  // The most tokens one slot may hold. 0: the model's max_position_embeddings as far as the GPU's memory allows
  // (default_kv_cache_size, Model::allocate_within_memory).
  uint32_t context = 0;
  uint32_t slots = 1;         // sequences the KV-cache pool serves at once, each up to `context` tokens
  // Tokens the KV-cache pool holds in all, shared by the slots in blocks of kernels::kKvBlockTokens (rounded up to
  // whole blocks): a short sequence takes few blocks, leaving the rest to long ones. 0: a context's blocks per slot.
  uint32_t kv_tokens = 0;
  uint32_t max_chunk = 2048;  // rows of one step: prompt tokens per prefill step, or a batch's tokens in all
  // Ids at or above this are never picked on the GPU: the tokenizer's vocabulary where the model's logits are
  // padded past it (Qwen2.5: 151,665 ids, 151,936 logits). 0: every logit.
  uint32_t token_count = 0;
  WeightPolicy weights = WeightPolicy::Checkpoint;
  PreparedNorms prepared_norms = PreparedNorms::Auto;
  // Prompt products (kernels::Arithmetic): F16 needs shader-f16 and rounds to f16; decoding is f32 either way.
  kernels::Arithmetic arithmetic = kernels::Arithmetic::F32;
  KvCache kv_cache = KvCache::Auto;
  LoadProgress progress;      // optional: told how far the weight upload has come
  // Create at load every pipeline the decode steps and prompt steps of each length will use (compiled side by
  // side; see Model::create_pipelines), so the first request compiles nothing. Off: each is created when a step
  // first needs it (the tests, which build few steps on a slow CPU adapter).
  bool pipelines_at_load = false;
};

// The context a model gets when ModelOptions leave it open, before the GPU's memory is tried.
constexpr uint32_t kFallbackContext = 4096;  // for configs that do not give max_position_embeddings
constexpr uint32_t kMinSizedContext = 512;   // a default context is halved for memory no further than this

struct KvCacheSize {
  uint32_t context;
  bool sized_to_device;  // left open by the options: it may shrink to fit the GPU's memory
};

// What a model's context starts at: ModelOptions::context where given; else the model's max_positions
// (kFallbackContext when 0), cut to what fits one storage binding of max_binding bytes per layer's K pool for
// every slot, whose KV blocks take block_bytes and block_elements u32 elements each.
KvCacheSize default_kv_cache_size(const ModelOptions& options, uint64_t max_positions, uint64_t block_bytes,
                                  uint64_t block_elements, uint64_t max_binding);

// Where a model's load went (Model's constructor), for `bench model`.
struct LoadStats {
  double weights_seconds = 0;    // reading, converting and uploading the weights
  double pipelines_seconds = 0;  // tracing steps and creating their pipelines (ModelOptions::pipelines_at_load)
  double warm_up_seconds = 0;    // the first prompt and decode steps, run at load until the GPU is up to speed
                                 // (Model::warm_up)
  size_t traced_steps = 0;       // step graphs traced for their pipelines
  size_t pipelines = 0;          // pipelines created at load
};

// The KV cache's blocks (Model::kv_blocks()): each holds kernels::kKvBlockTokens tokens of every layer.
struct KvBlockCount {
  uint32_t free = 0, total = 0;
};

// One sequence's part of a batched step: TOKENS fed to the KV-cache slot SLOT at its current position.
struct Segment {
  uint32_t slot = 0;
  std::span<const int32_t> tokens;
};

// One entry of a step's graph, for `gerbil graph`.
struct StepEntry {
  std::string label;   // "layer 3 qkv"
  std::string kernel;  // "linear", or "copy"
  std::string shapes;
  gpu::Grid grid;
};

class Model {
 public:
  Model(gpu::Device& device, const ModelFiles& files, const ModelOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  uint32_t context() const { return context_; }  // tokens one slot holds
  uint32_t slots() const { return uint32_t(positions_.size()); }
  uint32_t max_chunk() const { return chunk_; }   // rows one step can hold
  uint32_t token_count() const { return token_count_; }
  uint32_t position(uint32_t slot = 0) const { return positions_.at(slot); }  // tokens in the slot's KV cache
  uint64_t weight_bytes() const { return weights_.bytes; }
  uint64_t kv_cache_bytes() const;  // the whole pool's, every layer's K and V

  // The KV cache is a pool of blocks (kernels::KvBlocks) that slots take as their positions grow, before the step
  // that needs them, and give back when rewound or reset. A step whose slots need more blocks than are free
  // throws, changing nothing, naming the slot.
  uint32_t kv_block_tokens() const { return kernels::kKvBlockTokens; }
  KvBlockCount kv_blocks() const { return {uint32_t(free_blocks_.size()), total_blocks_}; }
  // The step graphs recorded so far (one per new batch shape: prompts of new lengths, new batch compositions) and
  // the host's seconds spent recording them.
  struct GraphsRecorded {
    uint64_t count = 0;
    double seconds = 0;
  };
  GraphsRecorded graphs_recorded() const { return graphs_recorded_; }
  // forward_batch_pick()'s steps queued ahead of the host, and how many of them the next call took (the rest were
  // discarded: the batch changed, or an id ended a sequence).
  struct StepsAhead {
    uint64_t queued = 0;
    uint64_t taken = 0;
  };
  StepsAhead steps_ahead() const { return steps_ahead_; }
  uint32_t kv_blocks_held(uint32_t slot) const { return uint32_t(slot_blocks_.at(slot).size()); }
  // The blocks `slot` must still take to hold `tokens` tokens in all (0 when it holds them).
  uint32_t kv_blocks_needed(uint32_t slot, uint64_t tokens) const;
  kernels::KvType kv_type() const { return kv_type_; }
  const LoadStats& load_stats() const { return load_stats_; }  // the cache's element type, ModelOptions::kv_cache resolved

  void reset(uint32_t slot = 0) { rewind(0, slot); }
  // Rewinds the slot's cache to `position` tokens (keeps what came before; e.g. a shared chat prefix) and gives
  // back the blocks past it.
  void rewind(uint32_t position, uint32_t slot = 0);

  // Runs `tokens` at positions position()..position()+n-1 (prompt chunks of at most max_chunk) and returns
  // the logits [rows, vocab] of every token (all_logits) or of the last one. Throws, changing nothing,
  // if a token id is out of range or the tokens do not fit in the context.
  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits = false, uint32_t slot = 0);

  // One step over several slots at once (continuous batching): the products read each weight once for all
  // rows; each segment attends over its own slot's cache. Returns the logits of each segment's last token,
  // [segments, vocab] in segment order. The rows in all must fit max_chunk(), each slot at most once, every
  // segment non-empty and within its slot's context; throws, changing nothing, otherwise. Where the model
  // cannot batch (can_batch()), the segments run one after another with the same result.
  std::vector<float> forward_batch(std::span<const Segment> segments);
  // Whether forward_batch() runs its segments as one step: the per-segment views of the activation rows must
  // sit at offsets the adapter can bind.
  bool can_batch() const { return batchable_; }
  // forward_batch() with each segment's next id (from its last token's logits) picked on the GPU (ids past
  // token_count() never; kernels::kNoToken where every logit is NaN) instead of its logits read back: drawn with
  // its slot's settings (set_sampling(); argmax for all when every one is top-k 1 without penalties, the
  // default), all rows in one chain of sampler dispatches, at the position of the segment's last token. A slot
  // with penalties counts its tokens on the GPU: write_token_counts() before its first draw there, and again
  // after any id drawn elsewhere (the host); each draw with penalties on the GPU counts its own. Only where can_pick_in_batch().
  // Pipelined where every segment is one token: before waiting for this step's ids, the next step of the same
  // slots is queued, fed those ids on the GPU; a next call with the same slots and the ids returned here takes it
  // instead of running a step, so the GPU never waits for the host between such calls. A call for some of those
  // slots (the others' sequences ended or wait) takes it too, dropping the others' picks (such a row draws the
  // argmax, which counts no id, where its picks were not queued yet). Any other call discards it (its cache rows
  // lie past the slots' positions, rewritten by the next real step). Only its products are
  // queued where a row has penalties or a mask (a pick must not count an id that may be discarded, and a mask
  // depends on this step's ids): the next call then submits just its picks.
  // With MASKS (one per segment; an empty one allows every id), each row picks only among the ids its mask allows
  // (filled as decode_greedy()'s below), called once the step's products are submitted, the rows' on several
  // threads at once.
  // QUEUE_AHEAD false: none is queued (the caller knows the next step will differ: a prompt joins, or a sequence
  // ends with this id).
  using TokenMask = std::function<void(std::span<uint32_t> allowed)>;
  std::vector<uint32_t> forward_batch_pick(std::span<const Segment> segments, std::span<const TokenMask> masks = {},
                                           bool queue_ahead = true);
  // Whether forward_batch_pick() has queued the step of SEGMENTS (their slots, each fed the id it returned for it;
  // it may also hold rows of sequences that ended or wait since, whose picks are dropped) with the picks a call
  // with them, with masks where MASKED, makes (the slots' sampling settings as they are): such a call takes it, any
  // other discards it.
  bool step_ahead_for(std::span<const Segment> segments, bool masked) const;
  // Every model that batches: one argmax reads all rows' logits through one binding, whatever the vocabulary.
  bool can_pick_in_batch() const { return batchable_; }

  // Greedy decoding with the token kept on the GPU: `first` is fed at the current position, and each step's
  // argmax (computed on the GPU) becomes the next step's input, so steps are submitted back to back
  // without waiting for the host. Ids come back through a ring of read-back buffers a few steps behind;
  // `on_token` sees every produced id in order and returns false to stop. At most `max_steps` steps run
  // (and never past the context). Steps already in flight after a stop are discarded: the cache ends up
  // holding `first` and the ids before the last one `on_token` saw. Returns the number of ids produced.
  // Throws, naming the position, when a step's logits are all NaN (the cache keeps the tokens before it).
  // With a `mask`, each step picks only among the ids it allows: before every step it fills its argument, a bit
  // per id of token_count() (bit i % 32 of word i / 32; set: allowed; the words start cleared), and the step waits
  // for the id before it (a constraint's mask depends on it), so masked steps are not queued ahead.
  uint32_t decode_greedy(int32_t first, uint32_t max_steps, const std::function<bool(int32_t)>& on_token,
                         uint32_t slot = 0, const TokenMask& mask = {});

  // decode_greedy() with each token drawn on the GPU (kernels::sample: repetition / presence / frequency
  // penalties over the tokens in `seen` (those before this call, `first` included) and the ones drawn since,
  // then temperature, top-k (any k, or off), top-p and min-p) instead of the
  // argmax: the draw at position p hashes (seed, p), so the same seed gives the same tokens. Throws naming
  // the setting when the GPU cannot sample with it (sampling_on_gpu() says which can).
  struct GpuSampling {
    float temperature = 1.0f;
    uint32_t top_k = 0;
    float top_p = 1.0f, min_p = 0.0f;
    uint64_t seed = 0;
    float repetition_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
    bool penalized() const { return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f; }
    // The best id, whatever the other settings: an argmax needs no sampler.
    bool argmax() const { return top_k == 1 && !penalized(); }
  };
  uint32_t decode_sampled(int32_t first, uint32_t max_steps, const GpuSampling& sampling, const SeenTokens& seen,
                          const std::function<bool(int32_t)>& on_token, uint32_t slot = 0,
                          const TokenMask& mask = {});
  // The settings SLOT's draws on the GPU take from now on (decode_sampled() sets its own; forward_batch_pick()
  // draws each slot's id with them; every slot starts with top-k 1, the argmax). Throws where sampling_on_gpu()
  // does not hold, but for top-k 1 without penalties (the argmax, whatever the rest).
  void set_sampling(uint32_t slot, const GpuSampling& sampling);
  // Sets the GPU's token counts of SLOT, which its penalties read, to the tokens in SEEN (the prompt's marked as
  // such, the generated ones counted); every draw on the GPU then adds its own. decode_sampled() writes them
  // itself; forward_batch_pick() takes them as they are. A step queued ahead stays: its picks were queued only where
  // none reads or counts ids (no penalties), else they are recorded after this write.
  void write_token_counts(uint32_t slot, const SeenTokens& seen);
  // Whether the GPU can sample with these settings: a vocabulary of at most kMaxSampleCount, a positive
  // temperature whose inverse is finite. (decode_sampled() also
  // rejects a top_p outside (0, 1] or a min_p outside [0, 1], which no sampler takes.)
  bool sampling_on_gpu(const GpuSampling& sampling) const;

  // The dispatches of one step over `tokens` tokens (T = 1: a decode step) at the current position (a
  // decode step's attention kernels depend on how many keys the cache holds).
  std::vector<StepEntry> describe(uint32_t tokens, bool all_logits = false);

  // Runs one step over `tokens` tokens (T = 1: a greedy decode step) at the current position with every
  // dispatch in its own timed pass, and returns one timing per dispatch, labelled "LABEL|KERNEL". The
  // position does not move (the step's cache rows are rewritten by the next real step). Precise only on
  // a device created with gpu::request_precise_timestamps(); without timestamp-query, timed on the host.
  std::vector<gpu::Timing> profile(uint32_t tokens);
  // profile() of a decode step that draws its token on the GPU with `sampling` (decode_sampled()'s step; the
  // token counts the penalties read are left as they are).
  std::vector<gpu::Timing> profile_sampled(const GpuSampling& sampling);
  // profile() of the greedy step forward_batch_pick() runs for `sequences` sequences of one token each, in
  // slots 0..sequences-1 at their current positions (the step the batched decode loop repeats). Throws where
  // a slot is missing or full, or where the model cannot batch (can_batch()).
  std::vector<gpu::Timing> profile_batch(uint32_t sequences);

  // Creates every pipeline that decode steps (greedy, sampled, logits; batched where the model batches) and
  // prompt steps of `prompt_lengths` tokens (empty: every length up to max_chunk()) use, in parallel; returns how
  // many were new. The steps' graphs are only traced for their pipelines, not kept.
  size_t create_pipelines(std::span<const uint32_t> prompt_lengths = {});

  struct Buffers;  // activations, KV cache, rotary tables (defined in model.cpp)
  struct Step;     // one step's recorded graph (defined in model.cpp)

 private:
  void allocate_within_memory();  // picks the context (see ModelOptions::context) and allocates for it
  void allocate(uint32_t context);  // the KV-cache pool, block tables and step buffers for `context` tokens a slot
  void keep_room_for_steps() const;
  void warm_up();  // runs a short prompt and a decode step in slot 0 (on a GPU, until its clock is up), then empties it
  // The most step graphs (steps_) kept at once: prompts of many lengths and batches of many compositions.
  size_t max_kept_steps() const { return 8 + 2 * size_t(slots()); }
  enum class Output { LastLogits, AllLogits, GreedyToken, SampledToken, MaskedGreedyToken, MaskedSampledToken };
  // A step's shape: (slot, tokens) per segment, and what it outputs.
  using StepKey = std::pair<std::vector<std::pair<uint32_t, uint32_t>>, Output>;
  Step& step(const std::vector<std::pair<uint32_t, uint32_t>>& shape, Output output);
  Step& step(uint32_t tokens, Output output, uint32_t slot) { return step({{slot, tokens}}, output); }
  void build(Step& step, Output output);  // records the graph of `step`'s segments ending with `output`
  // The shared loop of decode_greedy() and decode_sampled(): steps with `output` (a token output) queued
  // back to back, ids read back a few steps behind.
  uint32_t decode_on_gpu(Output output, int32_t first, uint32_t max_steps, const std::function<bool(int32_t)>& on_token,
                         uint32_t slot, const TokenMask& mask);
  // Writes the segments' ids and records and submits their step with OUTPUT (positions are not advanced); with
  // PRODUCTS_ONLY, only its entries before the pick (Step::pick).
  Step& submit_step(std::span<const Segment> segments, Output output, bool products_only = false);
  // Writes Buffers::token_mask: row i's words from MASKS[i] (forward_batch_pick()).
  void write_masks(std::span<const TokenMask> masks);
  // Runs one step over SEGMENTS (already checked) and advances their slots; returns the logits rows.
  std::vector<float> run_step(std::span<const Segment> segments, bool all_logits);
  void check_segment(const Segment& segment) const;
  // Gives each (slot, tokens) the blocks it needs to hold `tokens` tokens in all, writing their table entries;
  // throws, taking none, when they are more than the free ones.
  void reserve_blocks(std::span<const std::pair<uint32_t, uint64_t>> needs);
  // Whether reserve_blocks(needs) would succeed.
  bool blocks_available(std::span<const std::pair<uint32_t, uint64_t>> needs) const;
  void check_batch(std::span<const Segment> segments) const;
  // Writes the row table of a step with Step::row_kernels for the slots' current positions.
  void write_row_table(const Step& s);
  // forward_batch_pick()'s step queued ahead: its slots, the ids it was fed (the picks returned last; kNoFed for a
  // slot rewound since), whether its picks were queued too (only where none counts an id for penalties) and then
  // their read-back.
  static constexpr int32_t kNoFed = -1;
  struct Speculation {
    std::vector<uint32_t> slots;
    std::vector<int32_t> fed;
    Output output;
    bool picks = false;
    gpu::Device::PendingMap read;
  };
  // The settings of a slot that draws the argmax: top-k 1, no penalties.
  kernels::SampleParams argmax_sampling() const {
    return {.count = token_count_, .slot = 0, .top_k = 1, .position = 0};
  }
  // Queues a batched step with OUTPUT (a token pick) of SEGMENTS' slots whose ids are the last step's picks (ids,
  // on the GPU), at the slots' current positions, into speculation_ (its `fed` set once the host has read those
  // picks): with PICKS the whole step, else its products only; nothing where a slot's context is full. Segment i's
  // id is the last step's row i, or PICK_ROWS[i] where given (that step was queued ahead with more rows).
  void speculate(std::span<const Segment> segments, Output output, bool picks, std::span<const size_t> pick_rows);
  // How forward_batch_pick() picks the ids of SEGMENTS, with masks where MASKED, at their slots' sampling settings.
  Output pick_output(std::span<const Segment> segments, bool masked) const;
  // Whether a step whose picks are AHEAD gives the ids of one whose picks are WANTED: the same, or sampled where the
  // argmax is wanted (the sampler draws each row by its own settings, and a row of argmax settings draws the argmax).
  static bool picks_serve(Output ahead, Output wanted);
  // For each of SEGMENTS, the row of the step queued ahead that is its step (step_ahead_for()); none where there is
  // no such step.
  std::optional<std::vector<size_t>> rows_ahead(std::span<const Segment> segments) const;
  // Waits for the step queued ahead, if any, and forgets it.
  void discard_speculation() noexcept;
  // Records a copy of the batch's picks into the read-back buffer `ring` and submits it; returns the read.
  gpu::Device::PendingMap read_picks_async(gpu::Recorder& recorder, uint32_t count, uint32_t ring);
  // Sets the step's position uniforms and records it; with a timer, every dispatch in its own timed pass.
  // Entries [begin, end) only: a masked decode step's products and its pick (Step::pick on) go in separate
  // submissions.
  void record(Step& step, gpu::Recorder& recorder, gpu::GpuTimer* timer = nullptr, size_t begin = 0,
              size_t end = SIZE_MAX);
  // Records and runs `step` with every dispatch in its own timed pass; returns the timings (profile()).
  std::vector<gpu::Timing> time_step(Step& step);

  gpu::Device& device_;
  ModelConfig config_;
  ModelOptions options_;
  uint32_t context_ = 0;
  kernels::KvType kv_type_ = kernels::KvType::F32;
  uint32_t chunk_ = 0;
  uint32_t token_count_ = 0;
  bool batchable_ = false;
  bool row_kernels_ = false;  // batched steps run the row-table kernels (kernels/batched.h)
  std::vector<uint32_t> positions_;  // tokens in each slot's cache
  uint32_t total_blocks_ = 0;
  uint32_t table_stride_ = 0;                     // block-table entries per slot (Buffers::kv_tables)
  std::vector<uint32_t> free_blocks_;             // taken from the back
  std::vector<std::vector<uint32_t>> slot_blocks_;  // each slot's blocks, in token order (its block table)
  GpuWeights weights_;
  std::unique_ptr<Buffers> buffers_;
  std::map<StepKey, std::unique_ptr<Step>> steps_;
  GraphsRecorded graphs_recorded_;
  StepsAhead steps_ahead_;
  // Each slot's settings for draws on the GPU (set_sampling()), which sampled steps' uniforms follow.
  std::vector<kernels::SampleParams> slot_sampling_;
  std::optional<Speculation> speculation_;
  uint32_t picks_ring_ = 0;  // the batch_picks read-back buffer the next read uses
  LoadStats load_stats_;
};

}  // namespace gerbil::graph
