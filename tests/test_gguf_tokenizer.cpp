// Tokenizers from GGUF metadata: the fixture tokenizers converted to tokenizer.ggml.* keys as llama.cpp's
// converter writes them, rebuilt through gguf_tokenizer_json + Tokenizer::from_json, encode every fixture
// string to the ids the Hugging Face tokenizer gives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
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

// tokenizer.json's vocabulary, merges and added tokens as GGUF metadata (PRE names the pre-tokenizer).
GgufWriter gguf_from_tokenizer_json(const nlohmann::json& hf, const std::string& pre, std::optional<int32_t> bos) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto place = [&](int64_t id, const std::string& text, int32_t type) {
    if (tokens.size() <= std::size_t(id)) tokens.resize(std::size_t(id) + 1), types.resize(std::size_t(id) + 1, 1);
    tokens[std::size_t(id)] = text;
    types[std::size_t(id)] = type;
  };
  for (const auto& [text, id] : hf["model"]["vocab"].items()) place(id.get<int64_t>(), text, 1);
  for (const auto& added : hf["added_tokens"]) place(added["id"], added["content"], added["special"].get<bool>() ? 3 : 4);
  std::vector<std::string> merges;
  for (const auto& merge : hf["model"]["merges"])
    merges.push_back(merge.is_string() ? merge.get<std::string>() : merge[0].get<std::string>() + " " + merge[1].get<std::string>());
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_strings("tokenizer.ggml.merges", merges);
  w.add_bool("tokenizer.ggml.add_bos_token", bos.has_value());
  if (bos) w.add_u32("tokenizer.ggml.bos_token_id", uint32_t(*bos));
  w.add_string("tokenizer.chat_template", "{{ messages[0]['content'] }}");
  return w;
}

struct Case {
  std::string name, pre;
  std::optional<int32_t> bos;
};

class GgufTokenizer : public ::testing::TestWithParam<Case> {};

TEST_P(GgufTokenizer, EncodesEveryFixtureStringLikeHuggingFace) {
  const Case& c = GetParam();
  std::filesystem::path hf_file = test::tokenizer_dir(c.name) / "tokenizer.json";
  std::filesystem::path ref_file = test::fixtures_dir() / "tokenizers" / c.name / "tokenizer_ref.json";
  GERBIL_REQUIRE_PATH(hf_file, "scripts/setup.sh fetches the tokenizer files into .deps/tokenizers");
  GERBIL_REQUIRE_PATH(ref_file, "the reference fixtures live in ../shared/fixtures");
  std::string bytes = gguf_from_tokenizer_json(nlohmann::json::parse(test::read_text(hf_file)), c.pre, c.bos).bytes();
  Gguf gguf = Gguf::parse(std::as_bytes(std::span(bytes)), "tokenizer.gguf");
  Tokenizer tokenizer = Tokenizer::from_json(gguf_tokenizer_json(gguf), "tokenizer.gguf");
  EXPECT_EQ(gguf_chat_template(gguf), "{{ messages[0]['content'] }}");
  auto refs = nlohmann::json::parse(test::read_text(ref_file));
  ASSERT_GT(refs.size(), 10u);
  for (const auto& ref : refs) {
    std::string text = ref["text"];
    EXPECT_EQ(tokenizer.encode(text, false), ref["ids"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tokenizer.encode(text, true), ref["ids_with_special_tokens"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tokenizer.decode(ref["ids"].get<std::vector<int32_t>>()), ref["decoded"].get<std::string>()) << text;
  }
}

// tokenizer.ggml.add_bos_token puts the BOS token in front when special tokens are asked for.
TEST(GgufTokenizerBos, AddBosTokenPrependsIt) {
  std::filesystem::path hf_file = test::tokenizer_dir("llama3") / "tokenizer.json";
  GERBIL_REQUIRE_PATH(hf_file, "scripts/setup.sh fetches the tokenizer files into .deps/tokenizers");
  std::string bytes = gguf_from_tokenizer_json(nlohmann::json::parse(test::read_text(hf_file)), "llama-bpe", 128000).bytes();
  Tokenizer tokenizer =
      Tokenizer::from_json(gguf_tokenizer_json(Gguf::parse(std::as_bytes(std::span(bytes)), "t.gguf")), "t.gguf");
  EXPECT_EQ(tokenizer.encode("Hello, world!", false), (std::vector<int32_t>{9906, 11, 1917, 0}));
  EXPECT_EQ(tokenizer.encode("Hello, world!", true), (std::vector<int32_t>{128000, 9906, 11, 1917, 0}));
  EXPECT_TRUE(tokenizer.is_special(128000));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufTokenizer,
                         ::testing::Values(Case{"qwen3", "qwen2", std::nullopt}, Case{"llama3", "llama-bpe", std::nullopt}),
                         [](const auto& info) { return info.param.name; });

TEST(GgufTokenizerErrors, NameTheKey) {
  auto error_for = [](GgufWriter w) {
    std::string bytes = w.bytes();
    return test::error_of([&] { gguf_tokenizer_json(Gguf::parse(std::as_bytes(std::span(bytes)), "t.gguf")); });
  };
  GgufWriter spm;
  spm.add_string("tokenizer.ggml.model", "llama");
  EXPECT_THAT(error_for(spm), HasSubstr("tokenizer.ggml.model \"llama\" is not supported"));
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
  EXPECT_THAT(error_for(bos), HasSubstr("bos_token_id is missing or outside the 2 tokens"));
}

}  // namespace
}  // namespace gerbil
