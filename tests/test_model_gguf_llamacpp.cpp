// GGUF files made by llama.cpp's own convert_hf_to_gguf.py and llama-quantize (tests/data/gguf/llamacpp, made
// by tools/make_gguf_fixtures.py: tiny random llama, qwen2, gemma and phi3 models in Q8_0, Q4_0, Q4_K_M,
// Q6_K and Q3_K_M), read through ModelFiles::open: matrices stay in their blocks (no f32 expansion), and a float64
// forward pass on the views, dequantized here, gives transformers' float64 logits on gguf-py's dequantized
// weights within 1e-4 relative with the same argmax at every position. That checks the block decoders against
// ggml's, the converter's Q/K permutation and Gemma's + 1 undone, and the config read from the metadata.
//
// The forward pass covers the sequential pre-norm blocks these fixtures have (RMSNorm, rotary, gated MLP,
// separate or fused q/k/v and gate/up); the GPU graph's run of the same files is test_graph_gguf's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/weights.h"
#include "support/float64_forward.h"
#include "support/logits.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

std::filesystem::path data_dir() { return test::project_root() / "tests" / "data" / "gguf" / "llamacpp"; }

nlohmann::json references() { return nlohmann::json::parse(test::read_text(data_dir() / "references.json")); }

class LlamaCppFixture : public ::testing::TestWithParam<std::string> {
 protected:
  nlohmann::json fixture() const {
    nlohmann::json all = references();
    for (const nlohmann::json& f : all["fixtures"])
      if (f["file"] == GetParam() + ".gguf") return f;
    throw std::runtime_error(GetParam() + " is not in references.json");
  }
};

// Matrices are block views of the file (or float views), never expanded: as many block views as the file
// has quantized matrices, each of the file's type.
TEST_P(LlamaCppFixture, MatricesStayInTheirBlocks) {
  std::filesystem::path path = data_dir() / (GetParam() + ".gguf");
  ModelFiles files = ModelFiles::open(path);
  Gguf gguf = Gguf::open(path);
  std::map<std::string, int> file_types, view_types;
  for (const GgufTensor& t : gguf.tensors())
    if (t.dims.size() == 2 && t.type != GgmlType::F32) ++file_types[std::string(ggml_type_name(t.type))];
  for (const auto& [name, view] : files.tensors().tensors())
    if (view.block_type) ++view_types[std::string(ggml_type_name(*view.block_type))];
  EXPECT_EQ(view_types, file_types);
  EXPECT_FALSE(file_types.empty());
  const TensorView& embed = *files.weights().get(Role::Embed).weight;
  ASSERT_TRUE(embed.block_type.has_value());
  EXPECT_EQ(embed.shape, (std::vector<int64_t>{files.config().vocab_size, files.config().hidden_size}));
  EXPECT_EQ(embed.bytes.size(), uint64_t(embed.shape[0]) * ggml_byte_size(*embed.block_type, uint64_t(embed.shape[1])));
  // The file's own bytes, as they are.
  std::span<const std::byte> stored = gguf.find_tensor("token_embd.weight")->bytes;
  ASSERT_EQ(embed.bytes.size(), stored.size());
  EXPECT_EQ(std::memcmp(embed.bytes.data(), stored.data(), stored.size()), 0);
}

TEST_P(LlamaCppFixture, Float64ForwardMatchesTransformers) {
  nlohmann::json f = fixture();
  ModelFiles files = ModelFiles::open(data_dir() / f["file"].get<std::string>());
  EXPECT_EQ(files.arch().name, f["hf_architecture"].get<std::string>());
  const size_t vocab = size_t(files.config().vocab_size);
  std::vector<float> want = test::read_f32(data_dir() / f["logits"].get<std::string>());
  size_t row = 0;
  for (const nlohmann::json& prompt : f["prompt_ids"]) {
    std::vector<uint32_t> ids = prompt.get<std::vector<uint32_t>>();
    std::vector<double> logits = test::float64_forward(files, ids);
    ASSERT_LE((row + ids.size()) * vocab, want.size());
    for (size_t t = 0; t < ids.size(); ++t, ++row) {
      std::vector<float> got(logits.begin() + std::ptrdiff_t(t * vocab), logits.begin() + std::ptrdiff_t((t + 1) * vocab));
      std::span<const float> expected(want.data() + row * vocab, vocab);
      EXPECT_LT(test::relative_error(got, expected), 1e-4) << GetParam() << " row " << row;
      EXPECT_EQ(test::argmax(got), test::argmax(expected)) << GetParam() << " row " << row;
    }
  }
  EXPECT_EQ(row * vocab, want.size());
}

// The file llama-quantize made from llama-Q8_0.gguf (test_graph_gguf's RequantizedGguf): its matrices stay in
// their blocks too, of the types llama-quantize chose.
TEST(RequantizedFile, Q2KMatricesStayInTheirBlocks) {
  ModelFiles files = ModelFiles::open(data_dir() / "llama-Q2_K.gguf");
  std::set<std::string> view_types;
  size_t blocks = 0;
  for (const auto& [name, view] : files.tensors().tensors())
    if (view.block_type) view_types.insert(std::string(ggml_type_name(*view.block_type))), ++blocks;
  EXPECT_EQ(view_types, (std::set<std::string>{"Q2_K", "Q3_K", "Q6_K"}));
  EXPECT_EQ(blocks, 16u);  // every matrix of the two layers, the embedding and the output
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaCppFixture,
                         ::testing::Values("llama-Q8_0", "llama-Q4_0", "llama-Q4_K_M", "llama-Q6_K", "llama-Q3_K_M",
                                           "qwen2-Q4_K_M", "qwen2-Q3_K_M", "gemma-Q4_K_M", "phi3-Q4_K_M"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace gerbil
