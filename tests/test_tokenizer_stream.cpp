// StreamDecoder: ids one at a time must give back, piece by piece, exactly decode() of all of them,
// and every piece must be valid UTF-8, also when a character is split over several tokens.
#include <map>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gerbil/error.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace gerbil {
namespace {

const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, Tokenizer> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, Tokenizer::load(test::tokenizer_dir(name))).first;
  return it->second;
}

// Streams ids, checking each piece is valid UTF-8; returns the pieces (finish() last).
std::vector<std::string> stream(const Tokenizer& t, const std::vector<int32_t>& ids,
                                bool skip_special = false) {
  StreamDecoder decoder(t, skip_special);
  std::vector<std::string> pieces;
  for (size_t i = 0; i < ids.size(); ++i) {
    pieces.push_back(decoder.step(ids[i]));
    EXPECT_EQ(tok::find_invalid_utf8(pieces.back()), tok::npos) << "piece after id " << ids[i] << " at " << i;
  }
  pieces.push_back(decoder.finish());
  return pieces;
}

std::string concat(const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& piece : pieces) out += piece;
  return out;
}

class StreamFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    GERBIL_REQUIRE_FIXTURES();
    GERBIL_REQUIRE_PATH(test::tokenizer_dir(GetParam()), "run scripts/setup.sh to fetch the tokenizer files");
  }
};

TEST_P(StreamFixture, ConcatenationEqualsFullDecode) {
  const Tokenizer& t = tokenizer(GetParam());
  nlohmann::json entries = nlohmann::json::parse(
      test::read_text(test::fixtures_dir() / "tokenizers" / GetParam() / "tokenizer_ref.json"));
  for (size_t i = 0; i < entries.size(); ++i) {
    SCOPED_TRACE("entry " + std::to_string(i) + ": " + entries[i]["text"].dump());
    for (const char* key : {"ids", "ids_with_special_tokens"}) {
      std::vector<int32_t> ids = entries[i][key];
      EXPECT_EQ(concat(stream(t, ids)), t.decode(ids));
      EXPECT_EQ(concat(stream(t, ids, true)), t.decode(ids, true));
    }
    // The decoded text of the fixture, streamed, is the fixture's decoded text.
    EXPECT_EQ(concat(stream(t, entries[i]["ids"])), entries[i]["decoded"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, StreamFixture,
                         ::testing::Values("qwen3", "llama3", "llama2", "gemma3", "gpt2"),
                         [](const auto& info) { return info.param; });

class StreamDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"llama2", "gemma3", "gpt2", "qwen3"})
      GERBIL_REQUIRE_PATH(test::tokenizer_dir(name), "run scripts/setup.sh to fetch the tokenizer files");
  }
};

TEST_F(StreamDecoderTest, HoldsByteFallbackPiecesUntilTheCharacterIsDone) {
  // Llama 2 has no token for 👨 (F0 9F 91 A8): it is four <0xNN> tokens, then a zero-width joiner.
  const Tokenizer& t = tokenizer("llama2");
  std::vector<int32_t> ids = t.encode("👨\u200d👩");
  ASSERT_EQ(ids, (std::vector<int32_t>{28705, 243, 162, 148, 171, 29274, 243, 162, 148, 172}));
  std::vector<std::string> pieces = stream(t, ids);
  // Nothing comes out while the bytes arrive; the man comes out whole with the joiner.
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "", "", "", "", "👨\u200d", "", "", "", "", "👩"}));
}

TEST_F(StreamDecoderTest, HoldsByteLevelPiecesUntilTheCharacterIsDone) {
  // GPT-2 splits 😀 (F0 9F 98 80) over two byte-level tokens.
  const Tokenizer& t = tokenizer("gpt2");
  std::vector<int32_t> ids = t.encode("😀 東京");
  ASSERT_GT(ids.size(), 3u);
  std::vector<std::string> pieces = stream(t, ids);
  EXPECT_EQ(pieces[0], "");
  EXPECT_EQ(pieces[1], "😀");
  EXPECT_EQ(concat(pieces), "😀 東京");
}

TEST_F(StreamDecoderTest, KeepsTheSentencePieceLeadingSpaceRule) {
  // Llama 2's decoder strips the space of the first '▁' only; later words keep theirs.
  const Tokenizer& llama2 = tokenizer("llama2");
  std::vector<int32_t> ids = llama2.encode("Hello world again");
  EXPECT_EQ(stream(llama2, ids), (std::vector<std::string>{"Hello", " world", " again", ""}));
  // Gemma's decoder strips nothing.
  const Tokenizer& gemma3 = tokenizer("gemma3");
  EXPECT_EQ(stream(gemma3, gemma3.encode(" leading space")),
            (std::vector<std::string>{" leading", " space", ""}));
}

TEST_F(StreamDecoderTest, FinishFlushesAnIncompleteCharacter) {
  const Tokenizer& t = tokenizer("llama2");
  std::vector<int32_t> ids = {243, 162};  // <0xF0> <0x9F>: the start of an emoji, never finished
  std::vector<std::string> pieces = stream(t, ids);
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "", "\xEF\xBF\xBD\xEF\xBF\xBD"}));
  EXPECT_EQ(concat(pieces), t.decode(ids));
}

TEST_F(StreamDecoderTest, SkipsSpecialTokensWhenAsked) {
  const Tokenizer& t = tokenizer("qwen3");
  std::vector<int32_t> ids = t.encode("<|im_start|>user\nHi<|im_end|>");
  EXPECT_EQ(concat(stream(t, ids, true)), "user\nHi");
  EXPECT_EQ(concat(stream(t, ids, false)), "<|im_start|>user\nHi<|im_end|>");
}

TEST_F(StreamDecoderTest, RandomIdsIncludingBrokenByteSequencesStreamExactly) {
  // Random ids, biased towards byte pieces (<0xNN> or single-byte tokens) so that characters are split,
  // left unfinished and broken, and special tokens: the pieces must still add up to decode().
  std::mt19937 random(7);
  for (const char* name : {"llama2", "gemma3", "gpt2", "qwen3"}) {
    const Tokenizer& t = tokenizer(name);
    std::vector<int32_t> bytes;
    for (int b = 0; b < 256; ++b) {
      std::string fallback = fmt::format("<0x{:02X}>", b);
      std::optional<int32_t> id = t.token_id(fallback);
      if (!id) id = t.token_id(std::string_view(reinterpret_cast<const char*>(&b), 1));
      if (id) bytes.push_back(*id);
    }
    ASSERT_GT(bytes.size(), 90u) << name;
    for (int round = 0; round < 300; ++round) {
      std::vector<int32_t> ids;
      size_t length = 1 + random() % 24;
      while (ids.size() < length)
        ids.push_back(random() % 3 ? bytes[random() % bytes.size()]
                                   : static_cast<int32_t>(random() % (t.vocab_size() + 300)));  // some past it
      SCOPED_TRACE(std::string(name) + " round " + std::to_string(round));
      EXPECT_EQ(concat(stream(t, ids)), t.decode(ids));
      EXPECT_EQ(concat(stream(t, ids, true)), t.decode(ids, true));
      std::string full = t.decode(ids);
      std::erase_if(ids, [&](int32_t id) { return size_t(id) >= t.vocab_size(); });
      EXPECT_EQ(t.decode(ids), full);  // the ids past the vocabulary added nothing
    }
  }
}

// Qwen's model has 151,936 logits for its tokenizer's 151,669 ids: the ids past them stream nothing, as
// decode() skips them; a negative id is an error naming it.
TEST_F(StreamDecoderTest, IdsPastTheVocabularyStreamNothing) {
  const Tokenizer& t = tokenizer("qwen3");
  ASSERT_LT(t.vocab_size(), 151936u);
  StreamDecoder decoder(t);
  EXPECT_EQ(decoder.step(9707), "Hello");
  EXPECT_EQ(decoder.step(151935), "");
  EXPECT_EQ(decoder.step(int32_t(t.vocab_size())), "");
  EXPECT_EQ(decoder.step(1879) + decoder.finish(), t.decode(std::vector<int32_t>{1879}));
  try {
    decoder.step(-3);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gerbil
