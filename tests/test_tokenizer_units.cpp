// The tokenizer's parts on small hand-made inputs whose answers follow from HF tokenizers' rules:
// BPE merge order, unknown characters, added-token options, Split behaviours, Metaspace, Unicode
// normalization, lossy UTF-8 and the Oniguruma-to-PCRE2 translation.
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "tokenizer/json_field.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pattern.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace gerbil {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Ids = std::vector<int32_t>;

// A tokenizer from a tokenizer.json given as JSON; absent components are null.
Tokenizer make(json spec) {
  for (const char* key : {"normalizer", "pre_tokenizer", "post_processor", "decoder"})
    if (!spec.contains(key)) spec[key] = nullptr;
  if (!spec.contains("added_tokens")) spec["added_tokens"] = json::array();
  fs::path path = fs::temp_directory_path() /
                  ("gerbil_tokenizer_units_" +
                   std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".json");
  std::ofstream(path) << spec.dump();
  Tokenizer tokenizer = Tokenizer::load(path);
  fs::remove(path);
  return tokenizer;
}

json bpe(json vocab, json merges, json extra = json::object()) {
  json model = {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(merges)}};
  model.update(extra);
  return model;
}

json added_token(int id, const std::string& content, json flags = json::object()) {
  json token = {{"id", id},        {"content", content}, {"special", true},    {"single_word", false},
                {"lstrip", false}, {"rstrip", false},    {"normalized", false}};
  token.update(flags);
  return token;
}

TEST(Bpe, AppliesTheLowestRankedMergeFirst) {
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  EXPECT_EQ(make({{"model", bpe(vocab, {"b c", "a b", "a bc"})}}).encode("abc"), Ids{5});
  // With "a b" first, "bc" never forms and "ab c" is no merge.
  EXPECT_EQ(make({{"model", bpe(vocab, {"a b", "b c", "a bc"})}}).encode("abc"), (Ids{3, 2}));
  // The list form of merges means the same.
  EXPECT_EQ(make({{"model", bpe(vocab, json::array({json::array({"b", "c"}), json::array({"a", "b"}),
                                                    json::array({"a", "bc"})}))}})
                .encode("abc"),
            Ids{5});
}

TEST(Bpe, BreaksTiesLeftmostFirst) {
  json vocab = {{"a", 0}, {"aa", 1}, {"aaaa", 2}};
  Tokenizer t = make({{"model", bpe(vocab, {"a a", "aa aa"})}});
  EXPECT_EQ(t.encode("aaa"), (Ids{1, 0}));
  EXPECT_EQ(t.encode("aaaaa"), (Ids{2, 0}));
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  json vocab = {{"a", 0}, {"b", 1}, {"ba", 2}};
  EXPECT_EQ(make({{"model", bpe(vocab, json::array())}}).encode("ba"), (Ids{1, 0}));
  EXPECT_EQ(make({{"model", bpe(vocab, json::array(), {{"ignore_merges", true}})}}).encode("ba"), Ids{2});
}

TEST(Bpe, UnknownCharactersFallBackToBytesOrUnk) {
  json vocab = {{"<unk>", 0}, {"a", 1}, {"<0xC3>", 2}, {"<0xA9>", 3}};
  json decoder = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  Tokenizer bytes =
      make({{"model", bpe(vocab, json::array(), {{"unk_token", "<unk>"}, {"byte_fallback", true}})},
            {"decoder", decoder}});
  EXPECT_EQ(bytes.encode("aé"), (Ids{1, 2, 3}));
  EXPECT_EQ(bytes.decode(Ids{1, 2, 3}), "aé");
  EXPECT_EQ(bytes.decode(Ids{2, 1}),
            "\xEF\xBF\xBD"
            "a");  // a broken byte run is one U+FFFD per byte
  EXPECT_EQ(make({{"model", bpe(vocab, json::array(), {{"unk_token", "<unk>"}, {"fuse_unk", true}})}})
                .encode("aééa"),
            (Ids{1, 0, 1}));
  EXPECT_EQ(make({{"model", bpe(vocab, json::array(), {{"unk_token", "<unk>"}})}}).encode("aééa"),
            (Ids{1, 0, 0, 1}));
}

TEST(Bpe, ContinuingSubwordPrefixAndEndOfWordSuffix) {
  // Inner characters carry "##", the last one "</w>"; a merged token has the prefix only in front.
  json vocab = {{"a", 0},       {"##b", 1},     {"ab", 2},     {"##a", 3},  {"b", 4},
                {"##b</w>", 5}, {"##a</w>", 6}, {"ab</w>", 7}, {"b</w>", 8}};
  json merges = json::array({json::array({"a", "##b"}), json::array({"a", "##b</w>"})});
  Tokenizer t = make(
      {{"model", bpe(vocab, merges, {{"continuing_subword_prefix", "##"}, {"end_of_word_suffix", "</w>"}})}});
  EXPECT_EQ(t.encode("ab"), Ids{7});
  EXPECT_EQ(t.encode("ba"), (Ids{4, 6}));
  EXPECT_EQ(t.encode("abab"), (Ids{2, 3, 5}));
  EXPECT_EQ(t.encode("b"), Ids{8});
  EXPECT_EQ(t.encode("aab"), (Ids{0, 3, 5}));
}

TEST(Bpe, LongWordsSplitOnlyWhereNoMergeCanCross) {
  // "xy" is a token, so a long word must never be cut between x and y.
  json vocab = {{"x", 0}, {"y", 1}, {"z", 2}, {"xy", 3}, {"yz", 4}};
  Tokenizer t = make({{"model", bpe(vocab, {"y z", "x y"})}});
  std::string word;
  Ids expected;
  for (int i = 0; i < 40; ++i) {
    word += "xyz";
    expected.insert(expected.end(), {0, 4});  // "y z" ranks first, so x stays alone
  }
  EXPECT_EQ(t.encode(word), expected);
}

class AddedTokens : public ::testing::Test {
 protected:
  // Characters a, b, space, <, x, > plus the added token "<x>" (id 6) with the given options.
  Tokenizer with_options(json flags, json normalizer = nullptr) {
    json vocab = {{"a", 0}, {"b", 1}, {" ", 2}, {"<", 3}, {"x", 4}, {">", 5}};
    return make({{"model", bpe(vocab, json::array())},
                 {"added_tokens", {added_token(6, "<x>", flags)}},
                 {"normalizer", normalizer}});
  }
};

TEST_F(AddedTokens, MatchBeforeAnythingElse) {
  Tokenizer t = with_options(json::object());
  EXPECT_EQ(t.encode("a <x>b"), (Ids{0, 2, 6, 1}));
  EXPECT_EQ(t.encode("<x><x>"), (Ids{6, 6}));
  EXPECT_EQ(t.decode(Ids{0, 6, 1}, true), "a b");  // no decoder: tokens joined by spaces
}

TEST_F(AddedTokens, LeftAndRightStripSwallowWhiteSpace) {
  EXPECT_EQ(with_options({{"lstrip", true}}).encode("a  <x> b"), (Ids{0, 6, 2, 1}));
  EXPECT_EQ(with_options({{"rstrip", true}}).encode("a  <x> b"), (Ids{0, 2, 2, 6, 1}));
  EXPECT_EQ(with_options({{"lstrip", true}, {"rstrip", true}}).encode("a \t<x>\n b"), (Ids{0, 6, 1}));
}

TEST_F(AddedTokens, SingleWordMatchesOnlyOutsideWords) {
  Tokenizer t = with_options({{"single_word", true}});
  EXPECT_EQ(t.encode("a<x>b"), (Ids{0, 3, 4, 5, 1}));
  EXPECT_EQ(t.encode("a <x> b"), (Ids{0, 2, 6, 2, 1}));
  EXPECT_EQ(t.encode("<x>"), Ids{6});
}

TEST_F(AddedTokens, NormalizedTokensMatchTheNormalizedText) {
  json upper_to_lower = {{"type", "Replace"}, {"pattern", {{"String", "X"}}}, {"content", "x"}};
  EXPECT_EQ(with_options({{"normalized", true}}, upper_to_lower).encode("a<X>"), (Ids{0, 6}));
  EXPECT_EQ(with_options({{"normalized", false}}, upper_to_lower).encode("a<X>"), (Ids{0, 3, 4, 5}));
}

TEST_F(AddedTokens, TakeTheirIdsAsHfAssignsThem) {
  // HF ignores the ids written for added tokens: one in the vocabulary keeps its vocabulary id, a
  // new one takes the next id after the vocabulary (and after the added tokens before it).
  json vocab = {{"a", 0}, {"b", 1}, {"ab", 2}};
  Tokenizer t =
      make({{"model", bpe(vocab, json::array())},
            {"added_tokens", {added_token(40, "<new>"), added_token(7, "ab"), added_token(9, "<other>")}}});
  EXPECT_EQ(t.encode("<other>ab<new>"), (Ids{4, 2, 3}));
  EXPECT_EQ(t.vocab_size(), 5u);
  EXPECT_TRUE(t.is_special(2));
  EXPECT_EQ(t.decode(Ids{3, 2, 4}, true), "");
}

TEST(Metaspace, PrependsSplitsAndDecodes) {
  json vocab = {{"▁a", 0}, {"▁b", 1}, {"a", 2}, {"b", 3}, {"▁", 4}};
  auto metaspace = [&](const std::string& scheme) {
    json spec = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", scheme}, {"split", true}};
    return make({{"model", bpe(vocab, {"▁ a", "▁ b"})},
                 {"pre_tokenizer", spec},
                 {"decoder", spec},
                 {"added_tokens", {added_token(5, "<s>")}}});
  };
  Tokenizer always = metaspace("always");
  EXPECT_EQ(always.encode("a b"), (Ids{0, 1}));
  EXPECT_EQ(always.encode("a <s>b"), (Ids{0, 4, 5, 1}));
  EXPECT_EQ(always.decode(Ids{0, 1}), "a b");
  Tokenizer first = metaspace("first");
  EXPECT_EQ(first.encode("a <s>b"), (Ids{0, 4, 5, 3}));  // only the start of the input gets '▁'
  Tokenizer never = metaspace("never");
  EXPECT_EQ(never.encode("a b"), (Ids{2, 1}));
  EXPECT_EQ(never.decode(Ids{0, 1}), " a b");
}

// The pieces a pre-tokenizer described by `spec` cuts text into.
std::vector<std::string> pre_tokenize(const json& spec, const std::string& text) {
  std::string file = "test";
  auto pre_tokenizer = tok::make_pre_tokenizer(tok::JsonField(spec, file));
  tok::PreTokens tokens;
  tokens.text = text;
  tokens.pieces = {{0, static_cast<uint32_t>(text.size()), true}};
  pre_tokenizer->pre_tokenize(tokens);
  std::vector<std::string> pieces;
  for (const auto& piece : tokens.pieces) pieces.emplace_back(tokens.view(piece));
  return pieces;
}

TEST(Split, EachBehaviourGroupsMatchesLikeHf) {
  auto split = [](const std::string& behavior, bool invert = false) {
    json spec = {
        {"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
    return pre_tokenize(spec, "a-b--c");
  };
  using Pieces = std::vector<std::string>;
  EXPECT_EQ(split("Removed"), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(split("Isolated"), (Pieces{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split("MergedWithPrevious"), (Pieces{"a-", "b-", "-", "c"}));
  EXPECT_EQ(split("MergedWithNext"), (Pieces{"a", "-b", "-", "-c"}));
  EXPECT_EQ(split("Contiguous"), (Pieces{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(split("Removed", true), (Pieces{"-", "-", "-"}));  // each match is its own piece
}

TEST(Split, Gpt2ByteLevelRegexAndAlphabet) {
  json spec = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  EXPECT_EQ(pre_tokenize(spec, "Hello  world's\n"),
            (std::vector<std::string>{"Hello", "Ġ", "Ġworld", "'s", "Ċ"}));
  spec["add_prefix_space"] = true;
  EXPECT_EQ(pre_tokenize(spec, "hi"), (std::vector<std::string>{"Ġhi"}));
}

TEST(Regex, WhiteSpaceIsOnigurumasNotPcre2s) {
  tok::Regex space("\\s+");
  size_t begin = 0, end = 0;
  EXPECT_FALSE(space.find("a\u180Eb", 0, begin, end));  // Mongolian vowel separator: not White_Space
  ASSERT_TRUE(space.find("a\u0085\u3000b", 0, begin, end));
  EXPECT_EQ(begin, 1u);
  EXPECT_EQ(end, 6u);
  EXPECT_EQ(tok::translate_oniguruma(R"([^\s\p{L}]|\S|\\s)"),
            R"([^\p{White_Space}\p{L}]|\P{White_Space}|\\s)");
}

TEST(Unicode, BlockwiseNormalizationEqualsWholeStringNormalization) {
  // Characters that compose, decompose, reorder or do nothing, mixed at random.
  const std::vector<char32_t> alphabet = {'a',    'e',    'A',    'K',    ' ',     '1',    0x0301, 0x0300,
                                          0x0323, 0x0308, 0x00E9, 0x00C5, 0x212B,  0x1E0A, 0x1100, 0x1161,
                                          0x11A8, 0xAC00, 0xAC01, 0x4E00, 0x3042,  0x304B, 0x3099, 0x0B47,
                                          0x0B3E, 0x0958, 0xFB01, 0x2460, 0x1F600, 0x05D0};
  const std::pair<tok::UnicodeForm, int> forms[] = {
      {tok::UnicodeForm::NFC, UTF8PROC_COMPOSE},
      {tok::UnicodeForm::NFD, UTF8PROC_DECOMPOSE},
      {tok::UnicodeForm::NFKC, UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
      {tok::UnicodeForm::NFKD, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}};
  std::mt19937 random(1);
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    for (size_t n = random() % 12; n > 0; --n) tok::append_utf8(text, alphabet[random() % alphabet.size()]);
    for (auto [form, options] : forms) {
      utf8proc_uint8_t* whole = nullptr;
      utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                             static_cast<utf8proc_ssize_t>(text.size()), &whole,
                                             static_cast<utf8proc_option_t>(UTF8PROC_STABLE | options));
      ASSERT_GE(length, 0);
      std::string expected(reinterpret_cast<char*>(whole), static_cast<size_t>(length));
      std::free(whole);
      ASSERT_EQ(tok::unicode_normalize(text, form), expected) << json(text).dump() << " form " << int(form);
    }
  }
}

TEST(Utf8, LossyConversionFollowsRust) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(tok::utf8_lossy("a\xF0\x9F\x98"
                            "b"),
            "a" + fffd + "b");                                     // one U+FFFD for a cut-short sequence
  EXPECT_EQ(tok::utf8_lossy("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogate: each byte
  EXPECT_EQ(tok::utf8_lossy("\xC0\xAF"), fffd + fffd);             // overlong
  EXPECT_EQ(tok::utf8_lossy("\xE4\xB8"), fffd);
  EXPECT_EQ(tok::utf8_lossy("中文"), "中文");
  EXPECT_EQ(tok::find_invalid_utf8("abcdefghij\xFF"), 10u);
}

}  // namespace
}  // namespace gerbil
