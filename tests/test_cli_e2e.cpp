// The gerbil CLI run as a user runs it (the built binary, through a shell): synth with a real tokenizer, then
// run, chat (through a pipe), template, tokenize, logits and graph, each checked against an independent
// result: transformers' references in the fixtures, or another command computing the same thing another way.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "test_model_support.h"

namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;
using testing::Not;

struct Outcome {
  int status;
  std::string out, err;
};

std::string shell_quoted(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `gerbil ARGUMENTS` with INPUT on its stdin; stdout and stderr come back apart.
Outcome gerbil(const std::string& arguments, const std::string& input = "", const std::string& env = "") {
  gerbil::test::ScratchDir scratch;
  fs::path in = scratch.path() / "in", err = scratch.path() / "err";
  std::ofstream(in, std::ios::binary) << input;
  std::string command = env + " " + std::string(GERBIL_BINARY_DIR) + "/gerbil " + arguments + " < " +
                        shell_quoted(in.string()) + " 2> " + shell_quoted(err.string());
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "", "popen failed"};
  std::string out;
  std::array<char, 4096> chunk;
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), pipe)) out.append(chunk.data(), n);
  int status = pclose(pipe);
  return {status, out, gerbil::test::read_text(err)};
}

std::string write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return shell_quoted(path.string());
}

std::vector<int32_t> ids_of(const std::string& json_array) {
  return nlohmann::json::parse(json_array).get<std::vector<int32_t>>();
}

std::string joined(const std::vector<int32_t>& ids) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) text += (i ? "," : "") + std::to_string(ids[i]);
  return text;
}

std::vector<float> read_f32(const fs::path& path) {
  std::string bytes = gerbil::test::read_text(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// The statistics lines of run and chat: "[P prompt tokens (C computed), ...]".
struct TurnStats {
  int prompt, computed;
};
std::vector<TurnStats> turn_stats(const std::string& err) {
  std::vector<TurnStats> turns;
  std::regex line(R"(\[(\d+) prompt tokens \((\d+) computed\))");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator(); ++it)
    turns.push_back({std::stoi((*it)[1]), std::stoi((*it)[2])});
  return turns;
}

// One random-weight tiny Qwen3 with Qwen3's real tokenizer and chat template, written once by `gerbil synth`.
class SynthesizedQwen : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(gerbil::test::tokenizer_dir("qwen3"))) return;
    dir_ = new gerbil::test::ScratchDir;
    synth_ = new Outcome(gerbil("synth --preset tiny-qwen3 --seed 3 --tokenizer qwen3 --out " + model()));
  }
  static void TearDownTestSuite() {
    delete synth_;
    delete dir_;
  }
  void SetUp() override {
    GERBIL_REQUIRE_PATH(gerbil::test::tokenizer_dir("qwen3"), "scripts/setup.sh fetches the tokenizer packages");
    ASSERT_EQ(synth_->status, 0) << synth_->err;
  }
  static std::string model() { return shell_quoted(dir_->path().string()); }
  static const fs::path& path() { return dir_->path(); }

  static inline gerbil::test::ScratchDir* dir_ = nullptr;
  static inline Outcome* synth_ = nullptr;
};

TEST_F(SynthesizedQwen, SynthPutsTheTokenizerBesideTheWeightsAndFitsTheConfigToIt) {
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "config.json", "model.safetensors"})
    EXPECT_TRUE(fs::exists(path() / file)) << file;
  auto config = nlohmann::json::parse(gerbil::test::read_text(path() / "config.json"));
  auto generation = nlohmann::json::parse(gerbil::test::read_text(path() / "generation_config.json"));
  // The tokenizer's ids, asked of the tokenizer package itself: the highest added token and the EOS.
  Outcome last = gerbil("tokenize --tokenizer " + shell_quoted(gerbil::test::tokenizer_dir("qwen3").string()) +
                        " --text '<|im_end|></tool_response>'");
  ASSERT_EQ(last.status, 0) << last.err;
  std::vector<int32_t> ids = ids_of(last.out);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(config["eos_token_id"], ids[0]);
  EXPECT_EQ(generation["eos_token_id"], ids[0]);
  EXPECT_FALSE(config.contains("bos_token_id")) << "Qwen3's tokenizer has no BOS";
  EXPECT_GT(config["vocab_size"].get<int64_t>(), ids[1]);
  EXPECT_EQ(config["vocab_size"], 151669);  // Qwen3's ids: 151,643 tokens and 26 added ones

  Outcome small = gerbil("synth --preset tiny-qwen3 --tokenizer qwen3 --vocab 1000 --out " +
                         shell_quoted((path() / "small").string()));
  EXPECT_NE(small.status, 0);
  EXPECT_THAT(small.err, HasSubstr("--vocab 1000 is smaller than the 151669 ids of tokenizer qwen3"));
  Outcome unknown = gerbil("synth --preset tiny-qwen3 --tokenizer qwen9 --out " + shell_quoted((path() / "x").string()));
  EXPECT_NE(unknown.status, 0);
  EXPECT_THAT(unknown.err, HasSubstr("--tokenizer qwen9: no such folder"));
  EXPECT_THAT(unknown.err, HasSubstr("qwen3"));
}

// `run` (text in, text out through the Engine) against the checking commands doing each step apart: the
// chat template rendered, tokenized, generated as ids, detokenized.
TEST_F(SynthesizedQwen, RunGivesTheTextOfGenerateOnTheSameIds) {
  gerbil::test::ScratchDir scratch;
  std::string messages =
      write_file(scratch.path() / "messages.json", R"([{"role": "user", "content": "Why is the sky blue?"}])");
  Outcome prompt = gerbil("template --model " + model() + " --messages " + messages + " --add-generation-prompt");
  ASSERT_EQ(prompt.status, 0) << prompt.err;
  EXPECT_EQ(prompt.out, "<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n");
  std::string prompt_file = write_file(scratch.path() / "prompt.txt", prompt.out);
  Outcome tokens = gerbil("tokenize --tokenizer " + model() + " --text-file " + prompt_file);
  ASSERT_EQ(tokens.status, 0) << tokens.err;

  const std::string sampling = " --greedy --ignore-eos -n 12";
  Outcome generated = gerbil("generate --model " + model() + " --tokens " + joined(ids_of(tokens.out)) + sampling);
  ASSERT_EQ(generated.status, 0) << generated.err;
  Outcome text = gerbil("detokenize --tokenizer " + model() + " --ids " + generated.out.substr(0, generated.out.size() - 1));
  ASSERT_EQ(text.status, 0) << text.err;
  ASSERT_FALSE(text.out.empty());

  Outcome run = gerbil("run --model " + model() + sampling + " 'Why is the sky blue?'");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, text.out + "\n");
  std::vector<TurnStats> stats = turn_stats(run.err);
  ASSERT_EQ(stats.size(), 1u) << run.err;
  EXPECT_EQ(size_t(stats[0].prompt), ids_of(tokens.out).size());
  EXPECT_THAT(run.err, HasSubstr("12 generated"));
}

TEST_F(SynthesizedQwen, ChatThroughAPipeReusesTheCacheOnTheSecondTurn) {
  Outcome chat = gerbil("chat --model " + model() + " --greedy --ignore-eos -n 4", "Hello\n/bogus\nTell me more\n");
  ASSERT_EQ(chat.status, 0) << chat.err;
  EXPECT_THAT(chat.out, HasSubstr("> Hello\n"));
  EXPECT_THAT(chat.out, HasSubstr("unknown command /bogus"));
  EXPECT_THAT(chat.out, HasSubstr("> Tell me more\n"));
  std::vector<TurnStats> turns = turn_stats(chat.err);
  ASSERT_EQ(turns.size(), 2u) << chat.err;
  EXPECT_EQ(turns[0].computed, turns[0].prompt);
  // The second prompt holds the whole first turn; only what follows the cached part is computed.
  EXPECT_GT(turns[1].prompt, turns[0].prompt + 4);
  EXPECT_LE(turns[1].computed, turns[1].prompt - turns[0].prompt);
  EXPECT_GT(turns[1].computed, 0);
}

// Ctrl-C while `run` answers (here during a prompt prefilled one token per step, then the decoding) stops the
// answer, and the command ends normally with the stop reason cancelled.
TEST_F(SynthesizedQwen, InterruptStopsTheAnswerAndTheCommandCarriesOn) {
  gerbil::test::ScratchDir scratch;
  std::string prompt;
  for (int i = 0; i < 25; ++i) prompt += "the sky is blue because ";  // ~130 of the 256 positions
  fs::path err = scratch.path() / "err";
  std::string script = "'" + std::string(GERBIL_BINARY_DIR) + "/gerbil' run --model " + model() +
                       " --max-prefill-chunk 1 --greedy --ignore-eos -n 100000 '" + prompt + "' > /dev/null 2> " +
                       shell_quoted(err.string()) + " & pid=$!; " + "while ! grep -q '^loaded' " +
                       shell_quoted(err.string()) + "; do sleep 0.1; done; sleep 0.5; kill -INT $pid; wait $pid; echo $?";
  FILE* pipe = popen(("sh -c " + shell_quoted(script)).c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 64> status{};
  std::fread(status.data(), 1, status.size() - 1, pipe);
  pclose(pipe);
  std::string log = gerbil::test::read_text(err);
  EXPECT_EQ(std::string(status.data()), "0\n") << log;
  EXPECT_THAT(log, HasSubstr("finish: cancelled"));
}

TEST(CliE2e, TemplateRendersAsTransformers) {
  GERBIL_REQUIRE_FIXTURES();
  GERBIL_REQUIRE_PATH(gerbil::test::tokenizer_dir("qwen3"), "scripts/setup.sh fetches the tokenizer packages");
  auto cases = nlohmann::json::parse(
      gerbil::test::read_text(gerbil::test::fixtures_dir() / "tokenizers/qwen3/chat_template_ref.json"));
  gerbil::test::ScratchDir scratch;
  int checked = 0;
  for (const auto& c : cases) {
    if (!c["template_kwargs"].empty()) continue;
    std::string messages = write_file(scratch.path() / "messages.json", c["messages"].dump());
    Outcome out = gerbil("template --model " + shell_quoted(gerbil::test::tokenizer_dir("qwen3").string()) + " --messages " +
                         messages + (c["add_generation_prompt"].get<bool>() ? " --add-generation-prompt" : ""));
    ASSERT_EQ(out.status, 0) << c["name"] << ": " << out.err;
    EXPECT_EQ(out.out, c["text"].get<std::string>()) << c["name"];
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(CliE2e, TokenizeMatchesTransformers) {
  GERBIL_REQUIRE_FIXTURES();
  GERBIL_REQUIRE_PATH(gerbil::test::tokenizer_dir("qwen3"), "scripts/setup.sh fetches the tokenizer packages");
  auto cases = nlohmann::json::parse(
      gerbil::test::read_text(gerbil::test::fixtures_dir() / "tokenizers/qwen3/tokenizer_ref.json"));
  gerbil::test::ScratchDir scratch;
  for (size_t i = 0; i < 4 && i < cases.size(); ++i) {
    std::string text = write_file(scratch.path() / "text.txt", cases[i]["text"].get<std::string>());
    Outcome out = gerbil("tokenize --tokenizer " + shell_quoted(gerbil::test::tokenizer_dir("qwen3").string()) +
                         " --text-file " + text);
    ASSERT_EQ(out.status, 0) << out.err;
    EXPECT_EQ(ids_of(out.out), cases[i]["ids"].get<std::vector<int32_t>>()) << cases[i]["text"];
  }
}

// `logits` takes the fixture's input_ids.json as it is (a JSON array) and matches transformers' float64
// logits within the bound the fixture tests hold f32 checkpoints to.
TEST(CliE2e, LogitsMatchTheFixtureReference) {
  GERBIL_REQUIRE_FIXTURES();
  fs::path fixture = gerbil::test::fixtures_dir() / "qwen2-tiny";
  gerbil::test::ScratchDir scratch;
  fs::path out = scratch.path() / "logits.f32";
  std::string ids = gerbil::test::read_text(fixture / "ref/input_ids.json");
  Outcome run = gerbil("logits --model " + shell_quoted(fixture.string()) + " --tokens " + shell_quoted(ids) + " --out " +
                       shell_quoted(out.string()));
  ASSERT_EQ(run.status, 0) << run.err;
  std::vector<float> got = read_f32(out), want = read_f32(fixture / "ref/logits.f32");
  size_t positions = ids_of(ids).size();
  ASSERT_EQ(got.size(), want.size());
  size_t vocab = want.size() / positions;
  for (size_t t = 0; t < positions; ++t) {
    double diff = 0, norm = 0;
    for (size_t v = t * vocab; v < (t + 1) * vocab; ++v) {
      diff += (double(got[v]) - want[v]) * (double(got[v]) - want[v]);
      norm += double(want[v]) * want[v];
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-4) << "position " << t;
  }
}

// Every command that takes a model or tokenizer takes a GGUF file llama.cpp made (Q8_0 blocks, its tokenizer and
// chat template in the metadata): info, tokenize, template, logits (against transformers' float64 logits of the
// dequantized weights), generate, run and bench model.
TEST(CliE2e, EveryCommandTakesAGgufFile) {
  fs::path dir = gerbil::test::project_root() / "tests" / "data" / "gguf" / "llamacpp";
  std::string file = shell_quoted((dir / "llama-Q8_0.gguf").string());
  nlohmann::json fixture = nlohmann::json::parse(gerbil::test::read_text(dir / "references.json"))["fixtures"][0];
  ASSERT_EQ(fixture["file"], "llama-Q8_0.gguf");
  std::vector<int32_t> prompt = fixture["prompt_ids"][0].get<std::vector<int32_t>>();

  Outcome info = gerbil("info --model " + file);
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("architecture:          llama"));
  EXPECT_THAT(info.out, HasSubstr("\"Q8_0\":16"));
  Outcome tokens = gerbil("tokenize --tokenizer " + file + " --text 'Hello world! How are you today?'");
  ASSERT_EQ(tokens.status, 0) << tokens.err;
  EXPECT_EQ(ids_of(tokens.out), prompt);
  gerbil::test::ScratchDir scratch;
  std::string messages = write_file(scratch.path() / "messages.json", R"([{"role": "user", "content": "Hi"}])");
  Outcome rendered = gerbil("template --model " + file + " --messages " + messages + " --add-generation-prompt");
  ASSERT_EQ(rendered.status, 0) << rendered.err;
  EXPECT_THAT(rendered.out, HasSubstr("Hi"));

  fs::path out = scratch.path() / "logits.f32";
  Outcome logits = gerbil("logits --model " + file + " --kv-cache f32 --tokens " + joined(prompt) + " --out " +
                          shell_quoted(out.string()));
  ASSERT_EQ(logits.status, 0) << logits.err;
  std::vector<float> got = read_f32(out), want = read_f32(dir / fixture["logits"].get<std::string>());
  size_t vocab = 384;
  ASSERT_EQ(got.size(), prompt.size() * vocab);
  for (size_t t = 0; t < prompt.size(); ++t) {
    double diff = 0, norm = 0;
    for (size_t v = t * vocab; v < (t + 1) * vocab; ++v) {
      diff += (double(got[v]) - want[v]) * (double(got[v]) - want[v]);
      norm += double(want[v]) * want[v];
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-4) << "position " << t;
  }
  size_t last = (prompt.size() - 1) * vocab;
  int32_t best = int32_t(std::max_element(want.begin() + long(last), want.begin() + long(last + vocab)) -
                         (want.begin() + long(last)));
  Outcome generated = gerbil("generate --model " + file + " --kv-cache f32 --greedy -n 3 --tokens " + joined(prompt));
  ASSERT_EQ(generated.status, 0) << generated.err;
  EXPECT_EQ(ids_of("[" + generated.out + "]").at(0), best);
  Outcome run = gerbil("run --model " + file + " --greedy -n 4 Hi");
  EXPECT_EQ(run.status, 0) << run.err;
  Outcome bench = gerbil("bench model --model " + file + " -p 8 -g 4 -r 1 -d 0");
  ASSERT_EQ(bench.status, 0) << bench.err;
  EXPECT_THAT(bench.out, HasSubstr("tg4"));
}

TEST(CliE2e, GraphListsEveryDispatchItCounts) {
  GERBIL_REQUIRE_FIXTURES();
  std::string model = shell_quoted((gerbil::test::fixtures_dir() / "qwen2-tiny").string());
  for (const char* step : {"--tokens 5", "--decode"}) {
    Outcome out = gerbil("graph --model " + model + " " + step);
    ASSERT_EQ(out.status, 0) << out.err;
    std::smatch header;
    ASSERT_TRUE(std::regex_search(out.out, header, std::regex(R"(^(prefill|decode) step, T=(\d+): (\d+) dispatches\n)")))
        << out.out;
    EXPECT_EQ(header[2], std::string(step) == "--decode" ? "1" : "5");
    size_t lines = size_t(std::count(out.out.begin(), out.out.end(), '\n')) - 1;
    EXPECT_EQ(lines, std::stoul(header[3]));
    EXPECT_THAT(out.out, HasSubstr("layer 1"));  // qwen2-tiny's second (last) layer
  }
}

// A mistyped --model is reported the same way by every command, before any device is created: with an
// adapter that does not exist, a device created first would fail with the adapter's error instead.
TEST(CliE2e, MissingModelFolderIsReportedFirstTheSameWayByEveryCommand) {
  const std::string missing = "/nonexistent-gerbil-model";
  for (const std::string& command :
       {"run --model " + missing + " hi", "chat --model " + missing, "generate --model " + missing + " --tokens 1",
        "logits --model " + missing + " --tokens 1 --out /dev/null", "graph --model " + missing,
        "bench model --model " + missing, "template --model " + missing + " --messages /dev/null"}) {
    Outcome out = gerbil(command, "", "GERBIL_ADAPTER=no-such-adapter");
    EXPECT_NE(out.status, 0) << command;
    EXPECT_EQ(out.err, "gerbil: error: " + missing + ": no such model folder or GGUF file\n") << command;
  }
}

// `chat` needs a chat template: a model without one is refused before it loads (its weights here are not even a
// safetensors file), naming where the template was looked for.
TEST(CliE2e, ChatRefusesAModelWithoutATemplateBeforeLoadingIt) {
  GERBIL_REQUIRE_PATH(gerbil::test::tokenizer_dir("qwen3"), "scripts/setup.sh fetches the tokenizer packages");
  gerbil::test::ScratchDir dir;
  fs::copy_file(gerbil::test::tokenizer_dir("qwen3") / "tokenizer.json", dir.path() / "tokenizer.json");
  write_file(dir.path() / "tokenizer_config.json", "{}");
  write_file(dir.path() / "config.json", R"({"architectures": ["Qwen2ForCausalLM"]})");
  write_file(dir.path() / "model.safetensors", "not a safetensors file");
  Outcome chat = gerbil("chat --model " + shell_quoted(dir.path().string()), "Hello\n");
  EXPECT_NE(chat.status, 0);
  EXPECT_THAT(chat.err, HasSubstr("the model has no chat template (no 'chat_template' in tokenizer_config.json and no "
                                  "chat_template.jinja); chat needs one"));
  EXPECT_THAT(chat.err, Not(HasSubstr("safetensors")));
}

TEST(CliE2e, EdgeValuesOfModelOptionsAreClearErrors) {
  for (const char* option : {"--ctx 0", "--max-prefill-chunk 0"}) {
    Outcome out = gerbil(std::string("generate --model /nonexistent --tokens 1 ") + option);
    EXPECT_NE(out.status, 0) << option;
    EXPECT_THAT(out.err, HasSubstr(std::string(option).substr(0, std::string(option).find(' ')) + ": Value 0 not in range"))
        << option;
  }
  Outcome graph = gerbil("graph --model /nonexistent --tokens 0");
  EXPECT_THAT(graph.err, HasSubstr("--tokens: Value 0 not in range"));
  for (const char* tokens : {"1,,2", "1,x", "[1,2", "", "-3"}) {
    Outcome out = gerbil(std::string("generate --model /nonexistent --tokens '") + tokens + "'");
    EXPECT_NE(out.status, 0) << tokens;
    EXPECT_THAT(out.err, HasSubstr("--tokens: ")) << tokens;
    EXPECT_THAT(out.err, Not(HasSubstr("no such model folder"))) << tokens;
  }
}

// Every JSON the CLI reads has one strictness: a key named twice is refused, naming the file and the key.
TEST(CliE2e, DuplicateKeysAreRefusedInEveryJsonRead) {
  GERBIL_REQUIRE_PATH(gerbil::test::tokenizer_dir("qwen3"), "scripts/setup.sh fetches the tokenizer packages");
  gerbil::test::ScratchDir scratch;
  std::string messages =
      write_file(scratch.path() / "messages.json", R"([{"role": "user", "content": "a", "role": "system"}])");
  Outcome bad_messages =
      gerbil("template --model " + shell_quoted(gerbil::test::tokenizer_dir("qwen3").string()) + " --messages " + messages);
  EXPECT_NE(bad_messages.status, 0);
  EXPECT_THAT(bad_messages.err, HasSubstr("messages.json: names \"role\" twice"));

  Outcome bad_var = gerbil("template --model " + shell_quoted(gerbil::test::tokenizer_dir("qwen3").string()) +
                           " --messages " + write_file(scratch.path() / "ok.json", R"([{"role": "user", "content": "a"}])") +
                           R"( --var 'tools={"a": 1, "a": 2}')");
  EXPECT_NE(bad_var.status, 0);
  EXPECT_THAT(bad_var.err, HasSubstr("--var tools: names \"a\" twice"));

  fs::path config = scratch.path() / "tokenizer_config.json";
  write_file(config, R"({"chat_template": "x", "chat_template": "y"})");
  Outcome bad_config = gerbil("template --model " + shell_quoted(config.string()) + " --messages " + messages);
  EXPECT_THAT(bad_config.err, HasSubstr("tokenizer_config.json: names \"chat_template\" twice"));

  fs::path tokenizer = scratch.path() / "tokenizer.json";
  write_file(tokenizer, R"({"model": {"type": "BPE", "vocab": {"a": 0, "a": 1}, "merges": []}})");
  Outcome bad_tokenizer = gerbil("tokenize --tokenizer " + shell_quoted(tokenizer.string()) + " --text a");
  EXPECT_THAT(bad_tokenizer.err, HasSubstr("tokenizer.json: names \"a\" twice"));
}

}  // namespace
