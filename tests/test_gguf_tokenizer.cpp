// Tokenizers from GGUF metadata: the fixture tokenizers converted to tokenizer.ggml.* keys as llama.cpp's
// converter writes them, rebuilt through gguf_tokenizer_json + Tokenizer::from_json, encode every fixture
// string to the ids the Hugging Face tokenizer gives.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "gerbil/error.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"
#include "support/gguf_writer.h"
#include "support/paths.h"
#include "test_model_support.h"
#include "tokenizer/tokenizer.h"

namespace gerbil {
namespace {

using test::GgufWriter;
using ::testing::HasSubstr;

// tokenizer.json's tokens as tokenizer.ggml.tokens / token_type: added tokens are control (special) or
// user-defined, the model's unk_token unknown, and for byte fallback "<0xNN>" pieces are byte tokens.
void add_tokens(GgufWriter& w, const nlohmann::json& hf) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto place = [&](int64_t id, const std::string& text, int32_t type) {
    if (tokens.size() <= std::size_t(id)) tokens.resize(std::size_t(id) + 1), types.resize(std::size_t(id) + 1, 1);
    tokens[std::size_t(id)] = text;
    types[std::size_t(id)] = type;
  };
  const nlohmann::json& model = hf["model"];
  bool byte_fallback = model.value("byte_fallback", false);
  for (const auto& [text, id] : model["vocab"].items())
    place(id.get<int64_t>(), text, byte_fallback && text.size() == 6 && text.starts_with("<0x") ? 6 : 1);
  for (const auto& added : hf["added_tokens"]) place(added["id"], added["content"], added["special"].get<bool>() ? 3 : 4);
  if (model.contains("unk_token") && model["unk_token"].is_string())
    types[model["vocab"][model["unk_token"].get<std::string>()].get<std::size_t>()] = 2;
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_i32s("tokenizer.ggml.token_type", types);
}

std::pair<std::string, std::string> merge_pair(const nlohmann::json& merge) {
  if (merge.is_array()) return {merge[0], merge[1]};
  std::string text = merge;
  return {text.substr(0, text.find(' ')), text.substr(text.find(' ') + 1)};
}

// tokenizer.ggml.scores as llama.cpp's converter stores a SentencePiece model's: added (control and
// user-defined) pieces score 0 (Gemma's whitespace runs, all merged before anything else), a piece the merge
// of rank r makes scores -r, pieces no merge makes (characters, byte tokens) less than all of them.
// REVERSED ranks the merges the other way round (to show that the ranking matters).
std::vector<float> scores_from_merges(const nlohmann::json& hf, bool reversed = false) {
  const nlohmann::json& merges = hf["model"]["merges"];
  std::vector<float> scores(hf["model"]["vocab"].size(), -float(merges.size() + 1));
  std::vector<bool> made(scores.size(), false);
  for (const auto& added : hf["added_tokens"]) {
    std::size_t id = added["id"];
    if (id >= scores.size()) scores.resize(id + 1), made.resize(id + 1);
    scores[id] = 0, made[id] = true;
  }
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    auto [left, right] = merge_pair(merges[rank]);
    std::size_t id = hf["model"]["vocab"].at(left + right);
    if (made[id]) continue;
    made[id] = true;
    scores[id] = reversed ? -float(merges.size() - rank) : -float(rank);
  }
  return scores;
}

// Whether the normalizer puts "▁" in front (Llama 2) or not (Gemma).
bool prepends_space(const nlohmann::json& hf) { return hf["normalizer"].dump().find("Prepend") != std::string::npos; }

struct Case {
  std::string name, model, pre;
  std::optional<int32_t> bos;
};

// The fixture tokenizer CASE.name as the GGUF metadata llama.cpp's converter writes for it.
GgufWriter gguf_from_tokenizer_json(const nlohmann::json& hf, const Case& c, bool reversed_scores = false) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", c.model);
  add_tokens(w, hf);
  if (c.model == "gpt2") {
    std::vector<std::string> merges;
    for (const auto& merge : hf["model"]["merges"]) {
      auto [left, right] = merge_pair(merge);
      merges.push_back(left + " " + right);
    }
    w.add_string("tokenizer.ggml.pre", c.pre);
    w.add_strings("tokenizer.ggml.merges", merges);
  } else {
    w.add_f32s("tokenizer.ggml.scores", scores_from_merges(hf, reversed_scores));
    w.add_bool("tokenizer.ggml.add_space_prefix", prepends_space(hf));
  }
  w.add_bool("tokenizer.ggml.add_bos_token", c.bos.has_value());
  if (c.bos) w.add_u32("tokenizer.ggml.bos_token_id", uint32_t(*c.bos));
  w.add_string("tokenizer.chat_template", "{{ messages[0]['content'] }}");
  return w;
}

// The fixture tokenizer C.name rebuilt from its GGUF form.
Tokenizer gguf_tokenizer(const Case& c, bool reversed_scores = false) {
  std::filesystem::path hf_file = test::tokenizer_dir(c.name) / "tokenizer.json";
  std::string bytes =
      gguf_from_tokenizer_json(nlohmann::json::parse(test::read_text(hf_file)), c, reversed_scores).bytes();
  Gguf gguf = Gguf::parse(std::as_bytes(std::span(bytes)), "tokenizer.gguf");
  EXPECT_EQ(gguf_chat_template(gguf), "{{ messages[0]['content'] }}");
  return Tokenizer::from_json(gguf_tokenizer_json(gguf), "tokenizer.gguf");
}

nlohmann::json fixture_encodings(const std::string& name) {
  return nlohmann::json::parse(test::read_text(test::fixtures_dir() / "tokenizers" / name / "tokenizer_ref.json"));
}

#define REQUIRE_FIXTURES(name)                                                                                  \
  GERBIL_REQUIRE_PATH(test::tokenizer_dir(name) / "tokenizer.json",                                            \
                      "scripts/setup.sh fetches the tokenizer files into .deps/tokenizers");                   \
  GERBIL_REQUIRE_PATH(test::fixtures_dir() / "tokenizers" / (name) / "tokenizer_ref.json",                     \
                      "the reference fixtures live in ../shared/fixtures")

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GgufTokenizer : public ::testing::TestWithParam<Case> {};

TEST_P(GgufTokenizer, EncodesEveryFixtureStringLikeHuggingFace) {
  const Case& c = GetParam();
  REQUIRE_FIXTURES(c.name);
  Tokenizer tokenizer = gguf_tokenizer(c);
  nlohmann::json refs = fixture_encodings(c.name);
  ASSERT_GT(refs.size(), 10u);
  for (const auto& ref : refs) {
    std::string text = ref["text"];
    EXPECT_EQ(tokenizer.encode(text, false), ref["ids"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tokenizer.encode(text, true), ref["ids_with_special_tokens"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tokenizer.decode(ref["ids"].get<std::vector<int32_t>>()), ref["decoded"].get<std::string>()) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufTokenizer,
                         ::testing::Values(Case{"qwen3", "gpt2", "qwen2", std::nullopt},
                                           Case{"llama3", "gpt2", "llama-bpe", std::nullopt},
                                           Case{"llama2", "llama", "", 1}, Case{"gemma3", "llama", "", 2}),
                         [](const auto& info) { return info.param.name; });

// The other names llama.cpp's converter writes for the same splits (DeepSeek-R1's Qwen distills, older Llama 3
// files, Phi-2 and Phi-3.5/4's GPT-2 split) encode as their family does; they were refused.
TEST(GgufTokenizerPre, LlamaCppsOtherNamesForASplit) {
  REQUIRE_FIXTURES("qwen3");
  REQUIRE_FIXTURES("llama3");
  for (const Case& c : {Case{"qwen3", "gpt2", "deepseek-r1-qwen", std::nullopt},
                        Case{"llama3", "gpt2", "llama3", std::nullopt}, Case{"llama3", "gpt2", "llama-v3", std::nullopt}}) {
    Tokenizer tokenizer = gguf_tokenizer(c);
    for (const auto& ref : fixture_encodings(c.name))
      EXPECT_EQ(tokenizer.encode(ref["text"].get<std::string>(), false), ref["ids"].get<std::vector<int32_t>>())
          << c.pre << ": " << ref["text"];
  }
  auto tokenizer_json = [](const std::string& pre) {
    nlohmann::json hf = nlohmann::json::parse(test::read_text(test::tokenizer_dir("qwen3") / "tokenizer.json"));
    std::string bytes = gguf_from_tokenizer_json(hf, Case{"qwen3", "gpt2", pre, std::nullopt}).bytes();
    return gguf_tokenizer_json(Gguf::parse(std::as_bytes(std::span(bytes)), "t.gguf"));
  };
  EXPECT_EQ(tokenizer_json("phi-2"), tokenizer_json("gpt-2"));
}

// The scores decide the merge order: ranked the other way round, the SentencePiece tokenizer encodes some
// fixture strings differently (so the test above checks the order, not only the vocabulary).
TEST(GgufTokenizerScores, ReversedRankingChangesTheEncoding) {
  REQUIRE_FIXTURES("llama2");
  Tokenizer reversed = gguf_tokenizer(Case{"llama2", "llama", "", 1}, true);
  int differing = 0;
  for (const auto& ref : fixture_encodings("llama2"))
    differing += reversed.encode(ref["text"].get<std::string>(), false) != ref["ids"].get<std::vector<int32_t>>();
  EXPECT_GT(differing, 0);
}

// tokenizer.ggml.add_bos_token puts the BOS token in front when special tokens are asked for.
TEST(GgufTokenizerBos, AddBosTokenPrependsIt) {
  REQUIRE_FIXTURES("llama3");
  Tokenizer tokenizer = gguf_tokenizer(Case{"llama3", "gpt2", "llama-bpe", 128000});
  EXPECT_EQ(tokenizer.encode("Hello, world!", false), (std::vector<int32_t>{9906, 11, 1917, 0}));
  EXPECT_EQ(tokenizer.encode("Hello, world!", true), (std::vector<int32_t>{128000, 9906, 11, 1917, 0}));
  EXPECT_TRUE(tokenizer.is_special(128000));
}

std::string error_for(const GgufWriter& w) {
  std::string bytes = w.bytes();
  return test::error_of([&] { gguf_tokenizer_json(Gguf::parse(std::as_bytes(std::span(bytes)), "t.gguf")); });
}

TEST(GgufTokenizerErrors, NameTheKey) {
  GgufWriter model;
  model.add_string("tokenizer.ggml.model", "bert");
  EXPECT_THAT(error_for(model), HasSubstr("tokenizer.ggml.model \"bert\" is not supported"));
  GgufWriter pre;
  pre.add_string("tokenizer.ggml.model", "gpt2");
  pre.add_string("tokenizer.ggml.pre", "deepseek-llm");
  EXPECT_THAT(error_for(pre), HasSubstr("tokenizer.ggml.pre \"deepseek-llm\" is not supported"));
  GgufWriter none;
  none.add_string("tokenizer.ggml.model", "gpt2");
  EXPECT_THAT(error_for(none), HasSubstr("\"tokenizer.ggml.tokens\" is missing"));
  GgufWriter bos;
  bos.add_string("tokenizer.ggml.model", "gpt2");
  bos.add_strings("tokenizer.ggml.tokens", {"a", "b"});
  bos.add_bool("tokenizer.ggml.add_bos_token", true);
  bos.add_u32("tokenizer.ggml.bos_token_id", 9);
  EXPECT_THAT(error_for(bos), HasSubstr("tokenizer.ggml.bos_token_id is 9, outside the 2 tokens"));
}

// A small SentencePiece tokenizer: "ab" (score -1) merges before "▁a" (-2), "\n" falls back to its byte.
struct SmallSentencePiece {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>", "<0x0A>", "\u2581", "a", "b", "ab", "\u2581a"};
  std::vector<int32_t> types{2, 3, 3, 6, 1, 1, 1, 1, 1};
  std::vector<float> scores{0, 0, 0, 0, -5, -4, -3, -1, -2};
  std::optional<uint32_t> bos_id, unknown_id;
  bool add_eos = false;

  GgufWriter gguf() const {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_strings("tokenizer.ggml.tokens", tokens);
    w.add_i32s("tokenizer.ggml.token_type", types);
    w.add_f32s("tokenizer.ggml.scores", scores);
    if (bos_id) w.add_u32("tokenizer.ggml.bos_token_id", *bos_id);
    if (unknown_id) w.add_u32("tokenizer.ggml.unknown_token_id", *unknown_id);
    if (add_eos) w.add_bool("tokenizer.ggml.add_eos_token", true);
    return w;
  }
};

TEST(GgufTokenizerSentencePiece, MergesByScoreAndFallsBackToBytes) {
  std::string bytes = SmallSentencePiece{}.gguf().bytes();
  Tokenizer tokenizer =
      Tokenizer::from_json(gguf_tokenizer_json(Gguf::parse(std::as_bytes(std::span(bytes)), "t.gguf")), "t.gguf");
  EXPECT_EQ(tokenizer.encode("ab\n", true), (std::vector<int32_t>{1, 4, 7, 3}));  // BOS by default, as llama.cpp
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{4, 7, 3}), "ab\n");
  EXPECT_EQ(tokenizer.encode("c", false), (std::vector<int32_t>{4, 0}));  // no piece, no byte token: <unk>
}

TEST(GgufTokenizerSentencePiece, AddEosTokenAppendsIt) {
  std::string bytes = SmallSentencePiece{.add_eos = true}.gguf().bytes();
  Tokenizer tokenizer =
      Tokenizer::from_json(gguf_tokenizer_json(Gguf::parse(std::as_bytes(std::span(bytes)), "t.gguf")), "t.gguf");
  EXPECT_EQ(tokenizer.encode("ab", true), (std::vector<int32_t>{1, 4, 7, 2}));
  EXPECT_EQ(tokenizer.encode("ab", false), (std::vector<int32_t>{4, 7}));
}

// Pieces of equal score (SentencePiece gives user-defined ones 0) join as llama.cpp joins them, leftmost
// first: "xxxxx" grows "xx", "xxx", "xxxx" from the left (merging every "x x" first would end in "xx xxx").
TEST(GgufTokenizerSentencePiece, EqualScoresJoinFromTheLeft) {
  SmallSentencePiece small;
  for (std::string piece : {"x", "xx", "xxx", "xxxx"}) {
    small.tokens.push_back(piece);
    small.types.push_back(1);
    small.scores.push_back(0);
  }
  std::string bytes = small.gguf().bytes();
  Tokenizer tokenizer =
      Tokenizer::from_json(gguf_tokenizer_json(Gguf::parse(std::as_bytes(std::span(bytes)), "t.gguf")), "t.gguf");
  EXPECT_EQ(tokenizer.encode("xxxxx", false), (std::vector<int32_t>{4, 12, 9}));
}

// A piece of 200,000 bytes among short ones loads at once: its cuts are looked up only at the lengths other
// pieces have (every cut, each hashing up to the whole piece, took seconds, and a longer piece hours).
TEST(GgufTokenizerSentencePiece, ALongPieceOnlyCostsItsLength) {
  SmallSentencePiece small;
  small.tokens.push_back(std::string(200'000, 'a'));
  small.types.push_back(1);
  small.scores.push_back(-9);
  for (int i = 0; i < 40; ++i) {
    small.tokens.push_back("w" + std::to_string(i));
    small.types.push_back(1);
    small.scores.push_back(-10);
  }
  std::string bytes = small.gguf().bytes();
  Tokenizer tokenizer =
      Tokenizer::from_json(gguf_tokenizer_json(Gguf::parse(std::as_bytes(std::span(bytes)), "t.gguf")), "t.gguf");
  EXPECT_EQ(tokenizer.encode("ab", false), (std::vector<int32_t>{4, 7}));
}

// Each inconsistency in SmallSentencePiece's metadata is an error naming the key.
TEST(GgufTokenizerErrors, SentencePieceMetadataNamesTheKey) {
  auto spoiled = [](const std::function<void(SmallSentencePiece&)>& spoil) {
    SmallSentencePiece tokenizer;
    spoil(tokenizer);
    return error_for(tokenizer.gguf());
  };
  EXPECT_THAT(spoiled([](auto& t) { t.scores.pop_back(); }), HasSubstr("tokenizer.ggml.scores has 8 entries for 9 tokens"));
  EXPECT_THAT(spoiled([](auto& t) { t.types.pop_back(); }), HasSubstr("tokenizer.ggml.token_type has 8 entries for 9 tokens"));
  EXPECT_THAT(spoiled([](auto& t) { t.types[6] = 9; }), HasSubstr("tokenizer.ggml.token_type[6] is 9"));
  EXPECT_THAT(spoiled([](auto& t) { t.types[5] = 6; }),
              HasSubstr("tokenizer.ggml.tokens[5] \"a\" has token type 6 (byte) but is not of the form <0xNN>"));
  EXPECT_THAT(spoiled([](auto& t) { t.tokens[3] = "<0x0a>"; }),
              HasSubstr("tokenizer.ggml.tokens[3] \"<0x0a>\" has token type 6 (byte) but is not of the form <0xNN>"));
  EXPECT_THAT(spoiled([](auto& t) { t.bos_id = 9; }), HasSubstr("tokenizer.ggml.bos_token_id is 9, outside the 9 tokens"));
  EXPECT_THAT(spoiled([](auto& t) { t.unknown_id = 70; }),
              HasSubstr("tokenizer.ggml.unknown_token_id is 70, outside the 9 tokens"));
  EXPECT_THAT(spoiled([](auto& t) { t.scores[4] = std::nanf(""); }), HasSubstr("tokenizer.ggml.scores[4] is nan"));
  // llama.cpp's default ids (BOS 1, EOS 2) are checked like given ones: they were read past the tokens.
  EXPECT_THAT(spoiled([](auto& t) {
                t.tokens.resize(1);
                t.types.resize(1);
                t.scores.resize(1);
              }),
              HasSubstr("tokenizer.ggml.bos_token_id is 1 (absent: llama.cpp's default), outside the 1 tokens"));
  EXPECT_THAT(spoiled([](auto& t) {
                t.tokens.resize(2);
                t.types.resize(2);
                t.scores.resize(2);
                t.add_eos = true;
              }),
              HasSubstr("tokenizer.ggml.eos_token_id is 2 (absent: llama.cpp's default), outside the 2 tokens"));
  GgufWriter no_scores;
  no_scores.add_string("tokenizer.ggml.model", "llama");
  no_scores.add_strings("tokenizer.ggml.tokens", {"a"});
  EXPECT_THAT(error_for(no_scores), HasSubstr("\"tokenizer.ggml.scores\" is missing"));
}

}  // namespace
}  // namespace gerbil
