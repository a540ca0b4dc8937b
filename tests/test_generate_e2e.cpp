// Text in, text out through the library API (include/gerbil/gerbil.h), end to end on tiny synthetic
// models that use the real Qwen3 tokenizer (their vocabulary is the tokenizer's, 151669 ids):
//
// - a "scripted" model whose answer is known in advance: a tiny Phi model (it has an LM-head bias) with
//   lm_head.weight zeroed, so its logits are the bias whatever the prompt. The bias ranks the script's
//   ids 100, 99, 98, ...; with greedy sampling and a large presence penalty (a token once seen drops far
//   below the rest) the model says the script's ids in order, then ends with its end-of-sequence id.
//   The script splits "é" and "😀" into single-byte tokens, so streaming must hold back half characters.
// - a random-weight tiny Qwen3 for sampling, seeds, limits and the chat template.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/gerbil.h"
#include "model/safetensors.h"
#include "model/synth.h"
#include "support/paths.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace gerbil {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr int32_t kEos = 2;  // the tiny presets' eos_token_id

fs::path qwen3_tokenizer() { return test::tokenizer_dir("qwen3"); }

// Synthesizes PRESET into DIR with the Qwen3 tokenizer's vocabulary size (plus PADDING logits that no token
// has, as Qwen2.5's and Gemma 3's checkpoints have) and copies the tokenizer files named in FILES beside it.
void make_model(const fs::path& dir, const std::string& preset, const std::vector<std::string>& files,
                int64_t padding = 0) {
  Tokenizer tokenizer = Tokenizer::load(qwen3_tokenizer());
  synth_model(dir, {.preset = preset,
                    .dtype = DType::F32,
                    .seed = 7,
                    .vocab = int64_t(tokenizer.vocab_size()) + padding});
  for (const auto& file : files) fs::copy_file(qwen3_tokenizer() / file, dir / file);
}

// Rewrites DIR/model.safetensors with lm_head.weight all zero and lm_head.bias = BIAS.
void set_logits(const fs::path& dir, const std::vector<float>& bias) {
  fs::path file = dir / "model.safetensors", rewritten = dir / "rewritten.tmp";
  {
    Safetensors tensors = Safetensors::open(file);
    const TensorView& head = tensors.at("lm_head.weight");
    std::vector<float> zeros(size_t(head.numel()), 0.0f);
    std::vector<TensorSource> sources;
    for (const auto& [name, view] : tensors.tensors()) {
      std::span<const std::byte> bytes = view.bytes;
      if (name == "lm_head.weight") bytes = std::as_bytes(std::span(zeros));
      if (name == "lm_head.bias") bytes = std::as_bytes(std::span(bias));
      sources.push_back(tensor_from_bytes(name, view.dtype, view.shape, bytes));
    }
    write_safetensors(rewritten, sources);
  }
  fs::rename(rewritten, file);
}

// The id of the single-byte token for BYTE (Qwen's byte-level vocabulary has all 256).
int32_t byte_token(const Tokenizer& tokenizer, uint8_t byte) {
  auto id = tokenizer.token_id(tok::ByteLevelAlphabet::get().encode(byte));
  if (!id) throw std::runtime_error("no single-byte token");
  return *id;
}

// "The gerbil said é😀 and stopped.", with é and 😀 as single-byte tokens, then end of sequence.
std::vector<int32_t> script_ids(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids = tokenizer.encode("The gerbil said");
  ids.push_back(tokenizer.encode(" ").at(0));
  for (uint8_t byte : std::string_view("\xC3\xA9\xF0\x9F\x98\x80"))
    ids.push_back(byte_token(tokenizer, byte));
  for (int32_t id : tokenizer.encode(" and stopped.")) ids.push_back(id);
  ids.push_back(kEos);
  return ids;
}

constexpr std::string_view kScriptText = "The gerbil said \xC3\xA9\xF0\x9F\x98\x80 and stopped.";

class Models {
 public:
  static Models& get() {
    static Models models;
    return models;
  }

  Engine& scripted() { return *scripted_; }
  Engine& random() { return *random_; }
  const std::vector<int32_t>& script() const { return script_; }
  const std::vector<std::pair<uint64_t, uint64_t>>& progress() const { return progress_; }
  const fs::path& dir() const { return dir_; }

  ~Models() { fs::remove_all(dir_); }

 private:
  Models() : dir_(fs::temp_directory_path() / ("gerbil-test-generate-" + std::to_string(getpid()))) {
    fs::remove_all(dir_);
    Tokenizer tokenizer = Tokenizer::load(qwen3_tokenizer());
    script_ = script_ids(tokenizer);
    if (std::set<int32_t>(script_.begin(), script_.end()).size() != script_.size())
      throw std::runtime_error("the script must not repeat a token");
    std::vector<float> bias(tokenizer.vocab_size(), 0.0f);
    for (size_t k = 0; k < script_.size(); ++k) bias[size_t(script_[k])] = 100.0f - float(k);

    make_model(dir_ / "scripted", "tiny-phi", {"tokenizer.json", "tokenizer_config.json"});
    set_logits(dir_ / "scripted", bias);
    EngineOptions options{.context = 64};
    options.progress = [this](uint64_t done, uint64_t total) { progress_.emplace_back(done, total); };
    scripted_ = std::make_unique<Engine>(dir_ / "scripted", options);

    make_model(dir_ / "random", "tiny-qwen3", {"tokenizer.json", "tokenizer_config.json"});
    random_ = std::make_unique<Engine>(dir_ / "random", EngineOptions{.context = 48});
  }

  fs::path dir_;
  std::vector<int32_t> script_;
  std::vector<std::pair<uint64_t, uint64_t>> progress_;
  std::unique_ptr<Engine> scripted_, random_;
};

class Generate : public ::testing::Test {
 protected:
  void SetUp() override { GERBIL_REQUIRE_PATH(qwen3_tokenizer() / "tokenizer.json", "run scripts/setup.sh"); }
};

// Greedy, and every token once: the scripted model's answer is its script.
CompletionOptions script_options() {
  CompletionOptions options;
  options.sampling.temperature = 0;
  options.sampling.presence_penalty = 1000;
  options.max_new_tokens = 100;
  return options;
}

struct Streamed {
  Completion completion;
  std::vector<std::string> pieces;
};

Streamed stream(Engine& engine, std::string_view prompt, const CompletionOptions& options) {
  Streamed out;
  out.completion = engine.complete(prompt, options, [&](std::string_view piece) {
    out.pieces.emplace_back(piece);
    return true;
  });
  return out;
}

std::string joined(const std::vector<std::string>& pieces) {
  std::string text;
  for (const auto& piece : pieces) text += piece;
  return text;
}

void expect_valid_pieces(const Streamed& s) {
  for (size_t i = 0; i < s.pieces.size(); ++i) {
    EXPECT_FALSE(s.pieces[i].empty()) << "piece " << i;
    EXPECT_EQ(tok::find_invalid_utf8(s.pieces[i]), tok::npos) << "piece " << i << " '" << s.pieces[i] << "'";
  }
  EXPECT_EQ(joined(s.pieces), s.completion.text);
}

TEST_F(Generate, TheScriptedModelSaysItsScript) {
  Models& m = Models::get();
  Streamed s = stream(m.scripted(), "Q?", script_options());
  EXPECT_EQ(s.completion.text, kScriptText);
  std::vector<int32_t> expected(m.script().begin(), m.script().end() - 1);  // the eos id is not an output
  EXPECT_EQ(s.completion.tokens, expected);
  EXPECT_EQ(s.completion.stop_reason, StopReason::EndOfSequence);
  EXPECT_EQ(stop_reason_name(s.completion.stop_reason), "eos");
  EXPECT_EQ(s.completion.stats.generated_tokens, expected.size());
  EXPECT_EQ(s.completion.stats.prompt_tokens, m.scripted().tokenize("Q?").size());
}

TEST_F(Generate, StreamedPiecesAreWholeCharactersEvenWhenTokensSplitThem) {
  Models& m = Models::get();
  Streamed s = stream(m.scripted(), "Q?", script_options());
  expect_valid_pieces(s);
  // The tokens of é (2 bytes) and 😀 (4 bytes) are single bytes; their pieces carry whole characters.
  EXPECT_THAT(s.pieces, ::testing::Contains("\xC3\xA9"));
  EXPECT_THAT(s.pieces, ::testing::Contains("\xF0\x9F\x98\x80"));
  EXPECT_LT(s.pieces.size(), s.completion.tokens.size());  // the half characters gave no pieces
}

TEST_F(Generate, StopStringsCutTheTextBeforeTheirFirstOccurrence) {
  Models& m = Models::get();
  const std::string full(kScriptText);
  // Within a token, across tokens, the split characters themselves, a prefix of the text.
  for (std::string stop :
       {"gerbil", "l s", "\xC3\xA9", "\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80 a", " and", "The", "."}) {
    CompletionOptions options = script_options();
    options.stop = {stop};
    Streamed s = stream(m.scripted(), "Q?", options);
    EXPECT_EQ(s.completion.text, full.substr(0, full.find(stop))) << "stop '" << stop << "'";
    EXPECT_EQ(s.completion.text.find(stop), std::string::npos) << "stop '" << stop << "'";
    EXPECT_EQ(s.completion.stop_reason, StopReason::StopString) << "stop '" << stop << "'";
    expect_valid_pieces(s);
  }
}

TEST_F(Generate, TheEarliestOfSeveralStopStringsWins) {
  CompletionOptions options = script_options();
  options.stop = {"stopped", "said", "zzz"};
  Completion c = Models::get().scripted().complete("Q?", options);
  EXPECT_EQ(c.text, "The gerbil ");
  EXPECT_EQ(c.stop_reason, StopReason::StopString);
}

TEST_F(Generate, AStopStringThatNeverCompletesHoldsNothingBack) {
  // Each of these begins to match somewhere ("é😀" then not "!", "stopped" then not "!") and must be
  // released in full once it cannot match any more, or at the end.
  CompletionOptions options = script_options();
  options.stop = {"\xC3\xA9\xF0\x9F\x98\x80!", "stopped.!", "The gerbil said no"};
  Streamed s = stream(Models::get().scripted(), "Q?", options);
  EXPECT_EQ(s.completion.text, kScriptText);
  EXPECT_EQ(s.completion.stop_reason, StopReason::EndOfSequence);
  expect_valid_pieces(s);
}

TEST_F(Generate, MaxNewTokensEndsWithMaxTokens) {
  Models& m = Models::get();
  CompletionOptions options = script_options();
  options.max_new_tokens = 5;
  Completion c = m.scripted().complete("Q?", options);
  EXPECT_EQ(c.stop_reason, StopReason::MaxTokens);
  ASSERT_EQ(c.tokens.size(), 5u);
  EXPECT_EQ(c.text, m.scripted().detokenize(c.tokens));
  EXPECT_TRUE(std::equal(c.tokens.begin(), c.tokens.end(), m.script().begin()));
}

TEST_F(Generate, ACallbackReturningFalseCancels) {
  Models& m = Models::get();
  std::vector<std::string> pieces;
  Completion c = m.scripted().complete("Q?", script_options(), [&](std::string_view piece) {
    pieces.emplace_back(piece);
    return pieces.size() < 2;
  });
  EXPECT_EQ(c.stop_reason, StopReason::Cancelled);
  EXPECT_EQ(pieces.size(), 2u);
  EXPECT_EQ(c.text, joined(pieces));
  // The script starts with plain words: one piece per token.
  std::vector<int32_t> said(m.script().begin(), m.script().begin() + 2);
  EXPECT_EQ(c.tokens, said);
  EXPECT_EQ(c.text, m.scripted().detokenize(said));
}

TEST_F(Generate, TheCancelFlagStopsAfterTheCurrentToken) {
  Models& m = Models::get();
  std::atomic<bool> cancel{false};
  size_t pieces = 0;
  Completion c = m.scripted().complete(
      "Q?", script_options(),
      [&](std::string_view) {
        if (++pieces == 3) cancel = true;  // as another thread or a signal handler would
        return true;
      },
      &cancel);
  EXPECT_EQ(c.stop_reason, StopReason::Cancelled);
  EXPECT_EQ(pieces, 3u);
  std::vector<int32_t> said(m.script().begin(), m.script().begin() + 3);
  EXPECT_EQ(c.tokens, said);
  EXPECT_EQ(c.text, m.scripted().detokenize(said));
}

TEST_F(Generate, TheContextLimitEndsWithContextFull) {
  Models& m = Models::get();
  CompletionOptions options = script_options();
  std::vector<int32_t> prompt(60, m.scripted().tokenize("?").at(0));  // context 64
  Completion c = m.scripted().complete(std::span<const int32_t>(prompt), options);
  EXPECT_EQ(c.stop_reason, StopReason::ContextFull);
  // The last token needs no cache slot: the cache ends full with prompt + all but the last token.
  EXPECT_EQ(c.tokens.size(), 64u - 60u + 1u);
  EXPECT_TRUE(std::equal(c.tokens.begin(), c.tokens.end(), m.script().begin()));
}

TEST_F(Generate, WeightLoadingReportsProgressToTheTotal) {
  Models& m = Models::get();
  const auto& calls = m.progress();
  ASSERT_GE(calls.size(), 3u);  // start, globals, each of the 2 layers
  uint64_t total = Safetensors::open(m.dir() / "scripted").total_bytes();
  EXPECT_EQ(calls.front().first, 0u);
  EXPECT_EQ(calls.back().first, total);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, total);
    if (i > 0) {
      EXPECT_GE(calls[i].first, calls[i - 1].first);
    }
  }
}

TEST_F(Generate, SameSeedSameTextDifferentSeedDifferentText) {
  Engine& engine = Models::get().random();
  CompletionOptions options;
  options.max_new_tokens = 12;
  options.ignore_eos = true;
  auto text_for = [&](uint64_t seed) {
    options.sampling.seed = seed;
    engine.reset();  // compute the prompt afresh each time
    Completion c = engine.complete("Once upon a time", options);
    EXPECT_EQ(c.seed, seed);
    EXPECT_EQ(c.tokens.size(), 12u);
    return c.tokens;
  };
  auto first = text_for(11);
  EXPECT_EQ(text_for(11), first);
  EXPECT_NE(text_for(12), first);
}

// With top-k and no penalties the tokens are drawn on the GPU (graph::Model::decode_sampled): the same seed
// gives the same tokens (GPU draws hash seed and position, so not the host sampler's tokens), and top_k 1
// is greedy decoding.
TEST_F(Generate, TopKSamplingOnTheGpuRepeatsWithItsSeedAndTopOneIsGreedy) {
  Engine& engine = Models::get().random();
  CompletionOptions options;
  options.max_new_tokens = 16;
  options.ignore_eos = true;
  options.sampling.top_k = 20;
  options.sampling.top_p = 0.9f;
  options.sampling.temperature = 1.5f;
  auto tokens_for = [&](uint64_t seed) {
    options.sampling.seed = seed;
    engine.reset();
    return engine.complete("Once upon a time", options).tokens;
  };
  auto first = tokens_for(21);
  ASSERT_EQ(first.size(), 16u);
  EXPECT_EQ(tokens_for(21), first);
  EXPECT_NE(tokens_for(22), first);
  options.sampling.top_k = 1;
  auto top_one = tokens_for(21);
  options.sampling.temperature = 0;
  EXPECT_EQ(tokens_for(21), top_one);
}

TEST_F(Generate, RandomTextStreamsAsValidUtf8ThatMatchesTheFullDecode) {
  Engine& engine = Models::get().random();
  CompletionOptions options;
  options.max_new_tokens = 40;
  options.ignore_eos = true;
  options.sampling.seed = 3;
  Streamed s = stream(engine, "Hello", options);
  ASSERT_EQ(s.completion.tokens.size(), 40u);
  expect_valid_pieces(s);
  EXPECT_EQ(s.completion.text, engine.detokenize(s.completion.tokens, /*skip_special_tokens=*/true));
  EXPECT_EQ(s.completion.stop_reason, StopReason::MaxTokens);
}

// Plain greedy decoding keeps the token on the GPU and queues steps ahead; when the answer stops early
// the steps in flight must be dropped, so that the next turn continues from a consistent cache.
TEST_F(Generate, AGreedyAnswerStoppedEarlyContinuesExactlyFromTheCache) {
  Engine& engine = Models::get().random();
  CompletionOptions greedy;
  greedy.sampling.temperature = 0;
  greedy.ignore_eos = true;
  greedy.max_new_tokens = 10;
  std::vector<int32_t> prompt = engine.tokenize("The cat sat on the mat");
  engine.reset();
  std::vector<int32_t> whole = engine.complete(std::span<const int32_t>(prompt), greedy).tokens;
  ASSERT_EQ(whole.size(), 10u);

  engine.reset();
  size_t pieces = 0;
  Completion stopped =
      engine.complete(std::span<const int32_t>(prompt), greedy, [&](std::string_view) { return ++pieces < 3; });
  ASSERT_EQ(stopped.stop_reason, StopReason::Cancelled);
  size_t k = stopped.tokens.size();
  ASSERT_LT(k, whole.size());
  EXPECT_TRUE(std::equal(stopped.tokens.begin(), stopped.tokens.end(), whole.begin()));

  std::vector<int32_t> next = prompt;
  next.insert(next.end(), stopped.tokens.begin(), stopped.tokens.end());
  greedy.max_new_tokens = uint32_t(whole.size() - k);
  Completion rest = engine.complete(std::span<const int32_t>(next), greedy);
  EXPECT_EQ(rest.stats.cached_tokens, next.size() - 1);  // all but the last answer token
  EXPECT_EQ(rest.stats.prompt_tokens, next.size());
  EXPECT_EQ(rest.tokens, std::vector<int32_t>(whole.begin() + std::ptrdiff_t(k), whole.end()));
}

// Without penalties the scripted model's greedy answer is its first token over and over ("TheTheThe...").
TEST_F(Generate, GreedyDecodingOnTheGpuStopsExactly) {
  Models& m = Models::get();
  int32_t the = m.script().front();
  CompletionOptions greedy;
  greedy.sampling.temperature = 0;
  greedy.max_new_tokens = 7;
  Streamed s = stream(m.scripted(), "Q?", greedy);
  EXPECT_EQ(s.completion.tokens, std::vector<int32_t>(7, the));
  EXPECT_EQ(s.completion.text, "TheTheTheTheTheTheThe");
  EXPECT_EQ(s.completion.stop_reason, StopReason::MaxTokens);
  expect_valid_pieces(s);

  greedy.max_new_tokens = 100;
  greedy.stop = {"eTh"};
  s = stream(m.scripted(), "Q?", greedy);
  EXPECT_EQ(s.completion.text, "Th");
  EXPECT_EQ(s.completion.tokens.size(), 2u);
  EXPECT_EQ(s.completion.stop_reason, StopReason::StopString);
  expect_valid_pieces(s);

  greedy.stop = {};
  std::vector<int32_t> prompt(60, m.scripted().tokenize("?").at(0));  // context 64
  Completion full = m.scripted().complete(std::span<const int32_t>(prompt), greedy);
  EXPECT_EQ(full.stop_reason, StopReason::ContextFull);
  EXPECT_EQ(full.tokens, std::vector<int32_t>(64 - 60 + 1, the));
}

TEST_F(Generate, TheChatTemplateRendersAndGenerationRunsOnIt) {
  Engine& engine = Models::get().random();
  ASSERT_TRUE(engine.has_chat_template());
  std::string prompt = engine.apply_chat_template({{"system", "Be brief."}, {"user", "hi"}});
  EXPECT_EQ(
      prompt,
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(engine.apply_chat_template({{"user", "hi"}}, true, R"({"enable_thinking": false})"),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(engine.apply_chat_template_json(
                R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])"),
            prompt);
  std::vector<int32_t> ids = engine.tokenize(prompt);
  EXPECT_EQ(ids.front(), 151644);  // <|im_start|> is one special token
  CompletionOptions options;
  options.max_new_tokens = 6;
  options.sampling.seed = 5;
  engine.reset();
  Completion c = engine.complete(prompt, options);
  EXPECT_EQ(c.stats.prompt_tokens, ids.size());
  EXPECT_GT(c.stats.generated_tokens, 0u);
  EXPECT_GT(c.stats.prefill_tokens_per_second, 0.0);
  EXPECT_GT(c.stats.time_to_first_token, 0.0);
}

TEST_F(Generate, BadInputsAreClearErrors) {
  Engine& engine = Models::get().random();
  EXPECT_THAT([&] { engine.complete("ok \xFF then", {}); },
              ThrowsMessage<Error>(HasSubstr("not valid UTF-8: byte 0xFF at offset 3")));
  EXPECT_THAT([&] { engine.complete("", {}); }, ThrowsMessage<Error>(HasSubstr("empty")));
  EXPECT_THAT([&] { engine.apply_chat_template_json(R"({"role": "user"})"); },
              ThrowsMessage<Error>(HasSubstr("must be a JSON array")));
  EXPECT_THAT([&] { engine.apply_chat_template_json(R"([{"content": "hi"}])"); },
              ThrowsMessage<Error>(HasSubstr("chat message 0: field 'role' is missing")));
  EXPECT_THAT([&] { engine.apply_chat_template_json(R"([{"role": "user", "content": 3}])"); },
              ThrowsMessage<Error>(HasSubstr("chat message 0: field 'content'")));
  EXPECT_THAT([&] { engine.apply_chat_template_json("[{"); },
              ThrowsMessage<Error>(HasSubstr("chat messages: invalid JSON")));
  std::vector<ChatMessage> hi = {{"user", "hi"}};
  EXPECT_THAT([&] { engine.apply_chat_template(hi, true, "[1]"); },
              ThrowsMessage<Error>(HasSubstr("variables must be a JSON object")));
  CompletionOptions bad_sampling;
  bad_sampling.sampling.top_p = 0;
  EXPECT_THAT([&] { engine.complete("hi", bad_sampling); }, ThrowsMessage<Error>(HasSubstr("top_p")));
  CompletionOptions empty_stop;
  empty_stop.stop = {""};
  EXPECT_THAT([&] { engine.complete("hi", empty_stop); },
              ThrowsMessage<Error>(HasSubstr("stop strings must not be empty")));
  std::vector<int32_t> too_long(48, 100);  // context 48
  EXPECT_THAT([&] { engine.complete(std::span<const int32_t>(too_long), {}); },
              ThrowsMessage<Error>(HasSubstr("the context holds 48")));
}

TEST_F(Generate, AModelFolderWithoutATokenizerIsRefused) {
  fs::path dir = Models::get().dir() / "no-tokenizer";
  synth_model(dir, {.preset = "tiny-qwen3"});
  EXPECT_THAT([&] { Engine engine(dir); },
              ThrowsMessage<Error>(HasSubstr(dir.string() + ": no tokenizer.json")));
}

TEST_F(Generate, AMissingModelFolderIsNamed) {
  fs::path dir = Models::get().dir() / "absent";
  EXPECT_THAT([&] { Engine engine(dir); },
              ThrowsMessage<Error>(HasSubstr(dir.string() + ": no such model folder")));
}

TEST_F(Generate, AModelWithoutAChatTemplateSaysSo) {
  fs::path dir = Models::get().dir() / "no-template";
  make_model(dir, "tiny-qwen3", {"tokenizer.json"});
  Engine engine(dir, {.context = 16});
  EXPECT_FALSE(engine.has_chat_template());
  std::vector<ChatMessage> hi = {{"user", "hi"}};
  EXPECT_THAT([&] { engine.apply_chat_template(hi); }, ThrowsMessage<Error>(HasSubstr("no chat template")));
  // Raw text still works.
  CompletionOptions options;
  options.max_new_tokens = 2;
  options.ignore_eos = true;
  EXPECT_EQ(engine.complete("hi", options).tokens.size(), 2u);
}

}  // namespace
}  // namespace gerbil

namespace gerbil {
namespace {

// A stream callback that throws on its third piece: the exception reaches the caller, and the engine's next
// completion is what it was before (the read-backs in flight were drained and unmapped, the cache kept
// consistent). Then a completion cancelled through the flag, and the same again.
TEST_F(Generate, AThrowingCallbackOrACancelLeavesTheEngineUsable) {
  Models& m = Models::get();
  Completion before = m.scripted().complete("Q?", script_options());
  int pieces = 0;
  EXPECT_THROW(m.scripted().complete("Q?", script_options(),
                                     [&](std::string_view) -> bool {
                                       if (++pieces == 3) throw std::runtime_error("callback failed");
                                       return true;
                                     }),
               std::runtime_error);
  EXPECT_EQ(pieces, 3);
  std::atomic<bool> cancel{false};
  Completion cancelled = m.scripted().complete("Q?", script_options(), [&](std::string_view) {
    cancel = true;
    return true;
  }, &cancel);
  EXPECT_EQ(cancelled.stop_reason, StopReason::Cancelled);
  Completion after = m.scripted().complete("Q?", script_options());
  EXPECT_EQ(after.tokens, before.tokens);
  EXPECT_EQ(after.text, kScriptText);
}

TEST_F(Generate, ZeroNewTokensGenerateNothing) {
  CompletionOptions options = script_options();
  options.max_new_tokens = 0;
  int pieces = 0;
  Completion c = Models::get().scripted().complete("Q?", options, [&](std::string_view) { return ++pieces, true; });
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_EQ(c.text, "");
  EXPECT_EQ(c.stop_reason, StopReason::MaxTokens);
  EXPECT_EQ(pieces, 0);
}

// A model with 64 logits past the tokenizer's vocabulary, all far above the real ones: greedy, sampled on the
// GPU (top-k off) and sampled on the host (top-k beyond the GPU sampler's) never draw one of them.
TEST_F(Generate, LogitsPastTheTokenizerAreNeverDrawn) {
  Models& m = Models::get();
  Tokenizer tokenizer = Tokenizer::load(qwen3_tokenizer());
  size_t vocab = tokenizer.vocab_size();
  fs::path dir = m.dir() / "padded";
  make_model(dir, "tiny-phi", {"tokenizer.json", "tokenizer_config.json"}, 64);
  std::vector<float> bias(vocab + 64, 0.0f);
  std::fill(bias.begin() + std::ptrdiff_t(vocab), bias.end(), 50.0f);
  set_logits(dir, bias);
  Engine engine(dir, EngineOptions{.context = 64});
  for (int32_t top_k : {-1, 0, 1000}) {
    CompletionOptions options;
    options.sampling.temperature = top_k < 0 ? 0.0f : 1.5f;
    options.sampling.top_k = std::max(top_k, 0);
    options.sampling.seed = 3;
    options.max_new_tokens = 24;
    options.ignore_eos = true;
    Completion c = engine.complete("Q?", options);
    EXPECT_EQ(c.tokens.size(), 24u) << "top_k " << top_k;
    for (int32_t id : c.tokens) EXPECT_LT(size_t(id), vocab) << "top_k " << top_k;
  }
}

}  // namespace
}  // namespace gerbil
