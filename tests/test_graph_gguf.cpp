// GGUF models end to end: fixture checkpoints converted to GGUF the way llama.cpp's convert_hf_to_gguf.py
// lays them out (llama.cpp tensor names, llama's Q/K rows permuted, Gemma's norms stored as 1 + w, GPT-2's
// Conv1D weights transposed, hyperparameters in <arch>.* metadata), loaded through ModelFiles::open, and run:
// f32 files match transformers' float64 logits like the folders do; Q8_0 files match gerbil's f32 run of the
// same dequantized weights (Q8_0 and Q4_0); files llama.cpp made match transformers on their dequantized weights.
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gerbil/error.h"
#include "graph/model.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/quant.h"
#include "model/weights.h"
#include "support/device.h"
#include "support/gguf_writer.h"
#include "support/float64_forward.h"
#include "support/logits.h"
#include "test_model_support.h"

namespace gerbil::graph {
namespace {

using test::argmax;
using test::fixtures_dir;
using test::read_f32;
using test::relative_error;
using test::GgufWriter;
using test::ScratchDir;
using ::testing::HasSubstr;

std::vector<int32_t> input_ids(const std::filesystem::path& dir) {
  return nlohmann::json::parse(test::read_text(dir / "ref" / "input_ids.json")).get<std::vector<int32_t>>();
}

std::string gguf_family(std::string_view hf_architecture) {
  if (hf_architecture == "LlamaForCausalLM" || hf_architecture == "MistralForCausalLM") return "llama";
  if (hf_architecture == "Qwen2ForCausalLM") return "qwen2";
  if (hf_architecture == "Qwen3ForCausalLM") return "qwen3";
  if (hf_architecture == "GemmaForCausalLM") return "gemma";
  if (hf_architecture == "Gemma3ForCausalLM") return "gemma3";
  if (hf_architecture == "Phi3ForCausalLM") return "phi3";
  if (hf_architecture == "PhiForCausalLM") return "phi2";
  if (hf_architecture == "GPT2LMHeadModel") return "gpt2";
  throw std::runtime_error("no GGUF family for " + std::string(hf_architecture));
}

// What llama.cpp's permute() does to Q/K rows: within each head, Hugging Face row i * D/2 + j goes to 2j + i.
std::vector<float> permute_rows(const std::vector<float>& hf, int64_t heads, int64_t row_length) {
  int64_t per_head = int64_t(hf.size()) / row_length / heads;
  std::vector<float> out(hf.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < per_head / 2; ++j)
        std::memcpy(&out[std::size_t((h * per_head + 2 * j + i) * row_length)],
                    &hf[std::size_t((h * per_head + i * per_head / 2 + j) * row_length)], std::size_t(row_length) * 4);
  return out;
}

enum class Weights { F32, Quantized, Dequantized };

// Rope scaling as llama.cpp's converter writes it: YaRN's type, factor and original context as metadata;
// LongRoPE's original context and attention factor as metadata, its factor sets as tensors.
void add_rope_scaling(GgufWriter& w, const std::string& p, const RopeParams& rope) {
  auto factors = [&](const char* name, const std::vector<double>& values) {
    std::vector<float> f(values.begin(), values.end());
    w.add_tensor(name, uint32_t(GgmlType::F32), {f.size()}, std::string(reinterpret_cast<const char*>(f.data()), f.size() * 4));
  };
  switch (rope.type) {
    case RopeType::Default: break;
    case RopeType::Yarn:
      w.add_string(p + "rope.scaling.type", "yarn");
      w.add_f32(p + "rope.scaling.factor", float(rope.factor));
      w.add_u32(p + "rope.scaling.original_context_length", uint32_t(rope.original_max_positions));
      break;
    case RopeType::LongRope:
      w.add_u32(p + "rope.scaling.original_context_length", uint32_t(rope.original_max_positions));
      w.add_f32(p + "rope.scaling.attn_factor", float(rope.attention_factor));
      factors("rope_factors_long.weight", rope.long_factors);
      factors("rope_factors_short.weight", rope.short_factors);
      break;
    default: throw std::runtime_error("no GGUF form written here for this rope scaling");
  }
}

// The checkpoint in folder DIR as a GGUF file, its matrices stored as WEIGHTS says: in F32, in BLOCKS, or in F32
// holding the values the BLOCKS decode to.
GgufWriter gguf_from_folder(const std::filesystem::path& dir, Weights weights, GgmlType blocks = GgmlType::Q8_0) {
  ModelFiles hf = ModelFiles::open(dir);
  const ModelConfig& c = hf.config();
  const ArchitectureSpec& arch = hf.arch();
  const std::string family = gguf_family(arch.name);
  const std::string p = family + ".";
  GgufWriter w;
  w.add_string("general.architecture", family);
  w.add_u32(p + "block_count", uint32_t(c.num_layers));
  w.add_u32(p + "embedding_length", uint32_t(c.hidden_size));
  w.add_u32(p + "feed_forward_length", uint32_t(c.intermediate_size));
  w.add_u32(p + "context_length", uint32_t(c.max_position_embeddings));
  w.add_u32(p + "attention.head_count", uint32_t(c.num_heads));
  w.add_u32(p + "attention.head_count_kv", uint32_t(c.num_kv_heads));
  w.add_u32(p + "attention.key_length", uint32_t(c.head_dim));
  w.add_u32(p + "attention.value_length", uint32_t(c.head_dim));
  bool layer_norm = arch.norm == NormKind::LayerNorm;
  w.add_f32(p + (layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"), float(c.norm_eps));
  if (arch.positions == PositionKind::Rotary) {
    w.add_f32(p + "rope.freq_base", float(c.rope_full.theta));
    w.add_u32(p + "rope.dimension_count", uint32_t(c.rotary_dim));
    add_rope_scaling(w, p, c.rope_full);
  }
  if (c.sliding_window > 0) w.add_u32(p + "attention.sliding_window", uint32_t(c.sliding_window));
  if (family == "gemma3") {  // the fixture's sliding layers come in a pattern of 2, not llama.cpp's 6
    int64_t pattern = 1;
    while (pattern < c.num_layers && c.sliding(pattern - 1)) ++pattern;
    w.add_u32(p + "attention.sliding_window_pattern", uint32_t(pattern));
  }

  auto add = [&](Role role, int layer, const char* part, const TensorView& view) {
    std::vector<float> values = test::floats_of(view);
    std::vector<int64_t> shape = view.shape;
    if (family == "llama" && (role == Role::Q || role == Role::K))
      values = permute_rows(values, role == Role::Q ? c.num_heads : c.num_kv_heads, shape.size() == 2 ? shape[1] : 1);
    if (arch.norm == NormKind::RmsNormPlusOne && is_norm_role(role))
      for (float& v : values) v += 1.0f;
    if (arch.conv1d_weights && is_linear_role(role) && role != Role::LmHead && shape.size() == 2) {
      std::vector<float> t(values.size());
      for (int64_t r = 0; r < shape[0]; ++r)
        for (int64_t k = 0; k < shape[1]; ++k) t[std::size_t(k * shape[0] + r)] = values[std::size_t(r * shape[1] + k)];
      values = t;
      std::swap(shape[0], shape[1]);
    }
    GgmlType type = GgmlType::F32;
    // Rows that are not whole blocks stay F32, as llama-quantize leaves them (a mixed file).
    if (weights != Weights::F32 && shape.size() == 2 && shape[1] % ggml_type_info(blocks).block_size == 0) {
      type = blocks;
      if (weights == Weights::Dequantized) {
        dequantize(type, quantize(type, values), values, "test");
        type = GgmlType::F32;
      }
    }
    std::vector<std::byte> bytes = quantize(type, values);
    w.add_tensor(gguf_tensor_name(arch, role, layer, part), uint32_t(type),
                 std::vector<uint64_t>(shape.rbegin(), shape.rend()),
                 std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  };
  auto add_role = [&](Role role, int layer, const RoleTensors& t) {
    if (t.weight) add(role, layer, "weight", *t.weight);
    if (t.bias) add(role, layer, "bias", *t.bias);
  };
  const ModelWeights& mw = hf.weights();
  for (Role role : {Role::Embed, Role::PosEmbed, Role::FinalNorm, Role::LmHead}) {
    if (role == Role::LmHead && mw.tied) {
      if (mw.get(role).bias) add(role, -1, "bias", *mw.get(role).bias);
      continue;
    }
    add_role(role, -1, mw.get(role));
  }
  for (int layer = 0; layer < c.num_layers; ++layer)
    for (int r = int(Role::AttnNorm); r < int(Role::Count); ++r) add_role(Role(r), layer, mw.get(layer, Role(r)));
  return w;
}

GgufWriter gguf_from_fixture(const std::string& fixture, Weights weights, GgmlType blocks = GgmlType::Q8_0) {
  return gguf_from_folder(fixtures_dir() / fixture, weights, blocks);
}

std::vector<float> run_logits(const std::filesystem::path& model, const std::vector<int32_t>& ids) {
  ModelFiles files = ModelFiles::open(model);
  // An f32 cache: the files' weights are compared, and a GGUF file's default f16 cache would round the keys.
  Model m(test::device(), files, ModelOptions{.context = 64, .kv_cache = KvCache::F32});
  return m.forward(ids, /*all_logits=*/true);
}

void expect_rows_close(const std::vector<float>& got, const std::vector<float>& want, std::size_t vocab, double bound,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t t = 0; t < want.size() / vocab; ++t) {
    std::span<const float> g(got.data() + t * vocab, vocab), w(want.data() + t * vocab, vocab);
    EXPECT_LT(relative_error(g, w), bound) << what << ": position " << t;
    EXPECT_EQ(argmax(g), argmax(w)) << what << ": argmax at position " << t;
  }
}

class GgufFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufFixture, F32LogitsMatchTransformers) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  gguf_from_fixture(GetParam(), Weights::F32).write(dir / "model.gguf");
  ModelFiles files = ModelFiles::open(dir / "model.gguf");
  ModelFiles folder = ModelFiles::open(fixtures_dir() / GetParam());
  if (folder.arch().name != "MistralForCausalLM") {  // GGUF calls Mistral llama
    EXPECT_EQ(files.config().arch, folder.config().arch);
  }
  EXPECT_EQ(files.config().num_kv_heads, folder.config().num_kv_heads);
  EXPECT_EQ(files.config().head_dim, folder.config().head_dim);
  EXPECT_EQ(files.config().tie_word_embeddings, folder.config().tie_word_embeddings);
  EXPECT_EQ(files.config().rotary_dim, folder.config().rotary_dim);
  auto want = read_f32(fixtures_dir() / GetParam() / "ref" / "logits.f32");
  auto got = run_logits(dir / "model.gguf", input_ids(fixtures_dir() / GetParam()));
  expect_rows_close(got, want, std::size_t(files.config().vocab_size), 1e-4, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufFixture,
                         ::testing::Values("qwen2-tiny", "qwen3-tiny", "llama-plain-tiny", "mistral-tiny", "gemma-tiny",
                                           "phi3-tiny", "phi-tiny", "gpt2-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Stretched rotary embeddings as llama.cpp stores them (tests/data/long's YaRN Qwen2 and LongRoPE Phi-3): the file
// gives the folder's frequencies, both LongRoPE sets, and attention factor, and its last rows of a 1,100-token
// prompt match the float64 reference.
class GgufRopeScaling : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufRopeScaling, GivesTheFoldersRotaryTablesAndLogits) {
  const std::filesystem::path folder_dir = test::project_root() / "tests" / "data" / "long" / GetParam();
  ScratchDir dir;
  gguf_from_folder(folder_dir, Weights::F32).write(dir / "model.gguf");
  ModelFiles file = ModelFiles::open(dir / "model.gguf"), folder = ModelFiles::open(folder_dir);
  const ModelConfig &got = file.config(), &want = folder.config();
  ASSERT_NE(want.rope_full.type, RopeType::Default);
  EXPECT_EQ(got.rope_full.type, want.rope_full.type);
  EXPECT_FLOAT_EQ(float(got.rope_full.attention_factor), float(want.rope_full.attention_factor));
  for (int64_t context : {want.rope_full.original_max_positions, want.max_position_embeddings})
    EXPECT_EQ(rope_inv_freq(got, 0, context), rope_inv_freq(want, 0, context)) << "context " << context;

  auto ids = input_ids(folder_dir);
  auto meta = nlohmann::json::parse(test::read_text(folder_dir / "ref" / "meta.json"));
  const std::size_t first = meta["logits_first_position"].get<std::size_t>(), vocab = std::size_t(got.vocab_size);
  Model m(test::device(), file, ModelOptions{.kv_cache = KvCache::F32});
  auto rows = m.forward(ids, /*all_logits=*/true);
  expect_rows_close(std::vector<float>(rows.begin() + std::ptrdiff_t(first * vocab), rows.end()),
                    read_f32(folder_dir / "ref" / "logits.f32"), vocab, 1e-4, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Long, GgufRopeScaling, ::testing::Values("qwen2-yarn-long", "phi3-longrope-long"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// llama.cpp's Gemma 3 files carry no attention scale: it is 1 / sqrt(key_length), but hidden_size / heads for the
// 27B model (62 layers), as llama.cpp takes it. The fixture's own scalar (24) is neither, so the file is compared
// with the folder given key_length's.
TEST(GgufGemma3, ScalesAttentionAsLlamaCppDoes) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  gguf_from_fixture("gemma3-tiny", Weights::F32).write(dir / "model.gguf");
  std::filesystem::create_directory(dir / "folder");
  for (const auto& entry : std::filesystem::directory_iterator(fixtures_dir() / "gemma3-tiny"))
    if (entry.path().filename() != "config.json")
      std::filesystem::create_symlink(entry.path(), dir / "folder" / entry.path().filename());
  nlohmann::json config = nlohmann::json::parse(test::read_text(fixtures_dir() / "gemma3-tiny" / "config.json"));
  config["query_pre_attn_scalar"] = config["head_dim"];
  test::write_json_file(dir / "folder" / "config.json", config);
  auto ids = input_ids(fixtures_dir() / "gemma3-tiny");
  expect_rows_close(run_logits(dir / "model.gguf", ids), run_logits(dir / "folder", ids), 512, 1e-5, "gemma3");

  for (auto [layers, scalar] : {std::pair{62, 168}, {34, 128}}) {
    GgufWriter w;
    w.add_string("general.architecture", "gemma3");
    for (auto [key, value] : {std::pair{"block_count", layers}, {"embedding_length", 5376}, {"feed_forward_length", 256},
                              {"context_length", 64}, {"attention.head_count", 32}, {"attention.key_length", 128}})
      w.add_u32(std::string("gemma3.") + key, uint32_t(value));
    w.add_f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
    w.add_tensor("token_embd.weight", uint32_t(GgmlType::F32), {5376, 1}, std::string(5376 * 4, '\0'));
    std::string bytes = w.bytes();
    nlohmann::json made = gguf_config_json(Gguf::parse(std::as_bytes(std::span(bytes)), "g.gguf"));
    EXPECT_EQ(made["query_pre_attn_scalar"], scalar) << layers << " layers";
  }
}

// GPT-2's lm_head is an nn.Linear, [vocab, hidden] like every family's, not a Conv1D: an untied checkpoint (its
// lm_head a copy of the embedding here) gives the tied fixture's logits, as a folder and as GGUF files (F32, and
// Q8_0 against its dequantized weights).
TEST(Gpt2, AnUntiedLmHeadIsStoredOutIn) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  std::filesystem::create_directory(dir / "folder");
  test::copy_fixture(
      "gpt2-tiny", dir / "folder",
      [](std::vector<TensorSource>& tensors) {
        for (const TensorSource& t : tensors)
          if (t.name == "transformer.wte.weight") {
            TensorSource head = t;
            head.name = "lm_head.weight";
            tensors.push_back(head);
            return;
          }
      },
      [](nlohmann::json& config) { config["tie_word_embeddings"] = false; });
  auto ids = input_ids(fixtures_dir() / "gpt2-tiny");
  auto want = read_f32(fixtures_dir() / "gpt2-tiny" / "ref" / "logits.f32");
  expect_rows_close(run_logits(dir / "folder", ids), want, 512, 1e-4, "untied folder");
  gguf_from_fixture((dir / "folder").string(), Weights::F32).write(dir / "f32.gguf");
  expect_rows_close(run_logits(dir / "f32.gguf", ids), want, 512, 1e-4, "untied GGUF file");
  gguf_from_fixture((dir / "folder").string(), Weights::Quantized).write(dir / "q8_0.gguf");
  gguf_from_fixture((dir / "folder").string(), Weights::Dequantized).write(dir / "dequantized.gguf");
  expect_rows_close(run_logits(dir / "q8_0.gguf", ids), run_logits(dir / "dequantized.gguf", ids), 512, 1e-6,
                    "untied Q8_0 GGUF file");
}

// End-of-turn ids other than the file's EOS end a turn too, as they do in llama.cpp.
TEST(GgufModel, EndOfTurnIdsStopGeneration) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  GgufWriter w = gguf_from_fixture("qwen2-tiny", Weights::F32);
  w.add_u32("tokenizer.ggml.eos_token_id", 7);
  w.add_u32("tokenizer.ggml.eot_token_id", 9);
  w.add_u32("tokenizer.ggml.eom_token_id", 7);
  w.write(dir / "model.gguf");
  EXPECT_EQ(ModelFiles::open(dir / "model.gguf").config().eos_token_ids, (std::vector<int64_t>{7, 9}));
}

struct QuantizedCase {
  std::string fixture;
  GgmlType type;
  double bound;  // of the relative error against the unquantized model's float64 logits
};

class GgufQuantized : public ::testing::TestWithParam<QuantizedCase> {};

// Blocks decode at load to exactly the floats an f32 file of the dequantized weights holds, so the two runs
// agree to rounding with the same argmax; both stay near the unquantized model's logits.
TEST_P(GgufQuantized, MatchesItsDequantizedF32Run) {
  GERBIL_REQUIRE_FIXTURES();
  const QuantizedCase& c = GetParam();
  ScratchDir dir;
  gguf_from_fixture(c.fixture, Weights::Quantized, c.type).write(dir / "quantized.gguf");
  gguf_from_fixture(c.fixture, Weights::Dequantized, c.type).write(dir / "f32.gguf");
  auto ids = input_ids(fixtures_dir() / c.fixture);
  auto quantized = run_logits(dir / "quantized.gguf", ids);
  auto f32 = run_logits(dir / "f32.gguf", ids);
  std::size_t vocab = 512;
  expect_rows_close(quantized, f32, vocab, 1e-6, "quantized vs its dequantized f32 weights");
  auto exact = read_f32(fixtures_dir() / c.fixture / "ref" / "logits.f32");
  for (std::size_t t = 0; t < exact.size() / vocab; ++t)
    EXPECT_LT(relative_error(std::span(quantized).subspan(t * vocab, vocab), std::span(exact).subspan(t * vocab, vocab)),
              c.bound)
        << "quantized vs the unquantized model, position " << t;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufQuantized,
                         ::testing::Values(QuantizedCase{"qwen2-tiny", GgmlType::Q8_0, 0.05},
                                           QuantizedCase{"llama-plain-tiny", GgmlType::Q4_0, 0.5},
                                           QuantizedCase{"gpt2-tiny", GgmlType::Q8_0, 0.05}),
                         [](const auto& info) {
                           std::string name = info.param.fixture + "_" + std::string(ggml_type_name(info.param.type));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Files made by llama.cpp's own convert_hf_to_gguf.py and llama-quantize (tools/make_gguf_fixtures.py), run on the
// GPU from their blocks (Q8_0, Q4_0, Q4_K_M's Q4_K / Q6_K / Q5_K mix, Q6_K): logits match transformers' float64
// forward pass on the dequantized weights, 1e-4 relative, same argmax.
class LlamaCppGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppGguf, GpuLogitsMatchTransformers) {
  std::filesystem::path dir = test::project_root() / "tests" / "data" / "gguf" / "llamacpp";
  nlohmann::json fixture, references = nlohmann::json::parse(test::read_text(dir / "references.json"));
  for (const nlohmann::json& f : references["fixtures"])
    if (f["file"] == GetParam() + ".gguf") fixture = f;
  ASSERT_FALSE(fixture.is_null()) << GetParam() << " is not in references.json";
  ModelFiles files = ModelFiles::open(dir / fixture["file"].get<std::string>());
  // An f32 cache: the dequantized weights are held to 1e-4, past what a default f16 cache's rounding allows.
  Model m(test::device(), files, ModelOptions{.context = 64, .kv_cache = KvCache::F32});
  std::vector<float> want = read_f32(dir / fixture["logits"].get<std::string>()), got;
  for (const nlohmann::json& prompt : fixture["prompt_ids"]) {
    m.reset();
    std::vector<float> rows = m.forward(prompt.get<std::vector<int32_t>>(), /*all_logits=*/true);
    got.insert(got.end(), rows.begin(), rows.end());
  }
  expect_rows_close(got, want, std::size_t(files.config().vocab_size), 1e-4, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaCppGguf,
                         ::testing::Values("llama-Q8_0", "llama-Q4_0", "llama-Q4_K_M", "llama-Q6_K", "llama-Q3_K_M",
                                           "qwen2-Q4_K_M", "qwen2-Q3_K_M", "gemma-Q4_K_M", "phi3-Q4_K_M"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// llama-Q2_K.gguf, llama-IQ4_NL.gguf, llama-IQ4_XS.gguf, llama-IQ3_M.gguf and llama-IQ3_XXS.gguf were made by
// llama.cpp's llama-quantize from llama-Q8_0.gguf (`--allow-requantize`; Q2_K with Q3_K and Q6_K, IQ4_NL and IQ4_XS
// with a Q6_K output, IQ3_M as IQ3_S with Q4_K and Q6_K, IQ3_XXS `--pure`, every tensor IQ3_XXS, since its mix needs
// an importance matrix) where
// transformers was not at hand, so no transformers logits come with them: the GPU's logits are held to the float64
// forward pass on each file's own blocks (support/float64_forward.h, which test_model_gguf_llamacpp holds to
// transformers on the other files), for llama-Q8_0's prompts: every type is decoded exactly, so only float rounding
// separates them.
class RequantizedGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(RequantizedGguf, GpuLogitsMatchTheFloat64Forward) {
  std::filesystem::path dir = test::project_root() / "tests" / "data" / "gguf" / "llamacpp";
  nlohmann::json prompts, references = nlohmann::json::parse(test::read_text(dir / "references.json"));
  for (const nlohmann::json& f : references["fixtures"])
    if (f["file"] == "llama-Q8_0.gguf") prompts = f["prompt_ids"];
  ASSERT_FALSE(prompts.is_null()) << "llama-Q8_0.gguf is not in references.json";
  ModelFiles files = ModelFiles::open(dir / (GetParam() + ".gguf"));
  Model m(test::device(), files, ModelOptions{.context = 64, .kv_cache = KvCache::F32});
  std::vector<float> got, want;
  for (const nlohmann::json& prompt : prompts) {
    m.reset();
    std::vector<float> rows = m.forward(prompt.get<std::vector<int32_t>>(), /*all_logits=*/true);
    got.insert(got.end(), rows.begin(), rows.end());
    std::vector<double> exact = test::float64_forward(files, prompt.get<std::vector<uint32_t>>());
    want.insert(want.end(), exact.begin(), exact.end());
  }
  expect_rows_close(got, want, std::size_t(files.config().vocab_size), 1e-5, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Files, RequantizedGguf,
                         ::testing::Values("llama-Q2_K", "llama-IQ4_NL", "llama-IQ4_XS", "llama-IQ3_M", "llama-IQ3_XXS"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(GgufModel, TensorNames) {
  const ArchitectureSpec& llama = *find_architecture("LlamaForCausalLM");
  const ArchitectureSpec& phi3 = *find_architecture("Phi3ForCausalLM");
  EXPECT_EQ(gguf_tensor_name(llama, Role::Q, 3, "weight"), "blk.3.attn_q.weight");
  EXPECT_EQ(gguf_tensor_name(llama, Role::Embed, -1, "weight"), "token_embd.weight");
  EXPECT_EQ(gguf_tensor_name(llama, Role::FinalNorm, -1, "weight"), "output_norm.weight");
  EXPECT_EQ(gguf_tensor_name(llama, Role::LmHead, -1, "weight"), "output.weight");
  EXPECT_EQ(gguf_tensor_name(llama, Role::MlpNorm, 0, "weight"), "blk.0.ffn_norm.weight");
  EXPECT_EQ(gguf_tensor_name(phi3, Role::GateUp, 1, "weight"), "blk.1.ffn_up.weight");
  EXPECT_EQ(gguf_tensor_name(phi3, Role::Qkv, 1, "weight"), "blk.1.attn_qkv.weight");
}

TEST(GgufModel, BadModelsNameTheProblem) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  auto error_for = [&](GgufWriter w) {
    w.write(dir / "bad.gguf");
    return test::error_of([&] { ModelFiles::open(dir / "bad.gguf"); });
  };
  GgufWriter unknown_arch = gguf_from_fixture("qwen2-tiny", Weights::F32);
  unknown_arch.add_string("general.architecture", "mamba");  // a second value for the key
  EXPECT_THAT(error_for(unknown_arch), HasSubstr("\"general.architecture\" appears twice"));

  GgufWriter mamba;
  mamba.add_string("general.architecture", "mamba");
  EXPECT_THAT(error_for(mamba), HasSubstr("general.architecture \"mamba\" is not supported"));

  GgufWriter extra = gguf_from_fixture("qwen2-tiny", Weights::F32);
  extra.add_tensor("blk.0.ssm_conv.weight", uint32_t(GgmlType::F32), {4}, std::string(16, '\0'));
  EXPECT_THAT(error_for(extra), HasSubstr("tensor \"blk.0.ssm_conv.weight\" is not a tensor gerbil knows"));

  GgufWriter beyond = gguf_from_fixture("qwen2-tiny", Weights::F32);
  beyond.add_tensor("blk.7.attn_q.weight", uint32_t(GgmlType::F32), {4}, std::string(16, '\0'));
  EXPECT_THAT(error_for(beyond), HasSubstr("tensor \"blk.7.attn_q.weight\" is not a tensor gerbil knows"));

  GgufWriter unsupported;
  unsupported.add_string("general.architecture", "qwen2");
  unsupported.add_tensor("token_embd.weight", uint32_t(GgmlType::IQ2_XXS), {256, 2}, std::string(132, '\0'));
  for (auto [key, value] : {std::pair{"block_count", 1}, {"embedding_length", 256}, {"feed_forward_length", 256},
                            {"context_length", 64}, {"attention.head_count", 4}})
    unsupported.add_u32(std::string("qwen2.") + key, uint32_t(value));
  unsupported.add_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
  EXPECT_THAT(error_for(unsupported),
              AllOf(HasSubstr("tensor \"token_embd.weight\""), HasSubstr("ggml type IQ2_XXS is not supported")));

  GgufWriter no_layers;
  no_layers.add_string("general.architecture", "llama");
  EXPECT_THAT(error_for(no_layers), HasSubstr("metadata \"llama.block_count\" is missing"));

  // A llama file of one layer, with TENSORS beside its embedding table (they divided by zero, read an empty list).
  auto llama = [](uint32_t rotary, const std::function<void(GgufWriter&)>& tensors) {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    for (auto [key, value] : {std::pair{"block_count", 1}, {"embedding_length", 64}, {"feed_forward_length", 64},
                              {"context_length", 64}, {"attention.head_count", 4}})
      w.add_u32(std::string("llama.") + key, uint32_t(value));
    w.add_u32("llama.rope.dimension_count", rotary);
    w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
    w.add_tensor("token_embd.weight", uint32_t(GgmlType::F32), {64, 8}, std::string(64 * 8 * 4, '\0'));
    tensors(w);
    return w;
  };
  EXPECT_THAT(error_for(llama(16, [](GgufWriter& w) { w.add_tensor("blk.0.attn_q.weight", 0, {64, 0}, ""); })),
              HasSubstr("tensor \"blk.0.attn_q.weight\": 0 rows do not split into 4 heads"));
  EXPECT_THAT(error_for(llama(0, [](GgufWriter& w) { w.add_tensor("rope_freqs.weight", 0, {0}, ""); })),
              HasSubstr("\"rope_freqs.weight\" holds 0 factors for 0 rotary frequencies"));
  std::vector<float> factors(8, 1.0f);
  factors[3] = std::nanf("");
  std::string factor_bytes(reinterpret_cast<const char*>(factors.data()), factors.size() * 4);
  EXPECT_THAT(error_for(llama(16, [&](GgufWriter& w) { w.add_tensor("rope_freqs.weight", 0, {8}, factor_bytes); })),
              HasSubstr("\"rope_freqs.weight\": factor 3 is nan"));
  // LongRoPE needs both factor sets and the original context.
  std::string ones(8 * 4, '\0');
  for (int i = 0; i < 8; ++i) std::memcpy(&ones[std::size_t(i) * 4], &factors[0], 4);
  EXPECT_THAT(error_for(llama(16, [&](GgufWriter& w) { w.add_tensor("rope_factors_long.weight", 0, {8}, ones); })),
              HasSubstr("tensor \"rope_factors_short.weight\" is missing"));
  EXPECT_THAT(error_for(llama(16, [&](GgufWriter& w) {
                w.add_tensor("rope_factors_long.weight", 0, {8}, ones);
                w.add_tensor("rope_factors_short.weight", 0, {8}, ones);
              })),
              HasSubstr("LongRoPE factors without metadata \"llama.rope.scaling.original_context_length\""));
  EXPECT_THAT(error_for(llama(16, [&](GgufWriter& w) {
                w.add_tensor("rope_factors_long.weight", 0, {4}, ones.substr(0, 16));
                w.add_tensor("rope_factors_short.weight", 0, {8}, ones);
              })),
              HasSubstr("\"rope_factors_long.weight\" holds 4 factors for 8 rotary frequencies"));
  // One scaling a file: LongRoPE's factors beside YaRN are refused, as is YaRN with what llama.cpp would multiply
  // into its attention factor.
  EXPECT_THAT(error_for(llama(16, [&](GgufWriter& w) {
                w.add_string("llama.rope.scaling.type", "yarn");
                w.add_f32("llama.rope.scaling.factor", 4.0f);
                w.add_tensor("rope_factors_long.weight", 0, {8}, ones);
                w.add_tensor("rope_factors_short.weight", 0, {8}, ones);
              })),
              HasSubstr("LongRoPE factor tensors beside rope scaling \"yarn\""));
  EXPECT_THAT(error_for(llama(16, [&](GgufWriter& w) {
                w.add_string("llama.rope.scaling.type", "yarn");
                w.add_f32("llama.rope.scaling.factor", 4.0f);
                w.add_f32("llama.rope.scaling.yarn_log_multiplier", 0.1f);
              })),
              HasSubstr("llama.rope.scaling.yarn_log_multiplier = 0.1"));
  // A type of longrope with no factors to apply would run as the unscaled rotary embedding.
  EXPECT_THAT(error_for(llama(16, [&](GgufWriter& w) { w.add_string("llama.rope.scaling.type", "longrope"); })),
              HasSubstr("rope.scaling.type is \"longrope\" but the file holds no rope_factors_long"));
}

}  // namespace
}  // namespace gerbil::graph
