#include "graph/model.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "gerbil/error.h"
#include "graph/parallel.h"
#include "kernels/batched.h"
#include "kernels/model.h"
#include "kernels/seed.h"
#include "kernels/tuning.h"
#include "kernels/vector.h"

namespace gerbil::graph {
namespace {

using kernels::BufferBinding;
using kernels::Dispatch;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

template <typename Params>
std::span<const std::byte> bytes_of(const Params& params) {
  return std::as_bytes(std::span<const Params>(&params, 1));
}

}  // namespace

// Activation buffers (sized for the largest chunk), the KV cache and rotary tables: allocated once.
struct Model::Buffers {
  gpu::Buffer ids;
  gpu::Buffer residual[2];  // the residual stream, ping-ponged: a kernel never reads and writes one buffer
  gpu::Buffer normed, qkv, q, attn, branch, branch_normed, up, act, last, logits;
  std::vector<gpu::Buffer> k_cache, v_cache;  // per layer: pools of `kv_blocks` blocks
  kernels::KvType kv = kernels::KvType::F32;  // their element type
  uint32_t kv_blocks = 0;
  gpu::Buffer kv_tables;     // each slot's block table (u32 block ids), table_stride entries apart
  uint32_t table_stride = 0;
  std::vector<gpu::Buffer> rope_table;  // per layer kind: [0] full attention, [1] sliding
  gpu::Buffer unused;                 // bound where a kernel's optional input is switched off
  gpu::Buffer attention_scratch;      // split-KV attention's partial results (decode steps), shared by layers
  gpu::Buffer split_scratch;          // partial sums of prompt projections split along K, shared by layers
  uint32_t logit_rows = 0;            // rows `logits` holds
  gpu::Buffer batch_tokens;           // the GPU-picked token of each sequence of a step that picks them
  gpu::Buffer argmax_partials;        // the GPU argmax's per-chunk winners
  gpu::Buffer sample_candidates;      // the GPU sampler's scratch, a share per slot
  gpu::Buffer token_counts;           // the GPU sampler's count of each token seen (for the penalties), per slot
  gpu::Buffer sample_rows;            // the GPU sampler's settings of each row of a step (kernels::SampleParams)
  // What sample_rows holds: every step graph that samples writes it before it runs, only where it holds other
  // settings (another graph may have written it since this one last did).
  mutable std::vector<kernels::SampleParams> sample_rows_written;
  gpu::Buffer token_mask;             // the ids a masked pick may take, a bit each (kernels::mask_tokens)
  std::vector<gpu::Buffer> token_ring;  // read-back buffers for tokens sampled on the GPU
  gpu::Buffer row_table;              // a batched step's kernels::RowEntry per row (Model::write_row_table())
  gpu::Buffer batch_picks[2];         // read-back buffers of batch_tokens: a step's, and the one queued ahead
};

// One step's graph: the entries in recording order, and how to re-point them at a new position.
struct Model::Step {
  struct Copy {
    const gpu::Buffer* source;
    uint64_t source_offset;
    const gpu::Buffer* destination;
    uint64_t destination_offset;
    uint64_t size;
  };
  struct Entry {
    std::string label;
    std::optional<Dispatch> dispatch;
    std::optional<Copy> copy;
    // When set, the entry is recorded only for steps it accepts, given their key count (cache position + tokens):
    // a graph may hold alternative kernels for short and long caches, and sampler levels that the settings of
    // the moment do not need.
    std::function<bool(uint32_t keys)> recorded_if;
    // When set, rewrites the dispatch's position-dependent uniform before each step that records it.
    std::function<void(uint32_t position)> at_position;
    uint32_t segment = 0;  // the segment whose slot's position `recorded_if` and `at_position` follow
  };
  std::vector<std::pair<uint32_t, uint32_t>> segments;  // (slot, tokens) of each sequence in the step
  uint32_t tokens = 0;                                  // rows in all
  // Whether the step's rotary / cache stores and its one-token segments' attention run as one dispatch each
  // over the row table (kernels/batched.h), rewritten before every run; else one dispatch per segment.
  bool row_kernels = false;
  uint32_t logit_rows = 0;
  std::deque<Entry> entries;  // a deque: entries stay put while the graph grows
  kernels::UniformArena uniforms;  // the entries' uniform structs
  // The first entry of the step's token pick (its mask, argmax or draw; entries.size() where it picks none): a
  // masked decode step submits the entries before it and its pick apart (Model::decode_on_gpu).
  size_t pick = 0;
};

namespace {

// Rows of all-position logits one step writes at most (`gerbil logits`, perplexity): 512 rows of a
// 151,936-token vocabulary are 311 MB, where all the step's other buffers for 2,048 rows of Qwen2.5-0.5B are
// 180 MB.
constexpr uint64_t kAllLogitsRows = 512;

// Blocks that hold `tokens` tokens.
uint64_t blocks_for(uint64_t tokens) { return (tokens + kernels::kKvBlockTokens - 1) / kernels::kKvBlockTokens; }
// Entries between two slots' block tables: the blocks of a context, rounded up to 256 bytes, the largest
// storage-binding offset alignment WebGPU allows, so every slot's table can be bound on its own.
uint32_t table_stride(uint32_t context) { return uint32_t((blocks_for(context) + 63) / 64 * 64); }

// ModelOptions::kv_cache. Auto follows the checkpoint's stored floats, which its embedding table shows: an f16
// cache for f16 and bf16 ones (GPTQ and AWQ included, their float tensors being f16) and for GGUF files of
// quantized blocks (as llama.cpp's default cache), whose keys and values are then rounded about as the weights
// already were; f32 for float32 ones, which keep their exact keys and values; f32 too for odd head dims, which an
// f16 cache cannot pair. On the H200 (2026-12-02, one call, tg128 f16 / f32 cache) the f16 cache is as fast at
// depth and halves the memory: llama3-8b 211.9 / 210.7 at depth 0, 167.2 / 161.4 at 8,192; qwen2.5-0.5b 761 / 755
// at 8,192 but 806 / 837 at 2,048 and 1,037 / 1,062 at 0 (its q|k|v projection, which stores the cache in column
// groups of two rotary pairs for f16, one for f32, profiled 13.8 against 13.1 us a layer).
kernels::KvType resolve_kv_cache(KvCache choice, const ModelFiles& files) {
  switch (choice) {
    case KvCache::F32: return kernels::KvType::F32;
    case KvCache::F16: return kernels::KvType::F16;
    case KvCache::Q8: return kernels::KvType::Q8;
    case KvCache::Auto: break;
  }
  const std::optional<TensorView>& embed = files.weights().get(Role::Embed).weight;
  bool stored_f32 = embed && !embed->block_type && embed->dtype == DType::F32;
  return !stored_f32 && files.config().head_dim % 2 == 0 ? kernels::KvType::F16 : kernels::KvType::F32;
}

// Builds one step's graph: the single decoder-block builder, driven by ArchitectureSpec + ModelConfig.
class StepBuilder {
 public:
  // POSITIONS: each slot's cache position, as the model keeps it (read when a step is recorded).
  StepBuilder(gpu::Device& device, const ModelConfig& config, const GpuWeights& weights,
              const Model::Buffers& buffers, uint32_t context, uint32_t token_count, const ModelOptions& options,
              const std::vector<uint32_t>& positions, Model::Step& step)
      : device_(device), config_(config), arch_(*config.arch), w_(weights), b_(buffers), context_(context),
        token_count_(token_count), options_(options), positions_(positions), step_(step), T_(step.tokens) {}

  // `greedy_token` / `sampling`: the step ends by picking the next input id on the GPU (the host need not see
  // the logits), by argmax or by drawing each segment's with its slot's settings in `sampling`; `masked`:
  // only among the ids whose bits the host set in Buffers::token_mask before the step (segment i's in its words
  // from i * token_mask_words(token_count) on).
  void build(bool all_logits, bool greedy_token, const std::vector<kernels::SampleParams>* sampling, bool masked) {
    all_logits_ = all_logits;
    embed();
    int current = 0;
    for (int l = 0; l < int(config_.num_layers); ++l) current = layer(l, current);
    logits(current);
    step_.pick = step_.entries.size();
    uint32_t vocab = token_count_;
    if (masked) {
      if (!(greedy_token || sampling)) fail("graph: a masked step must pick its ids");
      const uint32_t words = kernels::token_mask_words(vocab);
      for (uint32_t row = 0; row < step_.segments.size(); ++row)
        add("mask tokens", kernels::mask_tokens(device_, {&b_.logits}, {&b_.token_mask}, vocab,
                                                row * uint32_t(config_.vocab_size), row * words));
    }
    if (greedy_token && batched()) {
      // Every sequence's argmax in the same two dispatches: row i's id into batch_tokens[i], read back by the
      // host, and into ids[i], the input of segment i's row in the next step of the same slots (Model::speculate).
      auto stages = kernels::argmax(device_, {&b_.logits}, {&b_.ids}, {&b_.batch_tokens}, {&b_.argmax_partials},
                                    {vocab, 0, uint32_t(step_.segments.size()), uint32_t(config_.vocab_size)});
      add("argmax partials", std::move(stages[0]));
      add("argmax final", std::move(stages[1]));
    } else if (greedy_token) {
      // The pick goes to the next step's input and to batch_tokens[0], where forward_batch_pick() of one
      // segment reads it as a batch's.
      auto stages =
          kernels::argmax(device_, {&b_.logits}, {&b_.ids}, {&b_.batch_tokens}, {&b_.argmax_partials}, {vocab, 0});
      add("argmax partials", std::move(stages[0]));
      add("argmax final", std::move(stages[1]));
    }
    if (sampling) draw(*sampling);
  }

 private:
  Dispatch& add(std::string label, Dispatch dispatch) {
    step_.entries.push_back({std::move(label), std::move(dispatch), std::nullopt, {}, {}, segment_});
    return *step_.entries.back().dispatch;
  }
  void copy(std::string label, Model::Step::Copy what) {
    step_.entries.push_back({std::move(label), std::nullopt, what, {}, {}, segment_});
  }

  // Draws every segment's next id from its row of logits with its slot's settings in SAMPLING (they may change
  // between steps), all rows in one chain of dispatches: row i's id into ids[i], the row's input in the next step
  // of the same slots, and for the host into batch_tokens[i]. Each slot's penalties count its own tokens.
  void draw(const std::vector<kernels::SampleParams>& sampling) {
    const uint32_t count = token_count_, rows = uint32_t(step_.segments.size());
    const uint32_t row_stride = uint32_t(config_.vocab_size);
    const kernels::SampleBuffers buffers{{&b_.logits},           {&b_.ids},          {&b_.batch_tokens},
                                         {&b_.sample_candidates}, {&b_.token_counts}, {&b_.sample_rows}};
    auto stages = kernels::sample(device_, buffers, count, rows);
    const auto segments = step_.segments;
    // The rows' settings before every run: their slots' settings and positions of the moment, written where the
    // buffer holds others.
    auto write_rows = [device = &device_, buffers, count, row_stride, segments, &sampling, &positions = positions_,
                       &written = b_.sample_rows_written](uint32_t) {
      std::vector<kernels::SampleParams> now;
      for (uint32_t row = 0; row < segments.size(); ++row) {
        uint32_t slot = segments[row].first;
        kernels::SampleParams p = sampling[slot];
        p.count = count;
        p.slot = row;
        p.position = positions[slot] + segments[row].second - 1;  // of the row's token: its segment's last
        p.logits_offset = row * row_stride;
        p.counts_offset = slot * row_stride;
        now.push_back(p);
      }
      if (now.size() == written.size() &&
          std::memcmp(now.data(), written.data(), now.size() * sizeof(kernels::SampleParams)) == 0)
        return;
      kernels::write_sample_rows(*device, buffers, count, now);
      written = std::move(now);
    };
    for (size_t i = 0; i < stages.size(); ++i) {
      bool level = i >= 2 && i + 1 < stages.size();
      std::string label = i == 0  ? "sample chunks"
                          : i == 1 ? "sample histogram"
                          : level  ? fmt::format("sample level {}", i - 2)
                                   : "sample draw";
      add(std::move(label), std::move(stages[i]));
      if (i == 0) step_.entries.back().at_position = write_rows;
      // Levels that no row's settings of the moment can need stay out of the step.
      if (level)
        step_.entries.back().recorded_if = [&sampling, segments, index = uint32_t(i - 2)](uint32_t) {
          return std::any_of(segments.begin(), segments.end(),
                             [&](auto segment) { return index < kernels::sample_levels(sampling[segment.first]); });
        };
    }
  }

  bool batched() const { return step_.segments.size() > 1; }
  // Rows [first, first + rows) of an activation buffer whose rows hold `width` floats.
  static BufferBinding rows_of(const gpu::Buffer& buffer, uint32_t first, uint32_t rows, uint64_t width) {
    return {&buffer, uint64_t(first) * width * 4, uint64_t(rows) * width * 4};
  }
  // The pools with the block table of `slot` (or, for the row kernels, every slot's).
  kernels::KvBlocks blocks_of(uint32_t slot) const {
    uint64_t stride = uint64_t(b_.table_stride) * 4;
    return {{&b_.kv_tables, slot * stride, stride}, b_.kv_blocks};
  }
  kernels::KvBlocks all_blocks() const { return {{&b_.kv_tables}, b_.kv_blocks}; }
  uint64_t kv_width() const { return uint64_t(config_.num_kv_heads) * uint64_t(config_.head_dim); }

  // Re-writes a position-dependent dispatch's uniform before every step that records it: `update` sets the
  // fields.
  template <typename Params>
  void at_position(Dispatch& dispatch, Params params, std::function<void(Params&, uint32_t)> update) {
    auto owner = std::find_if(step_.entries.rbegin(), step_.entries.rend(),
                              [&](const Model::Step::Entry& e) { return e.dispatch && &*e.dispatch == &dispatch; });
    if (owner == step_.entries.rend()) fail("graph: at_position() for a dispatch not in this step");
    gpu::Device* device = &device_;
    // Written only when the fields change.
    owner->at_position = [device, &dispatch, params, update, written = false](uint32_t position) mutable {
      Params before = params;
      update(params, position);
      if (written && std::memcmp(&before, &params, sizeof(Params)) == 0) return;
      dispatch.write_params(*device, bytes_of(params));
      written = true;
    };
  }

  // An attention dispatch: its uniform follows the position; `for_keys` as Step::Entry's `recorded_if`.
  void attention_dispatch(std::string label, Dispatch dispatch, const kernels::FlashAttentionParams& params,
                          std::function<bool(uint32_t)> for_keys) {
    Dispatch& attend = add(std::move(label), std::move(dispatch));
    step_.entries.back().recorded_if = std::move(for_keys);
    uint32_t T = params.T;
    at_position<kernels::FlashAttentionParams>(attend, params, [T](auto& p, uint32_t position) {
      p.position_offset = position;
      p.S = position + T;
    });
  }

  BufferBinding unused() const { return {&b_.unused}; }
  uint32_t hidden() const { return uint32_t(config_.hidden_size); }

  // The token embeddings of every row; learned positions (GPT-2) are added by one gather per segment, whose
  // rows start at its own slot's position.
  void embed() {
    if (!w_.positions) return embed_rows(0, T_);
    uint32_t first_row = 0;
    for (segment_ = 0; segment_ < step_.segments.size(); ++segment_) {
      uint32_t rows = step_.segments[segment_].second;
      embed_rows(first_row, rows);
      first_row += rows;
    }
    segment_ = 0;
  }

  void embed_rows(uint32_t first_row, uint32_t rows) {
    const GpuLinear& table = w_.embed;
    float scale = arch_.embed_scale_sqrt_hidden ? std::sqrt(float(config_.hidden_size)) : 1.0f;
    bool learned = w_.positions.has_value();
    for (const RowBlock& block : table.blocks) {
      kernels::EmbedParams p{rows, hidden(), block.first_row, block.rows, kernels::float_bits(scale), 0,
                             learned ? 1u : 0u, first_row};
      BufferBinding positions = learned ? BufferBinding{&*w_.positions} : unused();
      Dispatch& d = add("embed", kernels::embed(device_, {&b_.ids}, {table.weight.get(), block.byte_offset, block.byte_size},
                                                positions, {&b_.residual[0]}, p, block.type,
                                                learned ? uint32_t(config_.max_position_embeddings) : 0));
      if (learned)
        at_position<kernels::EmbedParams>(d, p, [](auto& q, uint32_t position) { q.position_offset = position; });
    }
  }

  void norm(const std::string& label, const GpuNorm& norm, const gpu::Buffer& in, const gpu::Buffer& out,
            uint32_t rows) {
    uint32_t eps = kernels::float_bits(float(config_.norm_eps));
    if (arch_.norm == NormKind::LayerNorm)
      add(label, kernels::layernorm_welford(device_, {&in}, {&norm.weight}, {&*norm.bias}, {&out}, {rows, hidden(), eps}));
    else
      add(label, kernels::rmsnorm_vec4(device_, {&in}, {&norm.weight}, {&out}, {rows, hidden(), eps}));
  }

  // The input of a linear layer: a buffer, and possibly an RMSNorm the layer applies itself (fused). With
  // `raw`, x holds x * the norm's weight, written by the product before (see NextNorm), and raw the x whose
  // rms the layer takes.
  struct Input {
    const gpu::Buffer* x;
    const GpuNorm* fused_norm = nullptr;
    const gpu::Buffer* raw = nullptr;
  };

  // The RMSNorm that follows a product writing the residual stream, and the layer that applies it. Where both
  // run the decode kernel and prepared_norms_pay(), the product also writes x * the norm's weight into
  // b_.normed (norm_out), and the layer reads that instead of reading the norm's weight beside x in every
  // column group.
  struct NextNorm {
    const GpuNorm* norm;
    const GpuLinear* consumer;
  };
  // What the last norm_out product prepared: x * norm's weight of the residual buffer x, in b_.normed.
  struct Prepared {
    const GpuNorm* norm;
    const gpu::Buffer* x;
  };

  // Whether the gate|up projection `L` can apply the gate activation to its own output (its gate and up
  // rows must lie in one binding).
  bool can_gate(const GpuLinear& L) const {
    return L.blocks.size() == 1 && kernels::linear_gates(device_, T_, L.in, L.out, L.type);
  }

  // Whether `L` can apply its input's RMSNorm itself (the decode kernel sums x's squares as it reads x,
  // so the fused norm costs no extra pass).
  bool fusable(const GpuLinear& L, uint32_t M) const {
    return kernels::linear_fuses(device_, M, L.in, L.out, L.type);
  }

  // Normalises `x` for the linear layer `next`: by fusing an RMSNorm into it where the decode kernel can
  // (on x * weight if the product before prepared it), else with a norm dispatch into b_.normed.
  Input normed(const std::string& label, const GpuNorm& norm, const gpu::Buffer& x, const GpuLinear& next,
               uint32_t rows) {
    std::optional<Prepared> prepared = std::exchange(prepared_, std::nullopt);
    if (arch_.norm != NormKind::LayerNorm && fusable(next, rows)) {
      if (prepared && prepared->norm == &norm && prepared->x == &x) return {&b_.normed, &norm, &x};
      return {&x, &norm};
    }
    this->norm(label, norm, x, b_.normed, rows);
    return {&b_.normed};
  }

  // Whether the products writing the residual stream prepare the gate|up projection's and the LM head's
  // norms. Measured on an H200 (docs/PERFORMANCE.md, runs 60-61): at hidden size 4096 (llama3-8b) decoding
  // gains 2.6 % (tg128 198.4 -> 203.5), the saved norm-weight loads outweighing the extra output; at 896
  // (qwen2.5-0.5b) it loses 1-2 % (1,021.5 -> 1,007.2 with gate|up's alone). q|k|v's norm is never prepared:
  // with it, llama3-8b ran 201.6 against 202.8 without. The size from which it pays follows the adapter's
  // tuning (kernels::prepared_norm_min_hidden: 4,096 on the H200).
  bool prepared_norms_pay() const {
    if (options_.prepared_norms != PreparedNorms::Auto) return options_.prepared_norms == PreparedNorms::Always;
    return hidden() >= kernels::prepared_norm_min_hidden(kernels::tuning(device_).resident_workgroups);
  }

  // The norm the last layer's output goes through, if the LM head reads the residual stream itself (not a
  // copied last row) and preparing it pays.
  std::optional<NextNorm> after_last_layer() const {
    if (prepared_norms_pay() && every_row_logits()) return NextNorm{&w_.final_norm, &w_.lm_head};
    return std::nullopt;
  }

  // The norm operands of `L` for its input `in`; sets p's norm flags.
  kernels::LinearNorm input_norm(const Input& in, kernels::LinearParams& p) const {
    p.eps_bits = kernels::float_bits(float(config_.norm_eps));
    if (in.raw) {
      p.norm_x = kernels::kNormPrepared;
      return {{}, {in.raw}, {}};
    }
    if (in.fused_norm) {
      p.norm_x = kernels::kNormWeighted;
      return {{&in.fused_norm->weight}};
    }
    return {};
  }

  // out[:, n] (+)= x' W^T + b over M rows; `residual` (when given) is added, and must differ from `out`.
  // With `gate_act` (1 SiLU, 2 GELU-tanh; see can_gate), L is a gate|up projection that writes
  // act(gate) * up. `next`: the norm that will read `out` (see NextNorm).
  void linear(const std::string& label, const GpuLinear& L, Input in, uint32_t M, const gpu::Buffer* residual,
              const gpu::Buffer& out, uint32_t gate_act = 0, std::optional<NextNorm> next = std::nullopt) {
    BufferBinding res = residual ? BufferBinding{residual} : unused();
    uint32_t has_bias = L.bias ? 1 : 0, has_residual = residual ? 1 : 0;
    const gpu::Buffer& x = *in.x;
    bool prepare = next && arch_.norm != NormKind::LayerNorm && fusable(L, M) && fusable(*next->consumer, M);
    for (const RowBlock& block : L.blocks) {
      uint32_t out_stride = gate_act ? L.out / 2 : L.out;
      kernels::LinearParams p{M, L.in, block.rows, out_stride, block.first_row, has_bias, has_residual, gate_act};
      kernels::LinearNorm norm = input_norm(in, p);
      if (prepare) {
        p.norm_out = 1;
        norm = {{&next->norm->weight}, {}, {&b_.normed}};
      }
      BufferBinding bias = L.bias ? BufferBinding{&*L.bias, uint64_t(block.first_row) * 4, uint64_t(block.rows) * 4} : unused();
      std::string name = L.blocks.size() > 1 ? fmt::format("{} rows {}+{}", label, block.first_row, block.rows) : label;
      BufferBinding weight{L.weight.get(), block.byte_offset, block.byte_size};
      if (M > kernels::kMatvecRows) {
        // A prompt product (never fused: the fusions are the decode kernel's), in the chosen arithmetic; where
        // its tiles would leave SMs idle, shared out and the cut tiles summed after (two dispatches). Up to
        // kLinearRowsMax rows (a batched decode step) it is linear_rows.wgsl's, which reads the weights once.
        for (Dispatch& d : kernels::linear_split_k(device_, {&x}, weight, bias, res, {&out}, p, block.type,
                                                   {&b_.split_scratch}, 0, options_.arithmetic))
          add(name, std::move(d));
      } else {
        add(name, kernels::linear(device_, {&x}, weight, bias, res, {&out}, p, block.type, norm));
      }
    }
    if (prepare) prepared_ = Prepared{next->norm, &out};
  }

  // One decoder block; returns which residual buffer holds its output.
  int layer(int l, int current) {
    const GpuLayer& L = w_.layers[size_t(l)];
    auto label = [l](const char* what) { return fmt::format("layer {} {}", l, what); };
    const gpu::Buffer& x = b_.residual[current];
    const gpu::Buffer& next = b_.residual[1 - current];

    Input attn_in = normed(label("attn_norm"), L.attn_norm, x, L.qkv, T_);
    attention(l, L, label, attn_in);
    if (arch_.parallel_block) {
      // h = x + attn(ln(x)) + mlp(ln(x)): both branches read the same normed input.
      linear(label("o"), L.o, {&b_.attn}, T_, &x, next);
      mlp(l, L, label, attn_in, next, x);
      return current;
    }
    const GpuNorm& mlp_norm = L.mlp_norm ? *L.mlp_norm : L.attn_norm;
    if (L.attn_post_norm) {
      linear(label("o"), L.o, {&b_.attn}, T_, nullptr, b_.branch);
      norm(label("attn_post_norm"), *L.attn_post_norm, b_.branch, b_.branch_normed, T_);
      add(label("attn_residual"), kernels::add_vec4(device_, {&x}, {&b_.branch_normed}, {&next}, {T_ * hidden()}));
    } else {
      std::optional<NextNorm> mlp_next;
      if (prepared_norms_pay()) mlp_next = NextNorm{&mlp_norm, &L.up};
      linear(label("o"), L.o, {&b_.attn}, T_, &x, next, 0, mlp_next);
    }
    Input mlp_in = normed(label("mlp_norm"), mlp_norm, next, L.up, T_);
    mlp(l, L, label, mlp_in, next, x);
    return current;  // mlp wrote back into the buffer this block started from
  }

  void attention(int l, const GpuLayer& L, const std::function<std::string(const char*)>& label, Input in) {
    // Decoding one sequence without q/k norms: the projection rotates q and k and stores k and v itself.
    const GpuLinear& qkv = L.qkv;
    if (!batched() && !L.q_norm && !L.k_norm && qkv.blocks.size() == 1 &&
        kernels::linear_fuses(device_, T_, qkv.in, qkv.out, qkv.type) && kernels::qkv_rope_fusable(qkv_heads()) &&
        kernels::linear_qkv_rope_fits(device_)) {
      project_qkv_rope(l, L, label, in);
    } else {
      linear(label("qkv"), qkv, in, T_, nullptr, b_.qkv);
    }
    if (step_.row_kernels) return attend_rows(l, L, label);
    uint32_t first = 0;
    for (segment_ = 0; segment_ < step_.segments.size(); ++segment_) {
      uint32_t rows = step_.segments[segment_].second;
      attend(l, L, label, first, rows, step_.segments[segment_].first);
      first += rows;
    }
    segment_ = 0;
  }

  // The row-table path of a batched step (Step::row_kernels): one dispatch rotates and stores every row, one
  // attends for every one-token segment (the table's first entries, Model::row_table()); longer segments
  // (prompt chunks) keep their own attention dispatches, whose block kernel shares K/V tiles across queries.
  void attend_rows(int l, const GpuLayer& L, const std::function<std::string(const char*)>& label) {
    kernels::RowSpace space = row_space();
    uint32_t eps = kernels::float_bits(float(config_.norm_eps));
    kernels::QkvRopeParams rp{T_, heads(), kv_heads(), head_dim(), rotary_dim(), 0, L.q_norm ? 1u : 0u, eps};
    BufferBinding k_pool{&b_.k_cache[size_t(l)]}, v_pool{&b_.v_cache[size_t(l)]};
    add(label("rope_store_rows"),
        kernels::rope_store_rows(device_, {&b_.qkv}, L.q_norm ? BufferBinding{&L.q_norm->weight} : unused(),
                                 L.k_norm ? BufferBinding{&L.k_norm->weight} : unused(), rope_table(l), {&b_.q}, k_pool,
                                 v_pool, {&b_.row_table}, all_blocks(), rp, space));
    uint32_t single = uint32_t(std::count_if(step_.segments.begin(), step_.segments.end(),
                                             [](const auto& segment) { return segment.second == 1; }));
    if (single > 0) {
      uint32_t window = config_.sliding(l) ? uint32_t(config_.sliding_window) : 0;
      kernels::FlashAttentionParams ap{single, 0, heads(), kv_heads(), head_dim(), 0, window,
                                       kernels::float_bits(float(config_.attention_scale))};
      add(label("attention_rows"),
          kernels::attention_rows(device_, {&b_.q}, k_pool, v_pool, {&b_.attn}, {&b_.row_table}, all_blocks(), ap,
                                  space));
    }
    uint32_t first = 0;
    for (segment_ = 0; segment_ < step_.segments.size(); ++segment_) {
      auto [slot, rows] = step_.segments[segment_];
      if (rows > 1) {
        fused_qkv_ = true;  // stored above
        attend(l, L, label, first, rows, slot);
      }
      first += rows;
    }
    segment_ = 0;
  }

  kernels::RowSpace row_space() const {
    return {uint32_t(b_.q.size() / (uint64_t(heads()) * head_dim() * 4)), uint32_t(b_.kv_tables.size() / 4),
            kv_width(), b_.kv};
  }

  void project_qkv_rope(int l, const GpuLayer& L, const std::function<std::string(const char*)>& label, Input in) {
    const GpuLinear& qkv = L.qkv;
    const RowBlock& block = qkv.blocks.front();
    kernels::LinearParams p{T_, qkv.in, qkv.out, qkv.out, 0, qkv.bias ? 1u : 0u, 0};
    kernels::LinearNorm norm = input_norm(in, p);
    uint32_t slot = step_.segments.front().first;
    Dispatch& project = add(
        label("qkv_rope"),
        kernels::linear_qkv_rope(device_, {in.x}, {qkv.weight.get(), block.byte_offset, block.byte_size},
                                 qkv.bias ? BufferBinding{&*qkv.bias} : unused(), rope_table(l), {&b_.q},
                                 {&b_.k_cache[size_t(l)]}, {&b_.v_cache[size_t(l)]}, blocks_of(slot), p, qkv.type,
                                 norm, qkv_heads()));
    at_position<kernels::LinearParams>(project, p, [](auto& q, uint32_t position) { q.position = position; });
    fused_qkv_ = true;
  }

  kernels::QkvHeads qkv_heads() const { return {heads(), kv_heads(), head_dim(), rotary_dim(), context_, b_.kv}; }
  uint32_t heads() const { return uint32_t(config_.num_heads); }
  uint32_t kv_heads() const { return uint32_t(config_.num_kv_heads); }
  uint32_t head_dim() const { return uint32_t(config_.head_dim); }
  uint32_t rotary_dim() const { return arch_.positions == PositionKind::Rotary ? uint32_t(config_.rotary_dim) : 0u; }
  BufferBinding rope_table(int l) const {
    return arch_.positions == PositionKind::Rotary ? BufferBinding{&b_.rope_table[config_.sliding(l) ? 1 : 0]} : unused();
  }

  // Rotates and stores the keys and values of rows [first, first + rows) (one sequence, in `slot`), unless the
  // projection did, and runs their attention over the slot's cache.
  void attend(int l, const GpuLayer& L, const std::function<std::string(const char*)>& label, uint32_t first,
              uint32_t rows, uint32_t slot) {
    uint64_t q_width = uint64_t(heads()) * head_dim();
    uint64_t qkv_width = q_width + 2 * kv_width();
    BufferBinding k_cache{&b_.k_cache[size_t(l)]}, v_cache{&b_.v_cache[size_t(l)]};
    kernels::KvBlocks blocks = blocks_of(slot);
    BufferBinding q = rows_of(b_.q, first, rows, q_width);
    if (!std::exchange(fused_qkv_, false)) {
      uint32_t eps = kernels::float_bits(float(config_.norm_eps));
      kernels::QkvRopeParams rp{rows, heads(), kv_heads(), head_dim(), rotary_dim(), 0, L.q_norm ? 1u : 0u, eps};
      Dispatch& split = add(label("qkv_rope_store"),
                            kernels::qkv_rope_store(device_, rows_of(b_.qkv, first, rows, qkv_width),
                                                    L.q_norm ? BufferBinding{&L.q_norm->weight} : unused(),
                                                    L.k_norm ? BufferBinding{&L.k_norm->weight} : unused(), rope_table(l),
                                                    q, k_cache, v_cache, blocks, rp, context_, b_.kv));
      at_position<kernels::QkvRopeParams>(split, rp, [](auto& p, uint32_t position) { p.position_offset = position; });
    }

    uint32_t window = config_.sliding(l) ? uint32_t(config_.sliding_window) : 0;
    kernels::FlashAttentionParams ap{rows, rows, heads(), kv_heads(), head_dim(), 0, window,
                                     kernels::float_bits(float(config_.attention_scale))};
    BufferBinding out = rows_of(b_.attn, first, rows, q_width);
    // One dispatch, or two for split-KV decoding (partials, combine); all take the same uniform. A decode
    // graph also holds the one-dispatch variant for caches short enough not to need the split (it spares
    // the combine dispatch), and each step records the variant its key count calls for.
    auto dispatches =
        kernels::flash_attention(device_, q, k_cache, v_cache, out, blocks, ap, {&b_.attention_scratch}, context_, b_.kv);
    std::function<bool(uint32_t)> split_keys;
    if (dispatches.size() > 1) {
      auto unsplit = [ap](uint32_t keys) { return !kernels::flash_attention_split_serves(ap, keys); };
      attention_dispatch(label("attention"),
                         kernels::flash_attention(device_, q, k_cache, v_cache, out, blocks, ap, b_.kv), ap, unsplit);
      split_keys = [unsplit](uint32_t keys) { return !unsplit(keys); };
    }
    for (size_t i = 0; i < dispatches.size(); ++i)
      attention_dispatch(label(i == 0 ? "attention" : "attention combine"), std::move(dispatches[i]), ap, split_keys);
  }

  // Layer l's MLP branch on `in`; adds its output to `residual` into `out`.
  void mlp(int l, const GpuLayer& L, const std::function<std::string(const char*)>& label, Input in,
           const gpu::Buffer& residual, const gpu::Buffer& out) {
    uint32_t intermediate = uint32_t(config_.intermediate_size);
    uint32_t act = config_.activation == Activation::SiLU ? 0 : 1;
    if (arch_.gated_mlp() && can_gate(L.up)) {
      linear(label("gate_up"), L.up, in, T_, nullptr, b_.act, act + 1);  // writes act(gate) * up itself
    } else if (arch_.gated_mlp()) {
      linear(label("gate_up"), L.up, in, T_, nullptr, b_.up);
      add(label("gated_act"), kernels::gated_act(device_, {&b_.up}, {&b_.act}, {T_, intermediate, act}));
    } else {
      linear(label("up"), L.up, in, T_, nullptr, b_.up);
      add(label("gelu"), kernels::gelu_vec4(device_, {&b_.up}, {&b_.act}, {T_ * intermediate}));
    }
    Input down_in{&b_.act};
    if (L.mlp_post_norm) {
      linear(label("down"), L.down, down_in, T_, nullptr, b_.branch);
      norm(label("mlp_post_norm"), *L.mlp_post_norm, b_.branch, b_.branch_normed, T_);
      add(label("mlp_residual"), kernels::add_vec4(device_, {&residual}, {&b_.branch_normed}, {&out}, {T_ * hidden()}));
    } else {
      bool last = l + 1 == int(config_.num_layers);
      linear(label("down"), L.down, down_in, T_, &residual, out, 0, last ? after_last_layer() : std::nullopt);
    }
  }

  // Whether every row's logits are computed: all_logits, or a step of one token per sequence.
  bool every_row_logits() const { return all_logits_ || T_ == step_.segments.size(); }

  void logits(int current) {
    const gpu::Buffer* source = &b_.residual[current];
    uint32_t rows = every_row_logits() ? T_ : uint32_t(step_.segments.size());
    if (!every_row_logits()) {
      // Only each sequence's last position's logits are needed: normalise and project just those rows.
      uint64_t row_bytes = uint64_t(hidden()) * 4;
      uint32_t end = 0;
      for (size_t i = 0; i < step_.segments.size(); ++i) {
        end += step_.segments[i].second;
        copy("last row", Model::Step::Copy{source, (end - 1) * row_bytes, &b_.last, i * row_bytes, row_bytes});
      }
      source = &b_.last;
    }
    linear("lm_head", w_.lm_head, normed("final_norm", w_.final_norm, *source, w_.lm_head, rows), rows, nullptr,
           b_.logits);
    step_.logit_rows = rows;
  }

  gpu::Device& device_;
  const ModelConfig& config_;
  const ArchitectureSpec& arch_;
  const GpuWeights& w_;
  const Model::Buffers& b_;
  uint32_t context_;
  uint32_t token_count_;
  const ModelOptions& options_;
  const std::vector<uint32_t>& positions_;
  Model::Step& step_;
  uint32_t T_;
  bool all_logits_ = false;
  bool fused_qkv_ = false;   // the q|k|v projection rotated and stored this layer's keys and values itself
  uint32_t segment_ = 0;     // the segment the entries being added belong to
  std::optional<Prepared> prepared_;  // set by a norm_out product, taken by the normed() after it
};

}  // namespace

Model::Model(gpu::Device& device, const ModelFiles& files, const ModelOptions& options)
    : device_(device), config_(files.config()), options_(options) {
  uint32_t max_positions = uint32_t(config_.max_position_embeddings);
  if (options_.slots == 0) fail("the KV cache needs at least one slot");
  positions_.assign(options_.slots, 0);
  slot_blocks_.resize(options_.slots);
  uint32_t vocab_size = uint32_t(config_.vocab_size);
  token_count_ = options_.token_count ? std::min(options_.token_count, vocab_size) : vocab_size;
  slot_sampling_.assign(options_.slots, argmax_sampling());
  if (config_.arch->positions == PositionKind::Learned && options_.context > max_positions)
    fail("context {} exceeds the {} positions this model has learned (config.json n_positions)", options_.context,
         max_positions);
  if (options_.max_chunk == 0) fail("max_chunk must be positive");
  if (config_.head_dim > 256) fail("head_dim {} is larger than the 256 gerbil's attention kernels support", config_.head_dim);
  kv_type_ = resolve_kv_cache(options_.kv_cache, files);
  if (kv_type_ == kernels::KvType::F16 && config_.head_dim % 2 != 0)
    fail("an f16 KV cache stores head dims in pairs, and head_dim {} is odd: use an f32 cache (--kv-cache f32)",
         config_.head_dim);
  if (kv_type_ == kernels::KvType::Q8 && config_.head_dim % 4 != 0)
    fail("a q8 KV cache stores head dims four to a word, and head_dim {} is not a multiple of 4: use an f32 or f16 "
         "cache (--kv-cache f32 or f16)", config_.head_dim);
  if (options_.arithmetic == kernels::Arithmetic::F16 && !device.features().shader_f16)
    fail("f16 arithmetic for prompts needs the adapter's shader-f16 feature, which {} does not offer",
         device.adapter().summary());
  auto weights_start = Clock::now();
  weights_ = upload_weights(device, files, options.weights, options.progress);
  load_stats_.weights_seconds = seconds_since(weights_start);
  allocate_within_memory();
  if (options_.pipelines_at_load) {
    auto pipelines_start = Clock::now();
    load_stats_.pipelines = create_pipelines();
    load_stats_.pipelines_seconds = seconds_since(pipelines_start);
    auto warm_up_start = Clock::now();
    warm_up();
    load_stats_.warm_up_seconds = seconds_since(warm_up_start);
  }
}

// A created pipeline still has costs left for its first dispatch (the driver's, the first touch of buffers the
// step binds), which would fall on the first request's first token; a throwaway prompt and decode step pay them
// at load. The GPU's clock is the other cost: a load only copies, so a GPU's clock governor holds it at its idle
// clock until work has kept it busy for a while (an H100 ran Llama-3-8B's warm-up and first prompt at 345 of its
// 1,980 MHz, the clock rising about 0.2 s after the work began: 3-4 times a warm prompt's time; docs/PERFORMANCE.md,
// thirty-eighth session). So on a GPU the prompt runs again until the GPU has been busy for kClockRampSeconds and
// the last run is within kSettled of the fastest, for kMaxWarmUpSeconds at most. A CPU adapter has no such clock.
void Model::warm_up() {
  constexpr uint32_t kPromptTokens = 16;
  constexpr double kClockRampSeconds = 0.5, kMaxWarmUpSeconds = 2, kSettled = 1.1;
  if (context_ < 2) return;  // no room for a prompt and the token after it
  auto start = Clock::now();
  std::vector<int32_t> prompt(std::min(kPromptTokens, context_ - 1), 0);
  forward(prompt);
  decode_greedy(0, 1, [](int32_t) { return true; });
  reset(0);
  if (device_.adapter().adapter_type == "CPU") return;
  double fastest = INFINITY, last = INFINITY;
  while (seconds_since(start) < kMaxWarmUpSeconds &&
         (seconds_since(start) < kClockRampSeconds || last > kSettled * fastest)) {
    auto run_start = Clock::now();
    forward(prompt);
    reset(0);
    last = seconds_since(run_start);
    fastest = std::min(fastest, last);
  }
}

KvCacheSize default_kv_cache_size(const ModelOptions& options, uint64_t max_positions, uint64_t block_bytes,
                                  uint64_t block_elements, uint64_t max_binding) {
  // One layer's K pool is one storage binding, indexed in u32 elements: whole contexts of blocks for every slot.
  uint64_t blocks = std::min(max_binding / std::max<uint64_t>(1, block_bytes),
                             uint64_t(UINT32_MAX) / std::max<uint64_t>(1, block_elements));
  uint64_t fitting = blocks / std::max(1u, options.slots) * kernels::kKvBlockTokens;
  uint64_t wanted = options.context ? options.context : (max_positions ? max_positions : kFallbackContext);
  if (options.context || options.kv_tokens) return {uint32_t(wanted), false};
  return {uint32_t(std::min<uint64_t>(wanted, std::max<uint64_t>(fitting, kernels::kKvBlockTokens))), true};
}

// The context and pool the options ask for; where they leave the context to the model (ModelOptions::context and
// kv_tokens 0), the model's whole context as far as one storage binding per layer's pool allows and then the GPU's
// memory: halved while the KV cache and the step's buffers do not fit (creating a buffer fails with
// gpu::OutOfMemory), down to kMinSizedContext.
void Model::allocate_within_memory() {
  uint64_t kv_width = uint64_t(config_.num_kv_heads) * uint64_t(config_.head_dim);
  uint64_t block_elements = kernels::kKvBlockTokens * kv_width;
  KvCacheSize size = default_kv_cache_size(options_, uint32_t(context_length(config_)),
                                           kernels::kv_pool_bytes(kv_type_, block_elements, uint32_t(config_.head_dim)),
                                           block_elements, device_.limits().maxStorageBufferBindingSize);
  for (uint32_t context = size.context;; context /= 2) {
    try {
      allocate(context);
      keep_room_for_steps();
      return;
    } catch (const gpu::OutOfMemory& e) {
      buffers_.reset();  // before the next try: what this one allocated is given back
      if (!size.sized_to_device || context / 2 < kMinSizedContext)
        fail("the KV cache of {} tokens and the step's buffers do not fit in the GPU's memory ({}): ask for fewer "
             "tokens (--ctx, --kv-tokens or --parallel){}", uint64_t(total_blocks_) * kernels::kKvBlockTokens,
             e.what(), device_.memory_limit() ? " or allow more memory (--gpu-memory)" : "");
    }
  }
}

// Under a memory limit (gpu::DeviceOptions::memory_limit), what allocate() leaves must hold what steps create when
// first built: each graph's uniform structs (kernels::UniformArena; kDispatchesPerLayer bounds a layer's
// dispatches generously) for each of the max_kept_steps() graphs kept at once. Else a model that loaded would fail
// its first steps; this throws gpu::OutOfMemory instead, so that allocate_within_memory() asks for less.
void Model::keep_room_for_steps() const {
  constexpr uint64_t kDispatchesPerLayer = 32;
  uint64_t per_graph =
      kernels::UniformArena::bytes_for(device_, uint64_t(config_.num_layers + 1) * kDispatchesPerLayer);
  uint64_t reserve = uint64_t(max_kept_steps()) * per_graph;
  uint64_t limit = device_.memory_limit(), held = device_.buffer_bytes();
  if (limit && held + reserve > limit)
    throw gpu::OutOfMemory(fmt::format("the model's buffers hold {} bytes, which leaves less than the {} bytes its "
                                       "steps' uniform buffers may take within the memory limit of {} bytes",
                                       held, reserve, limit));
}

void Model::allocate(uint32_t context) {
  context_ = context;
  // By default every slot can hold a whole context at once, as before blocks (a context's last block rounded up).
  uint64_t pool_blocks = options_.kv_tokens ? blocks_for(options_.kv_tokens) : options_.slots * blocks_for(context_);
  if (pool_blocks > UINT32_MAX) fail("a KV-cache pool of {} blocks of {} tokens is too many", pool_blocks, kernels::kKvBlockTokens);
  total_blocks_ = uint32_t(pool_blocks);
  free_blocks_.clear();
  for (uint32_t block = total_blocks_; block-- > 0;) free_blocks_.push_back(block);  // block 0 is taken first
  table_stride_ = table_stride(context_);
  buffers_ = std::make_unique<Buffers>();
  Buffers& b = *buffers_;
  // A step holds up to max_chunk rows: one prompt's chunk (never more than a slot's context), or a batch.
  chunk_ = std::max(std::min(options_.max_chunk, context_ * options_.slots), options_.slots);
  uint64_t chunk = chunk_;
  uint64_t H = uint64_t(config_.hidden_size), I = uint64_t(config_.intermediate_size);
  uint64_t q_width = uint64_t(config_.num_heads) * uint64_t(config_.head_dim);
  uint64_t kv_width = uint64_t(config_.num_kv_heads) * uint64_t(config_.head_dim);
  uint64_t vocab = uint64_t(config_.vocab_size);
  auto f32 = [&](const char* label, uint64_t elements) { return device_.create_buffer(label, elements * 4); };
  b.ids = f32("token ids", chunk);
  b.residual[0] = f32("residual a", chunk * H);
  b.residual[1] = f32("residual b", chunk * H);
  b.normed = f32("normed", chunk * H);
  b.qkv = f32("qkv", chunk * (q_width + 2 * kv_width));
  b.q = f32("q", chunk * q_width);
  b.attn = f32("attention out", chunk * q_width);
  b.branch = f32("branch", chunk * H);
  b.branch_normed = f32("branch normed", chunk * H);
  b.up = f32("up", chunk * I * (config_.arch->gated_mlp() ? 2 : 1));
  b.act = f32("act", chunk * I);
  b.last = f32("last rows", H * options_.slots);
  // All-position logits are kept to chunks of at most kAllLogitsRows rows whose logits fit one storage
  // binding: prompts stepped for their last logits alone take whole chunks.
  uint64_t max_rows = std::min<uint64_t>(kAllLogitsRows, device_.limits().maxStorageBufferBindingSize / (vocab * 4));
  b.logit_rows = uint32_t(std::max<uint64_t>(1, std::min(chunk, max_rows)));
  if (b.logit_rows < options_.slots)
    fail("{} slots need {} rows of logits, more than one storage binding of this adapter holds ({})", options_.slots,
         options_.slots, b.logit_rows);
  b.logits = f32("logits", b.logit_rows * vocab);
  b.kv = kv_type_;
  b.kv_blocks = total_blocks_;
  b.table_stride = table_stride_;
  // Every kernel binds a layer's whole pool and indexes it in u32 elements.
  uint64_t pool_elements = uint64_t(total_blocks_) * kernels::kKvBlockTokens * kv_width;
  uint64_t pool_bytes = kernels::kv_pool_bytes(kv_type_, pool_elements, uint32_t(config_.head_dim));
  if (pool_bytes > device_.limits().maxStorageBufferBindingSize || pool_elements > UINT32_MAX)
    fail("a KV-cache pool of {} tokens ({} blocks of {}) needs {} bytes per layer's K (and V), more than one storage "
         "binding of this adapter holds ({}) or 2^32 elements: use fewer tokens (--kv-tokens, --ctx or --parallel)",
         uint64_t(total_blocks_) * kernels::kKvBlockTokens, total_blocks_, kernels::kKvBlockTokens, pool_bytes,
         device_.limits().maxStorageBufferBindingSize);
  b.kv_tables = device_.create_buffer("KV block tables", uint64_t(table_stride_) * options_.slots * 4);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    b.k_cache.push_back(device_.create_buffer(fmt::format("layer {} k cache", l), pool_bytes));
    b.v_cache.push_back(device_.create_buffer(fmt::format("layer {} v cache", l), pool_bytes));
  }
  // A batched step binds each sequence's rows of q, q|k|v and the attention output on their own.
  uint64_t alignment = device_.limits().minStorageBufferOffsetAlignment;
  batchable_ = (q_width * 4) % alignment == 0 && ((q_width + 2 * kv_width) * 4) % alignment == 0;
  row_kernels_ = batchable_ && kernels::attention_rows_fits(uint32_t(config_.head_dim), kv_type_);
  b.row_table = device_.create_buffer("row table", chunk * sizeof(kernels::RowEntry));
  for (auto& picks : b.batch_picks) picks = device_.create_buffer("batch picks read-back", 4ull * options_.slots, gpu::BufferKind::Readback);
  if (config_.arch->positions == PositionKind::Rotary) {
    // Layer kinds differ in rotary base only for Gemma3; look up one layer of each kind.
    for (bool sliding : {false, true}) {
      int64_t layer = 0;
      for (int64_t l = 0; l < config_.num_layers; ++l)
        if (config_.sliding(l) == sliding) layer = l;
      std::vector<float> table = rope_inv_freq(config_, layer, context_);
      table.push_back(float(config_.rope(layer).attention_factor));  // kernels::rope_table_length's layout
      b.rope_table.push_back(device_.upload(sliding ? "rope table sliding" : "rope table", std::span<const float>(table)));
    }
  }
  b.unused = f32("unused", 4);
  kernels::FlashAttentionParams widest{uint32_t(chunk), context_,
                                       uint32_t(config_.num_heads), uint32_t(config_.num_kv_heads),
                                       uint32_t(config_.head_dim)};
  b.attention_scratch = device_.create_buffer("attention scratch",
                                              kernels::flash_attention_scratch_bytes(device_, widest, context_));
  b.split_scratch = f32("split partial sums", kernels::linear_split_scratch_bound(device_));
  b.batch_tokens = f32("batch tokens", options_.slots);
  b.argmax_partials = f32("argmax partials", 2ull * kernels::kArgmaxPartials * options_.slots);
  b.token_mask = f32("token mask", uint64_t(kernels::token_mask_words(uint32_t(vocab))) * options_.slots);
  if (vocab <= kernels::kMaxSampleCount) {
    b.sample_candidates = f32("sample candidates", kernels::sample_candidates_words(uint32_t(vocab)) * options_.slots);
    b.token_counts = f32("token counts", vocab * options_.slots);
    b.sample_rows = device_.create_buffer("sample rows", sizeof(kernels::SampleParams) * options_.slots);
  }
  for (int slot = 0; slot < 4; ++slot)
    b.token_ring.push_back(device_.create_buffer(fmt::format("token read-back {}", slot), 4, gpu::BufferKind::Readback));
}

Model::~Model() { discard_speculation(); }

size_t Model::create_pipelines(std::span<const uint32_t> prompt_lengths) {
  gpu::Device::PipelineCollection collection(device_);
  std::atomic<size_t> traced = 0;
  auto trace = [&](const std::vector<std::pair<uint32_t, uint32_t>>& shape, Output output) {
    ++traced;
    Step step;
    step.segments = shape;
    for (auto [slot, tokens] : shape) step.tokens += tokens;
    build(step, output);
  };
  trace({{0, 1}}, Output::LastLogits);
  trace({{0, 1}}, Output::GreedyToken);
  trace({{0, 1}}, Output::MaskedGreedyToken);
  if (token_count_ <= kernels::kMaxSampleCount) trace({{0, 1}}, Output::SampledToken);
  if (slots() > 1 && batchable_) trace({{0, 1}, {1, 1}}, Output::GreedyToken);
  uint32_t longest = std::min(chunk_, context_);  // a prompt chunk never outgrows the cache
  std::vector<uint32_t> lengths;
  if (prompt_lengths.empty())
    for (uint32_t tokens = 2; tokens <= longest; ++tokens) lengths.push_back(tokens);
  for (uint32_t tokens : prompt_lengths) lengths.push_back(std::clamp(tokens, 1u, longest));
  // Prompt lengths are traced on every core: a trace only reads the model and notes pipelines (under the
  // collection's lock), and hundreds of lengths times every layer add up (Llama-3-8B: 511 x 32 layers).
  parallel_for(lengths.size(), [&](size_t i) { trace({{0, lengths[i]}}, Output::LastLogits); });
  load_stats_.traced_steps += traced;
  return collection.create();
}

uint64_t Model::kv_cache_bytes() const {
  return 2 * uint64_t(config_.num_layers) * buffers_->k_cache.front().size();
}

void Model::rewind(uint32_t position, uint32_t slot) {
  if (slot >= slots()) fail("no KV-cache slot {}: the model has {}", slot, slots());
  if (position > positions_[slot])
    fail("cannot rewind the cache to {}: it holds {} tokens", position, positions_[slot]);
  // A step queued ahead with this slot's row was queued for the positions before: that row can no longer be taken
  // (its sequence ended), the others can. Its writes past the position, and into blocks given back here, come
  // before those of any later step, which the GPU runs in order.
  if (speculation_) {
    auto row = std::ranges::find(speculation_->slots, slot) - speculation_->slots.begin();
    if (size_t(row) < speculation_->slots.size()) {
      if (speculation_->fed.size() != speculation_->slots.size()) discard_speculation();
      else speculation_->fed[size_t(row)] = kNoFed;
    }
  }
  positions_[slot] = position;
  std::vector<uint32_t>& held = slot_blocks_[slot];
  while (held.size() > blocks_for(position)) {
    free_blocks_.push_back(held.back());
    held.pop_back();
  }
}

uint32_t Model::kv_blocks_needed(uint32_t slot, uint64_t tokens) const {
  uint64_t needed = blocks_for(tokens), held = slot_blocks_.at(slot).size();
  return uint32_t(needed > held ? needed - held : 0);
}

bool Model::blocks_available(std::span<const std::pair<uint32_t, uint64_t>> needs) const {
  uint64_t wanted = 0;
  for (auto [slot, tokens] : needs) wanted += kv_blocks_needed(slot, tokens);
  return wanted <= free_blocks_.size();
}

void Model::reserve_blocks(std::span<const std::pair<uint32_t, uint64_t>> needs) {
  uint64_t wanted = 0;
  for (auto [slot, tokens] : needs) {
    wanted += kv_blocks_needed(slot, tokens);
    if (wanted > free_blocks_.size())
      fail("KV cache full: slot {} needs {} tokens ({} blocks of {}; it holds {}), and {} of the pool's {} blocks are "
           "free{} (--kv-tokens)",
           slot, tokens, blocks_for(tokens), kernels::kKvBlockTokens, slot_blocks_[slot].size(), free_blocks_.size(),
           total_blocks_, needs.size() > 1 ? " for the step's sequences" : "");
  }
  for (auto [slot, tokens] : needs) {
    std::vector<uint32_t>& held = slot_blocks_[slot];
    size_t first = held.size();
    while (held.size() < blocks_for(tokens)) {
      held.push_back(free_blocks_.back());
      free_blocks_.pop_back();
    }
    if (held.size() > first)
      device_.write(buffers_->kv_tables, std::span<const uint32_t>(held).subspan(first),
                    (uint64_t(slot) * table_stride_ + first) * 4);
  }
}

Model::Step& Model::step(const std::vector<std::pair<uint32_t, uint32_t>>& shape, Output output) {
  if (shape.size() == 1 && shape.front().second == 1 && output == Output::AllLogits)
    output = Output::LastLogits;  // the same graph
  StepKey key{shape, output};
  if (auto found = steps_.find(key); found != steps_.end()) return *found->second;
  // Prompts of many lengths and batches of many compositions: keep the cache of graphs small.
  if (steps_.size() >= max_kept_steps()) steps_.clear();
  auto start = std::chrono::steady_clock::now();
  auto step = std::make_unique<Step>();
  step->segments = shape;
  step->row_kernels = row_kernels_ && shape.size() > 1;
  for (auto [slot, tokens] : shape) step->tokens += tokens;
  build(*step, output);
  ++graphs_recorded_.count;
  graphs_recorded_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return *steps_.emplace(std::move(key), std::move(step)).first->second;
}

void Model::build(Step& step, Output output) {
  bool greedy = output == Output::GreedyToken || output == Output::MaskedGreedyToken;
  bool sampled = output == Output::SampledToken || output == Output::MaskedSampledToken;
  bool masked = output == Output::MaskedGreedyToken || output == Output::MaskedSampledToken;
  kernels::UniformArena::Scope uniforms(step.uniforms);
  StepBuilder(device_, config_, weights_, *buffers_, context_, token_count_, options_, positions_, step)
      .build(output == Output::AllLogits, greedy, sampled ? &slot_sampling_ : nullptr, masked);
}

void Model::check_segment(const Segment& segment) const {
  if (segment.slot >= slots()) fail("no KV-cache slot {}: the model has {}", segment.slot, slots());
  if (segment.tokens.empty()) fail("forward: no tokens for slot {}", segment.slot);
  for (size_t i = 0; i < segment.tokens.size(); ++i)
    check_token_id(config_, segment.tokens[i], fmt::format("token {}", i));
  uint32_t position = positions_[segment.slot];
  if (position + segment.tokens.size() > context_)
    fail("context full: {} tokens in the cache + {} new exceed the context of {} (--ctx)", position,
         segment.tokens.size(), context_);
}

namespace {

// The blocks the segments' slots need to hold their tokens after the step.
std::vector<std::pair<uint32_t, uint64_t>> segment_needs(std::span<const Segment> segments,
                                                         const std::vector<uint32_t>& positions) {
  std::vector<std::pair<uint32_t, uint64_t>> needs;
  for (const Segment& segment : segments)
    needs.emplace_back(segment.slot, uint64_t(positions[segment.slot]) + segment.tokens.size());
  return needs;
}

// The shape of a step queued ahead: one token for each of SLOTS (Model::speculate).
std::vector<std::pair<uint32_t, uint32_t>> one_token_shape(std::span<const uint32_t> slots) {
  std::vector<std::pair<uint32_t, uint32_t>> shape;
  for (uint32_t slot : slots) shape.emplace_back(slot, 1);
  return shape;
}

}  // namespace

std::vector<float> Model::forward(std::span<const int32_t> tokens, bool all_logits, uint32_t slot) {
  Segment whole{slot, tokens};
  check_segment(whole);
  reserve_blocks(segment_needs(std::span(&whole, 1), positions_));
  uint32_t chunk = std::min(chunk_, context_);
  if (all_logits) chunk = std::min(chunk, buffers_->logit_rows);
  std::vector<float> logits;
  for (size_t start = 0; start < tokens.size(); start += chunk) {
    Segment piece{slot, tokens.subspan(start, std::min<size_t>(chunk, tokens.size() - start))};
    bool last = start + piece.tokens.size() == tokens.size();
    auto out = run_step(std::span(&piece, 1), all_logits);
    if (all_logits || last) logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

std::optional<std::vector<size_t>> Model::rows_ahead(std::span<const Segment> segments) const {
  if (!speculation_ || segments.empty() || speculation_->fed.size() != speculation_->slots.size()) return std::nullopt;
  std::vector<size_t> rows;
  for (const Segment& segment : segments) {
    auto row = std::ranges::find(speculation_->slots, segment.slot) - speculation_->slots.begin();
    if (segment.tokens.size() != 1 || size_t(row) == speculation_->slots.size() ||
        speculation_->fed[size_t(row)] != segment.tokens.front())
      return std::nullopt;
    rows.push_back(size_t(row));
  }
  return rows;
}

bool Model::picks_serve(Output ahead, Output wanted) {
  return ahead == wanted || (ahead == Output::SampledToken && wanted == Output::GreedyToken) ||
         (ahead == Output::MaskedSampledToken && wanted == Output::MaskedGreedyToken);
}

bool Model::step_ahead_for(std::span<const Segment> segments, bool masked) const {
  return rows_ahead(segments) && picks_serve(speculation_->output, pick_output(segments, masked));
}

Model::Output Model::pick_output(std::span<const Segment> segments, bool masked) const {
  bool argmax = std::ranges::all_of(segments, [&](const Segment& segment) {
    const kernels::SampleParams& settings = slot_sampling_[segment.slot];
    return settings.top_k == 1 && !settings.penalized();
  });
  return masked ? (argmax ? Output::MaskedGreedyToken : Output::MaskedSampledToken)
                : (argmax ? Output::GreedyToken : Output::SampledToken);
}

std::vector<uint32_t> Model::forward_batch_pick(std::span<const Segment> segments, std::span<const TokenMask> masks,
                                                bool queue_ahead) {
  check_batch(segments);
  if (!batchable_) fail("forward_batch_pick: this model's steps cannot batch (can_batch())");
  if (!masks.empty() && masks.size() != segments.size())
    fail("forward_batch_pick: {} masks for {} segments (one each, or none)", masks.size(), segments.size());
  bool penalized = false, single = true;
  for (const Segment& segment : segments) {
    single = single && segment.tokens.size() == 1;
    penalized = penalized || slot_sampling_[segment.slot].penalized();
  }
  reserve_blocks(segment_needs(segments, positions_));
  const bool masked = !masks.empty();
  const Output output = pick_output(segments, masked);
  gpu::Device::PendingMap read;
  // Row i of the picks read back is segment rows[i]'s: a step queued ahead may hold more rows than SEGMENTS.
  std::optional<std::vector<size_t>> rows = rows_ahead(segments);
  const bool ahead = rows && picks_serve(speculation_->output, output);
  if (ahead) ++steps_ahead_.taken;
  else rows.reset();
  size_t picks = segments.size();
  if (ahead && speculation_->picks) {
    read = std::move(speculation_->read);  // this step is already queued, picks and all
    picks = speculation_->slots.size();
    speculation_.reset();
  } else {
    // A step whose products are submitted (queued ahead, or here before the masks, which the host works out
    // while they run) submits its picks after them.
    const bool products_first = ahead || masked;
    Step* s = nullptr;
    std::span<const TokenMask> row_masks = masks;
    std::vector<TokenMask> ahead_masks;
    if (ahead) {
      picks = speculation_->slots.size();
      s = &step(one_token_shape(speculation_->slots), speculation_->output);
      // A dropped row (its sequence ended, or waits) draws the argmax, which counts no id for penalties, under a
      // mask that allows every id.
      std::vector<bool> dropped(picks, true);
      for (size_t row : *rows) dropped[row] = false;
      for (size_t row = 0; row < picks; ++row)
        if (dropped[row]) slot_sampling_[speculation_->slots[row]] = argmax_sampling();
      if (masked) {
        ahead_masks.resize(picks);
        for (size_t i = 0; i < segments.size(); ++i) ahead_masks[(*rows)[i]] = masks[i];
        row_masks = ahead_masks;
      }
      speculation_.reset();
    } else {
      discard_speculation();
      s = &submit_step(segments, output, products_first);
    }
    if (masked) write_masks(row_masks);
    gpu::Recorder recorder(device_, "batch picks");
    if (products_first) record(*s, recorder, nullptr, s->pick);
    read = read_picks_async(recorder, uint32_t(picks), picks_ring_);
  }
  for (const Segment& segment : segments) positions_[segment.slot] += uint32_t(segment.tokens.size());
  try {
    // Not after a prompt's tokens (the next step is likely another). Only the products where the picks wait for the
    // host: a mask depends on this step's ids, and a draw with penalties counts its id on the GPU (a step ahead
    // that is discarded could not take its count back).
    if (single && queue_ahead)
      speculate(segments, output, !masked && !penalized, rows ? std::span<const size_t>(*rows) : std::span<const size_t>());
  } catch (...) {
    device_.finish_read(read);
    throw;
  }
  auto bytes = device_.finish_read(read);
  std::vector<uint32_t> all(picks), picked(segments.size());
  std::memcpy(all.data(), bytes.data(), all.size() * 4);
  for (size_t i = 0; i < picked.size(); ++i) picked[i] = all[rows ? (*rows)[i] : i];
  if (speculation_) speculation_->fed.assign(picked.begin(), picked.end());
  return picked;
}

gpu::Device::PendingMap Model::read_picks_async(gpu::Recorder& recorder, uint32_t count, uint32_t ring) {
  const gpu::Buffer& picks = buffers_->batch_picks[ring];
  recorder.copy(buffers_->batch_tokens, 0, picks, 0, 4ull * count);
  recorder.submit();
  picks_ring_ = 1 - ring;
  return device_.map_async(picks, 4ull * count);
}

void Model::speculate(std::span<const Segment> segments, Output output, bool picks, std::span<const size_t> pick_rows) {
  std::vector<std::pair<uint32_t, uint64_t>> needs;
  std::vector<uint32_t> slots;
  for (const Segment& segment : segments) {
    if (positions_[segment.slot] + 1 > context_) return;
    needs.emplace_back(segment.slot, positions_[segment.slot] + 1);
    slots.push_back(segment.slot);
  }
  if (!blocks_available(needs)) return;  // the real step will say so, if it comes
  reserve_blocks(needs);
  Step& s = step(one_token_shape(slots), output);
  if (s.row_kernels) write_row_table(s);
  gpu::Recorder recorder(device_, "batch step ahead");
  // Row i is segment i's one token: the step before wrote its picks into ids, in order of its rows. Where it held more
  // rows (queued ahead, taken without some), row i's pick is moved down from that step's row pick_rows[i] (rows keep
  // their order: pick_rows[i] >= i) out of batch_tokens, which holds every row's pick too.
  for (size_t i = 0; i < pick_rows.size(); ++i)
    if (pick_rows[i] != i) recorder.copy(buffers_->batch_tokens, 4 * pick_rows[i], buffers_->ids, 4 * i, 4);
  record(s, recorder, nullptr, 0, picks ? SIZE_MAX : s.pick);
  gpu::Device::PendingMap read;  // held by speculation_ only once it exists: a failed submit leaves none
  if (picks)
    read = read_picks_async(recorder, uint32_t(segments.size()), picks_ring_);
  else
    recorder.submit();
  speculation_ = Speculation{std::move(slots), {}, output, picks, std::move(read)};
  ++steps_ahead_.queued;
}

void Model::discard_speculation() noexcept {
  if (!speculation_) return;
  if (speculation_->picks) {
    try {
      device_.finish_read(speculation_->read);
    } catch (...) {
    }
  }
  speculation_.reset();
}

void Model::check_batch(std::span<const Segment> segments) const {
  if (segments.empty()) fail("forward_batch: no segments");
  size_t rows = 0;
  std::vector<bool> used(slots(), false);
  for (const Segment& segment : segments) {
    check_segment(segment);
    if (used[segment.slot]) fail("forward_batch: slot {} appears twice in one step", segment.slot);
    used[segment.slot] = true;
    rows += segment.tokens.size();
  }
  if (rows > chunk_) fail("forward_batch: {} rows exceed the {} one step holds", rows, chunk_);
}

std::vector<float> Model::forward_batch(std::span<const Segment> segments) {
  check_batch(segments);
  reserve_blocks(segment_needs(segments, positions_));
  if (batchable_) return run_step(segments, false);
  std::vector<float> logits;
  for (const Segment& segment : segments) {
    auto row = run_step(std::span(&segment, 1), false);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

void Model::write_row_table(const Step& s) {
  // One-token segments first (attention_rows takes the table's first entries), then the rows of longer ones.
  uint64_t kv_width = uint64_t(config_.num_kv_heads) * uint64_t(config_.head_dim);
  std::vector<kernels::RowEntry> single, longer;
  uint32_t row = 0;
  for (auto [slot, tokens] : s.segments)
    for (uint32_t t = 0; t < tokens; ++t, ++row)
      (tokens == 1 ? single : longer).push_back({row, slot * table_stride_, positions_[slot] + t, 0});
  single.insert(single.end(), longer.begin(), longer.end());
  kernels::check_row_table(single, {chunk_, table_stride_ * slots(), kv_width, kv_type_}, kernels::kKvBlockTokens);
  device_.write(buffers_->row_table, std::span<const kernels::RowEntry>(single));
}

void Model::record(Step& s, gpu::Recorder& recorder, gpu::GpuTimer* timer, size_t begin, size_t end) {
  for (size_t i = begin; i < std::min(end, s.entries.size()); ++i) {
    Step::Entry& entry = s.entries[i];
    auto [slot, tokens] = s.segments[entry.segment];
    uint32_t position = positions_[slot];
    if (entry.recorded_if && !entry.recorded_if(position + tokens)) continue;
    if (entry.at_position) entry.at_position(position);
    if (entry.copy)
      recorder.copy(*entry.copy->source, entry.copy->source_offset, *entry.copy->destination,
                    entry.copy->destination_offset, entry.copy->size);
    else if (timer)
      timer->dispatch(recorder, *entry.dispatch->pipeline, entry.dispatch->bind_group, entry.dispatch->grid,
                      entry.label + "|" + entry.dispatch->kernel);
    else
      entry.dispatch->record(recorder);
  }
}

void Model::write_masks(std::span<const TokenMask> masks) {
  const uint32_t words = kernels::token_mask_words(token_count_);
  std::vector<uint32_t> allowed(size_t(words) * masks.size(), 0u);
  // Each row's mask is its own sequence's (a walk of the vocabulary where its state is new): one a core.
  parallel_for(masks.size(), [&](size_t row) {
    std::span<uint32_t> bits = std::span(allowed).subspan(row * words, words);
    if (masks[row])
      masks[row](bits);
    else
      std::fill(bits.begin(), bits.end(), ~0u);  // every id (the kernel reads none past the count)
  });
  device_.write(buffers_->token_mask, std::span<const uint32_t>(allowed));
}

Model::Step& Model::submit_step(std::span<const Segment> segments, Output output, bool products_only) {
  std::vector<std::pair<uint32_t, uint32_t>> shape;
  std::vector<uint32_t> ids;
  for (const Segment& segment : segments) {
    shape.emplace_back(segment.slot, uint32_t(segment.tokens.size()));
    ids.insert(ids.end(), segment.tokens.begin(), segment.tokens.end());
  }
  Step& s = step(shape, output);
  device_.write(buffers_->ids, std::span<const uint32_t>(ids));
  if (s.row_kernels) write_row_table(s);
  gpu::Recorder recorder(device_, "step");
  record(s, recorder, nullptr, 0, products_only ? s.pick : SIZE_MAX);
  recorder.submit();
  return s;
}

std::vector<float> Model::run_step(std::span<const Segment> segments, bool all_logits) {
  discard_speculation();
  Step& s = submit_step(segments, all_logits ? Output::AllLogits : Output::LastLogits);
  auto logits = device_.read_as<float>(buffers_->logits, 0, uint64_t(s.logit_rows) * uint64_t(config_.vocab_size));
  for (const Segment& segment : segments) positions_[segment.slot] += uint32_t(segment.tokens.size());
  return logits;
}

uint32_t Model::decode_greedy(int32_t first, uint32_t max_steps, const std::function<bool(int32_t)>& on_token,
                              uint32_t slot, const TokenMask& mask) {
  return decode_on_gpu(mask ? Output::MaskedGreedyToken : Output::GreedyToken, first, max_steps, on_token, slot, mask);
}

bool Model::sampling_on_gpu(const GpuSampling& s) const {
  return s.temperature > 0 && std::isfinite(1.0f / s.temperature) && token_count_ <= kernels::kMaxSampleCount;
}

void Model::set_sampling(uint32_t slot, const GpuSampling& s) {
  if (slot >= slots()) fail("no KV-cache slot {}: the model has {}", slot, slots());
  // The steps' graphs may already exist: their uniforms follow slot_sampling_ without the kernel seeing it again.
  if (s.argmax()) {  // whatever the vocabulary
    slot_sampling_[slot] = argmax_sampling();
    return;
  }
  if (!sampling_on_gpu(s))
    fail("sampling on the GPU needs a positive temperature with a finite inverse (got {}) and a vocabulary of at "
         "most {} (the model's: {})",
         s.temperature, kernels::kMaxSampleCount, config_.vocab_size);
  kernels::SampleParams settings{token_count_, 0, s.top_k, 0, s.top_p, s.min_p, 1.0f / s.temperature,
                                 uint32_t(s.seed), uint32_t(s.seed >> 32), s.repetition_penalty, s.presence_penalty,
                                 s.frequency_penalty};
  kernels::check_sample_params(settings);
  slot_sampling_[slot] = settings;
}

void Model::write_token_counts(uint32_t slot, const SeenTokens& seen) {
  if (slot >= slots()) fail("no KV-cache slot {}: the model has {}", slot, slots());
  if (!buffers_->token_counts) fail("the GPU sampler takes at most {} ids (the model has {})", kernels::kMaxSampleCount, config_.vocab_size);
  std::vector<uint32_t> counts(size_t(config_.vocab_size), 0);
  auto known = [&](int32_t id) { return id >= 0 && id < config_.vocab_size; };
  for (int32_t id : seen.prompt)
    if (known(id)) counts[size_t(id)] |= kernels::kSeenInPrompt;
  for (int32_t id : seen.generated)
    if (known(id)) ++counts[size_t(id)];
  device_.write(buffers_->token_counts, std::span<const uint32_t>(counts), uint64_t(slot) * counts.size() * 4);
}

uint32_t Model::decode_sampled(int32_t first, uint32_t max_steps, const GpuSampling& s, const SeenTokens& seen,
                               const std::function<bool(int32_t)>& on_token, uint32_t slot, const TokenMask& mask) {
  set_sampling(slot, s);
  // The counts the penalties read: the tokens seen before this call; each step adds its own. Without
  // penalties the kernel's arithmetic leaves every logit as it is, so the counts need not be written.
  if (s.penalized()) write_token_counts(slot, seen);
  return decode_on_gpu(mask ? Output::MaskedSampledToken : Output::SampledToken, first, max_steps, on_token, slot, mask);
}

namespace {

// The read-backs of steps in flight. Dawn holds each read's status as its map callback's userdata, and the ring
// buffers stay mapped until a read is finished: whatever ends the decode loop (a stop, a callback that throws,
// a device error), every read still in flight is waited for and unmapped before the queue goes away, so the
// ring can be mapped again by the next call.
class ReadsInFlight {
 public:
  explicit ReadsInFlight(gpu::Device& device) : device_(device) {}
  ~ReadsInFlight() { drain(); }
  ReadsInFlight(const ReadsInFlight&) = delete;
  ReadsInFlight& operator=(const ReadsInFlight&) = delete;

  void push(gpu::Device::PendingMap read) { reads_.push_back(std::move(read)); }
  size_t size() const { return reads_.size(); }
  bool empty() const { return reads_.empty(); }
  // Waits for the oldest read and returns its bytes.
  std::vector<std::byte> pop() {
    Finished finished{reads_};
    return device_.finish_read(reads_.front());
  }
  // Waits for every read and discards it; a failure of one does not keep the others mapped.
  void drain() noexcept {
    while (!reads_.empty()) {
      try {
        pop();
      } catch (...) {
      }
    }
  }

 private:
  // Removes the front read once finish_read() returns or throws: either way it is no longer pending.
  struct Finished {
    std::deque<gpu::Device::PendingMap>& reads;
    ~Finished() { reads.pop_front(); }
  };
  gpu::Device& device_;
  std::deque<gpu::Device::PendingMap> reads_;
};

}  // namespace

uint32_t Model::decode_on_gpu(Output output, int32_t first, uint32_t max_steps,
                              const std::function<bool(int32_t)>& on_token, uint32_t slot, const TokenMask& mask) {
  check_token_id(config_, first, "first token");
  if (slot >= slots()) fail("no KV-cache slot {}: the model has {}", slot, slots());
  discard_speculation();
  uint32_t& position = positions_[slot];
  max_steps = std::min(max_steps, context_ - position);
  if (max_steps == 0) return 0;
  Step& s = step(1, output, slot);
  Buffers& b = *buffers_;
  const uint32_t start = position;
  uint32_t first_id = uint32_t(first);
  device_.write(b.ids, std::span<const uint32_t>(&first_id, 1));
  // Keep up to `lag` steps queued ahead of the host: enough to hide the read-back round trip. A mask depends on
  // the ids before it: each masked step's pick waits for the last one's id. Its products do not, so they are
  // submitted on their own as soon as the last pick is (they read its id on the GPU), and the host works out
  // the mask while they run; only the pick (Step::pick on) waits for it.
  const size_t lag = mask ? 0 : b.token_ring.size() - 1;
  std::vector<uint32_t> allowed(mask ? kernels::token_mask_words(token_count_) : 0);
  // The next step's products, up to its pick, into `recorder` (an unmasked step records its pick after them in
  // the same submission).
  auto record_products = [&](gpu::Recorder& recorder) {
    std::pair<uint32_t, uint64_t> need{slot, position + 1};
    reserve_blocks(std::span(&need, 1));
    record(s, recorder, nullptr, 0, s.pick);
  };
  auto queue_products = [&] {
    gpu::Recorder recorder(device_, "decode step");
    record_products(recorder);
    recorder.submit();
  };
  uint32_t submitted = 0, produced = 0;
  bool stopped = false, no_token = false;
  {
    // Whatever happens below, the cache ends up holding `first` and the ids before the last one delivered.
    struct KeepDelivered {
      uint32_t& position;
      uint32_t start;
      const uint32_t& produced;
      ~KeepDelivered() { position = start + produced; }
    } keep{position, start, produced};
    ReadsInFlight in_flight(device_);  // destroyed (drained) before `keep` sets the position
    auto collect = [&] {
      auto bytes = in_flight.pop();
      uint32_t id = 0;
      std::memcpy(&id, bytes.data(), 4);
      if (id == kernels::kNoToken) {  // every logit NaN: the steps after it ran on a meaningless id
        no_token = stopped = true;
        return;
      }
      ++produced;
      if (!on_token(int32_t(id))) stopped = true;
    };
    if (mask) queue_products();  // the first step's; each pick queues the next step's
    while (!stopped && (submitted < max_steps || !in_flight.empty())) {
      if (submitted < max_steps && in_flight.size() <= lag) {
        if (mask) {
          std::fill(allowed.begin(), allowed.end(), 0u);
          mask(allowed);
          device_.write(b.token_mask, std::span<const uint32_t>(allowed));
        }
        const gpu::Buffer& ring_slot = b.token_ring[submitted % b.token_ring.size()];
        gpu::Recorder recorder(device_, "decode step");
        if (!mask) record_products(recorder);
        record(s, recorder, nullptr, s.pick);
        recorder.copy(b.ids, 0, ring_slot, 0, 4);
        recorder.submit();
        ++position;
        ++submitted;
        in_flight.push(device_.map_async(ring_slot, 4));
        if (mask && submitted < max_steps) queue_products();
      } else {
        collect();
      }
    }
  }  // steps past a stop: waited for (their buffers must unmap) and discarded
  if (no_token)
    fail("decoding: every logit of the step at position {} is NaN (NaN in the model's weights or activations); "
         "the cache keeps the {} tokens before it",
         position, position);
  return produced;
}

std::vector<gpu::Timing> Model::profile(uint32_t tokens) {
  if (tokens == 0 || positions_[0] + tokens > context_)
    fail("profile: {} tokens at position {} do not fit in the context of {}", tokens, positions_[0], context_);
  if (tokens > chunk_) fail("profile: {} tokens exceed the {} rows of one step (max_chunk)", tokens, chunk_);
  std::pair<uint32_t, uint64_t> need{0, positions_[0] + tokens};
  reserve_blocks(std::span(&need, 1));
  return time_step(step(tokens, tokens == 1 ? Output::GreedyToken : Output::LastLogits, 0));
}

std::vector<gpu::Timing> Model::profile_sampled(const GpuSampling& sampling) {
  if (positions_[0] + 1 > context_) fail("profile_sampled: the context of {} is full", context_);
  set_sampling(0, sampling);
  std::pair<uint32_t, uint64_t> need{0, positions_[0] + 1};
  reserve_blocks(std::span(&need, 1));
  return time_step(step(1, Output::SampledToken, 0));
}

std::vector<gpu::Timing> Model::profile_batch(uint32_t sequences) {
  if (!batchable_) fail("profile_batch: this model's steps cannot batch (can_batch())");
  if (sequences == 0 || sequences > slots())
    fail("profile_batch: {} sequences need as many KV-cache slots; the model has {}", sequences, slots());
  discard_speculation();  // its step would run in between
  std::vector<std::pair<uint32_t, uint32_t>> shape;
  std::vector<std::pair<uint32_t, uint64_t>> needs;
  for (uint32_t slot = 0; slot < sequences; ++slot) {
    if (positions_[slot] + 1 > context_)
      fail("profile_batch: slot {} holds {} tokens, a full context of {}", slot, positions_[slot], context_);
    shape.emplace_back(slot, 1);
    needs.emplace_back(slot, positions_[slot] + 1);
  }
  reserve_blocks(needs);
  Step& s = step(shape, Output::GreedyToken);
  if (s.row_kernels) write_row_table(s);
  return time_step(s);
}

std::vector<gpu::Timing> Model::time_step(Step& s) {
  size_t dispatches = std::count_if(s.entries.begin(), s.entries.end(), [](const auto& e) { return e.dispatch.has_value(); });
  gpu::GpuTimer timer(device_, uint32_t(dispatches));
  gpu::Recorder recorder(device_, "profiled step");
  record(s, recorder, &timer);
  return timer.collect(recorder);
}

std::vector<StepEntry> Model::describe(uint32_t tokens, bool all_logits) {
  Step& s = step(tokens, all_logits ? Output::AllLogits : Output::LastLogits, 0);
  std::vector<StepEntry> out;
  for (const auto& entry : s.entries) {
    if (entry.recorded_if && !entry.recorded_if(positions_[0] + tokens)) continue;
    if (entry.dispatch)
      out.push_back({entry.label, entry.dispatch->kernel, entry.dispatch->shapes, entry.dispatch->grid});
    else
      out.push_back({entry.label, "copy", fmt::format("{} bytes", entry.copy->size), {0, 0, 0}});
  }
  return out;
}

}  // namespace gerbil::graph
