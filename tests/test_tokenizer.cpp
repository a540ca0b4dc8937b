// The tokenizers against transformers' outputs in ../shared/fixtures/tokenizers/<name>/: encode with
// and without special tokens, decode, round trips and chat-template renderings, for every entry.
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace gerbil {
namespace {

using nlohmann::json;

// Loading the large files takes a moment, so each tokenizer is loaded once for all tests.
const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, Tokenizer> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, Tokenizer::load(test::tokenizer_dir(name))).first;
  return it->second;
}

json read_json(const std::filesystem::path& path) { return json::parse(test::read_text(path)); }

std::string show(const std::string& text) { return json(text).dump(); }

class TokenizerFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    GERBIL_REQUIRE_FIXTURES();
    GERBIL_REQUIRE_PATH(test::tokenizer_dir(GetParam()), "run scripts/setup.sh to fetch the tokenizer files");
  }
  std::filesystem::path fixture(const std::string& file) const {
    return test::fixtures_dir() / "tokenizers" / GetParam() / file;
  }
  json reference() const { return read_json(fixture("tokenizer_ref.json")); }
};

TEST_P(TokenizerFixture, EncodeMatchesTransformers) {
  const Tokenizer& t = tokenizer(GetParam());
  json entries = reference();
  ASSERT_GT(entries.size(), 30u);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string text = entries[i]["text"];
    SCOPED_TRACE("entry " + std::to_string(i) + ": " + show(text));
    EXPECT_EQ(t.encode(text), entries[i]["ids"].get<std::vector<int32_t>>());
  }
}

TEST_P(TokenizerFixture, EncodeWithSpecialTokensMatchesTransformers) {
  const Tokenizer& t = tokenizer(GetParam());
  json entries = reference();
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string text = entries[i]["text"];
    SCOPED_TRACE("entry " + std::to_string(i) + ": " + show(text));
    EXPECT_EQ(t.encode(text, true), entries[i]["ids_with_special_tokens"].get<std::vector<int32_t>>());
  }
}

TEST_P(TokenizerFixture, DecodeMatchesTransformers) {
  const Tokenizer& t = tokenizer(GetParam());
  json entries = reference();
  for (size_t i = 0; i < entries.size(); ++i) {
    SCOPED_TRACE("entry " + std::to_string(i) + ": " + show(entries[i]["text"]));
    std::vector<int32_t> ids = entries[i]["ids"];
    EXPECT_EQ(t.decode(ids), entries[i]["decoded"].get<std::string>());
    // The vocabulary strings of the ids are the fixture's tokens.
    for (size_t k = 0; k < ids.size(); ++k)
      EXPECT_EQ(t.token_text(ids[k]), entries[i]["tokens"][k].get<std::string>());
  }
}

TEST_P(TokenizerFixture, DecodeOfEncodeRoundTrips) {
  const Tokenizer& t = tokenizer(GetParam());
  json entries = reference();
  size_t round_trips = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string text = entries[i]["text"];
    SCOPED_TRACE("entry " + std::to_string(i) + ": " + show(text));
    if (entries[i]["roundtrip"].get<bool>()) {
      EXPECT_EQ(t.decode(t.encode(text)), text);
      ++round_trips;
    } else {
      EXPECT_NE(t.decode(t.encode(text)), text);
    }
  }
  EXPECT_GT(round_trips, 30u);
}

TEST_P(TokenizerFixture, SkipSpecialTokensDropsOnlySpecialTokens) {
  const Tokenizer& t = tokenizer(GetParam());
  json entries = reference();
  for (size_t i = 0; i < entries.size(); ++i) {
    std::vector<int32_t> ids = entries[i]["ids"];
    std::vector<int32_t> kept;
    for (int32_t id : ids)
      if (!t.is_special(id)) kept.push_back(id);
    SCOPED_TRACE("entry " + std::to_string(i) + ": " + show(entries[i]["text"]));
    EXPECT_EQ(t.decode(ids, true), t.decode(kept));
  }
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, TokenizerFixture,
                         ::testing::Values("qwen3", "llama3", "llama2", "gemma3", "gpt2"),
                         [](const auto& info) { return info.param; });

// Conversations rendered with each model's chat template (the fixtures have them for these three).
using ChatTemplateFixture = TokenizerFixture;

TEST_P(ChatTemplateFixture, RenderingsEncodeLikeTransformers) {
  const Tokenizer& t = tokenizer(GetParam());
  json entries = read_json(fixture("chat_template_ref.json"));
  ASSERT_GE(entries.size(), 4u);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string text = entries[i]["text"];
    SCOPED_TRACE("conversation " + std::to_string(i) + ": " + show(text));
    std::vector<int32_t> ids = entries[i]["ids"];
    EXPECT_EQ(t.encode(text), ids);
    EXPECT_EQ(t.decode(ids), text);
  }
}

INSTANTIATE_TEST_SUITE_P(ChatModels, ChatTemplateFixture, ::testing::Values("qwen3", "llama3", "gemma3"),
                         [](const auto& info) { return info.param; });

class TokenizerVocabulary : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"qwen3", "llama3", "llama2", "gemma3", "gpt2"})
      GERBIL_REQUIRE_PATH(test::tokenizer_dir(name), "run scripts/setup.sh to fetch the tokenizer files");
  }
};

TEST_F(TokenizerVocabulary, SizesAndSpecialTokens) {
  EXPECT_EQ(tokenizer("qwen3").vocab_size(), 151669u);
  EXPECT_EQ(tokenizer("qwen3").token_id("<|im_end|>"), 151645);
  EXPECT_TRUE(tokenizer("qwen3").is_special(151645));
  EXPECT_FALSE(tokenizer("qwen3").is_special(151667));  // <think> is added but not special
  EXPECT_EQ(tokenizer("qwen3").token_text(151667), "<think>");
  EXPECT_EQ(tokenizer("llama3").vocab_size(), 128256u);
  EXPECT_EQ(tokenizer("llama3").token_id("<|begin_of_text|>"), 128000);
  EXPECT_EQ(tokenizer("llama2").vocab_size(), 32000u);
  EXPECT_EQ(tokenizer("llama2").token_id("▁the"), 272);
  EXPECT_TRUE(tokenizer("llama2").is_special(1));
  EXPECT_EQ(tokenizer("gemma3").vocab_size(), 262145u);
  EXPECT_TRUE(tokenizer("gemma3").is_special(105));  // <start_of_turn>
  EXPECT_EQ(tokenizer("gpt2").vocab_size(), 50257u);
  EXPECT_EQ(tokenizer("gpt2").token_id("<|endoftext|>"), 50256);
  EXPECT_TRUE(tokenizer("gpt2").is_special(50256));
  EXPECT_FALSE(tokenizer("gpt2").token_id("no such token").has_value());
}

TEST_F(TokenizerVocabulary, TokenBytesJoinIntoTheDecodedText) {
  // Past the first token, the raw bytes of the ids are the decoded text, characters split over tokens
  // included (the emoji and the CJK characters fall apart into byte tokens in several of these vocabularies).
  std::string text = "A quick {\"key\": [1, 2.5e3]} 你好世界 🦊 done\n  ▁x";
  for (const char* name : {"qwen3", "llama3", "llama2", "gemma3", "gpt2"}) {
    const Tokenizer& t = tokenizer(name);
    std::vector<int32_t> ids = t.encode(text);
    std::string first = t.decode(std::span(ids).first(1));
    std::string joined;
    for (size_t i = 1; i < ids.size(); ++i) joined += t.token_bytes(ids[i]);
    EXPECT_EQ(first + joined, t.decode(ids)) << name;
  }
  EXPECT_EQ(tokenizer("llama2").token_bytes(*tokenizer("llama2").token_id("<0xE4>")), "\xE4");
  EXPECT_EQ(tokenizer("llama2").token_bytes(272), " the");
  EXPECT_EQ(tokenizer("qwen3").token_bytes(*tokenizer("qwen3").token_id("Ġthe")), " the");
  EXPECT_EQ(tokenizer("qwen3").token_bytes(*tokenizer("qwen3").token_id("ä")), "\xE4");  // not a whole character
  EXPECT_EQ(tokenizer("qwen3").token_bytes(151667), "<think>");
  EXPECT_TRUE(tokenizer("qwen3").is_added(151667));
  EXPECT_TRUE(tokenizer("qwen3").is_added(151645));
  EXPECT_FALSE(tokenizer("qwen3").is_added(*tokenizer("qwen3").token_id("Ġthe")));
}

TEST_F(TokenizerVocabulary, LoadsFromTheFileAsWellAsTheFolder) {
  Tokenizer from_file = Tokenizer::load(test::tokenizer_dir("llama2") / "tokenizer.json");
  EXPECT_EQ(from_file.encode("Hello, world!"), tokenizer("llama2").encode("Hello, world!"));
  Tokenizer gpt2 = Tokenizer::load(test::tokenizer_dir("gpt2") / "encoder.json");
  EXPECT_EQ(gpt2.encode("Hello, world!"), (std::vector<int32_t>{15496, 11, 995, 0}));
}

TEST_F(TokenizerVocabulary, LongRepetitiveTextMatchesPiecewiseEncoding) {
  // A long input must give the same ids as its lines encoded one by one (lines end in "\n", which
  // no merge of these files crosses into the next line's first word), exercising the word cache.
  std::string line = "The quick brown fox, 12345 times: 你好世界 🦊!\n";
  for (const char* name : {"qwen3", "llama3", "gpt2"}) {
    const Tokenizer& t = tokenizer(name);
    std::vector<int32_t> expected;
    std::string text;
    for (int i = 0; i < 200; ++i) {
      std::vector<int32_t> ids = t.encode(line);
      expected.insert(expected.end(), ids.begin(), ids.end());
      text += line;
    }
    SCOPED_TRACE(name);
    EXPECT_EQ(t.encode(text), expected);
  }
}

}  // namespace
}  // namespace gerbil
