// Bad tokenizer files and bad inputs: each must fail with a gerbil::Error whose message names the
// culprit (the file and field, the byte offset, the id and its position).
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace gerbil {
namespace {

namespace fs = std::filesystem;

// Runs f, which must throw gerbil::Error, and checks the message holds every one of `parts`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a gerbil::Error";
  } catch (const Error& e) {
    std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

// A small valid tokenizer.json to break in one place at a time.
const char* kValid = R"({
  "added_tokens": [{"id": 5, "content": "<s>", "special": true, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false}],
  "normalizer": null,
  "pre_tokenizer": {"type": "Split", "pattern": {"Regex": " ?[a-z]+"}, "behavior": "Isolated", "invert": false},
  "post_processor": null,
  "decoder": null,
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, " ": 3, "c": 4}, "merges": ["a b"]}
})";

class TokenizerErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gerbil_tokenizer_errors_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // kValid with `from` replaced by `to` (which must occur in it).
  fs::path variant(const std::string& from, const std::string& to) {
    std::string text = kValid;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return write("tokenizer.json", text.replace(at, from.size(), to));
  }

  fs::path dir_;
};

TEST_F(TokenizerErrors, TheValidFileLoads) {
  Tokenizer t = Tokenizer::load(write("tokenizer.json", kValid));
  EXPECT_EQ(t.encode("ab c<s>"), (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(t.decode(std::vector<int32_t>{2, 3, 4}), "ab   c");  // no decoder: tokens joined by spaces
}

TEST_F(TokenizerErrors, MissingFileOrFolderNamesThePath) {
  expect_error([&] { Tokenizer::load(dir_ / "nope.json"); }, {"nope.json", "no such"});
  expect_error([&] { Tokenizer::load(dir_); }, {dir_.string(), "no tokenizer.json"});
}

TEST_F(TokenizerErrors, MalformedJsonNamesTheFile) {
  fs::path path = write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0,}})");
  expect_error([&] { Tokenizer::load(path); }, {path.string(), "not valid JSON"});
}

TEST_F(TokenizerErrors, MissingFieldsAreNamed) {
  fs::path path = write("tokenizer.json", R"({"added_tokens": []})");
  expect_error([&] { Tokenizer::load(path); }, {path.string(), "missing field 'model'"});
  path = variant(R"("vocab": {"a": 0, "b": 1, "ab": 2, " ": 3, "c": 4}, )", "");
  expect_error([&] { Tokenizer::load(path); }, {path.string(), "field 'model'", "missing field 'vocab'"});
  path = variant(R"(, "merges": ["a b"])", "");
  expect_error([&] { Tokenizer::load(path); }, {"missing field 'merges'"});
  path = variant(R"("id": 5, )", "");
  expect_error([&] { Tokenizer::load(path); }, {"field 'added_tokens[0]'", "missing field 'id'"});
}

TEST_F(TokenizerErrors, WrongTypesAreNamed) {
  expect_error([&] { Tokenizer::load(variant(R"("a": 0)", R"("a": "zero")")); },
               {"field 'model.vocab.a'", "expected an integer"});
  expect_error([&] { Tokenizer::load(variant(R"("a": 0)", R"("a": -4)")); }, {"field 'model.vocab.a'", "-4"});
  expect_error([&] { Tokenizer::load(variant(R"(["a b"])", R"(["a b c"])")); },
               {"field 'model.merges[0]'", "'a b c'"});
  expect_error([&] { Tokenizer::load(variant(R"(["a b"])", R"([["a"]])")); }, {"field 'model.merges[0]'"});
}

TEST_F(TokenizerErrors, UnknownModelTypeIsNamed) {
  expect_error([&] { Tokenizer::load(variant(R"("type": "BPE")", R"("type": "WordPiece")")); },
               {"field 'model.type'", "unsupported model type 'WordPiece'"});
}

TEST_F(TokenizerErrors, MergeNamingAnUnknownTokenIsNamed) {
  expect_error([&] { Tokenizer::load(variant(R"(["a b"])", R"(["a b", "a x"])")); },
               {"field 'model.merges[1]'", "'a x'", "token 'x'"});
  // The merged token must be in the vocabulary too.
  expect_error([&] { Tokenizer::load(variant(R"(["a b"])", R"(["b a"])")); },
               {"model.merges[0]", "token 'ba'"});
}

TEST_F(TokenizerErrors, UnsupportedComponentsAreNamed) {
  expect_error(
      [&] {
        Tokenizer::load(variant(R"("normalizer": null)", R"("normalizer": {"type": "BertNormalizer"})"));
      },
      {"field 'normalizer.type'", "unsupported normalizer type 'BertNormalizer'"});
  expect_error([&] { Tokenizer::load(variant(R"("decoder": null)", R"("decoder": {"type": "WordPiece"})")); },
               {"field 'decoder.type'", "unsupported decoder type 'WordPiece'"});
  expect_error(
      [&] {
        Tokenizer::load(
            variant(R"("post_processor": null)", R"("post_processor": {"type": "BertProcessing"})"));
      },
      {"field 'post_processor.type'", "BertProcessing"});
  expect_error([&] { Tokenizer::load(variant(R"("type": "Split")", R"("type": "Whitespace")")); },
               {"field 'pre_tokenizer.type'", "unsupported pre_tokenizer type 'Whitespace'"});
  expect_error([&] { Tokenizer::load(variant(R"("Isolated")", R"("Sideways")")); },
               {"field 'pre_tokenizer.behavior'", "Sideways"});
}

TEST_F(TokenizerErrors, BadRegexIsNamed) {
  expect_error([&] { Tokenizer::load(variant(R"(" ?[a-z]+")", R"("( ?[a-z]+")")); },
               {"field 'pre_tokenizer.pattern.Regex'", "bad regex"});
}

TEST_F(TokenizerErrors, TemplateNamingAnUnknownSpecialTokenIsNamed) {
  std::string processor = R"("post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}})";
  expect_error([&] { Tokenizer::load(variant(R"("post_processor": null)", processor)); },
               {"field 'post_processor.single[0].SpecialToken'", "'<bos>'"});
}

TEST_F(TokenizerErrors, Gpt2PairErrorsNameFileAndLine) {
  write("vocab.json", R"({"a": 0, "b": 1, "ab": 2})");
  fs::path merges = write("merges.txt", "#version: 0.2\na b\na  b\n");
  expect_error([&] { Tokenizer::load(dir_); }, {merges.string(), "line 3"});
  write("merges.txt", "#version: 0.2\nb a\n");
  expect_error([&] { Tokenizer::load(dir_); }, {merges.string(), "line 2", "token 'ba'"});
  fs::remove(merges);
  expect_error([&] { Tokenizer::load(dir_ / "vocab.json"); }, {"merges.txt"});
}

TEST_F(TokenizerErrors, InvalidUtf8InputNamesTheOffset) {
  Tokenizer t = Tokenizer::load(write("tokenizer.json", kValid));
  expect_error([&] { t.encode("ab\xC3(c"); }, {"not valid UTF-8", "offset 2"});
  expect_error([&] { t.encode("abc\xF0\x9F\x98"); }, {"offset 3"});             // cut short
  expect_error([&] { t.encode("a\xED\xA0\x80"); }, {"offset 1"});               // a UTF-16 surrogate
  expect_error([&] { t.encode(std::string("ab\xC0\xAF", 4)); }, {"offset 2"});  // overlong
}

// Ids without a token (a padded model's logits reach past the tokenizer's ids) decode to nothing, as the
// tokenizers library behind transformers skips them; its ids are unsigned, so a negative id is an error.
TEST_F(TokenizerErrors, IdsWithoutATokenDecodeToNothingNegativeIdsAreErrors) {
  Tokenizer t = Tokenizer::load(write("tokenizer.json", kValid));
  EXPECT_EQ(t.decode(std::vector<int32_t>{0, 99, 1, 6}), "a b");
  EXPECT_EQ(t.decode(std::vector<int32_t>{6, 151935}), "");
  EXPECT_EQ(t.decode(std::vector<int32_t>{5, 6, 2}, true), "ab");
  expect_error([&] { t.decode(std::vector<int32_t>{0, 1, -1}); }, {"token id -1", "position 2"});
  expect_error([&] { t.token_text(6); }, {"token id 6"});
}

}  // namespace
}  // namespace gerbil
