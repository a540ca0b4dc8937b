// ModelFiles: every fixture opens with every tensor in its role; bad checkpoints fail naming the culprit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "gerbil/error.h"
#include "model/weights.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

using test::error_of;
using test::floats_of;

using nlohmann::json;
using test::fixtures_dir;
using test::ScratchDir;
using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;

TEST(ModelFiles, EveryFixtureOpensWithTheManifestParameterCount) {
  GERBIL_REQUIRE_FIXTURES();
  for (const auto& model : test::manifest()["models"]) {
    std::string folder = model["folder"];
    SCOPED_TRACE(folder);
    ModelFiles files = ModelFiles::open(fixtures_dir() / folder);
    EXPECT_EQ(files.arch().name, model["architecture"].get<std::string>());
    EXPECT_EQ(files.weight_bytes(), files.tensors().total_bytes());  // every stored tensor is used
    EXPECT_EQ(files.weights().layers.size(), 2u);
    if (!model.contains("structure_checks")) continue;  // the f16/bf16/gptq copies
    int64_t parameters = 0;
    for (const ExpectedTensor& expected : expected_tensors(files.config()))
      parameters += files.tensors().at(expected.name).numel();
    EXPECT_EQ(parameters, model["structure_checks"]["num_parameters"].get<int64_t>());
  }
}

TEST(ModelFiles, RolesOfAQwen2Model) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(fixtures_dir() / "qwen2-tiny");
  const ModelWeights& w = files.weights();
  const RoleTensors& q = w.get(1, Role::Q);
  EXPECT_EQ(q.weight->name, "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(q.bias->name, "model.layers.1.self_attn.q_proj.bias");
  EXPECT_EQ(q.in_features, 64);
  EXPECT_EQ(q.out_features, 64);
  EXPECT_EQ(w.get(1, Role::K).out_features, 32);
  EXPECT_FALSE(w.get(0, Role::O).bias.has_value());
  EXPECT_FALSE(w.get(0, Role::Qkv).present());
  EXPECT_FALSE(w.get(0, Role::AttnNorm).bias.has_value());
  // Tied: the output projection is the embedding matrix.
  EXPECT_TRUE(w.tied);
  EXPECT_EQ(w.get(Role::LmHead).weight->name, "model.embed_tokens.weight");
  EXPECT_EQ(w.get(Role::LmHead).in_features, 64);
  EXPECT_EQ(w.get(Role::LmHead).out_features, 512);
  EXPECT_EQ(w.get(Role::FinalNorm).weight->shape, Shape{64});
}

TEST(ModelFiles, RolesOfOtherFamilies) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles gpt2 = ModelFiles::open(fixtures_dir() / "gpt2-tiny");
  const RoleTensors& c_attn = gpt2.weights().get(0, Role::Qkv);
  EXPECT_EQ(c_attn.weight->shape, (Shape{64, 192}));  // Conv1D: [in, out]
  EXPECT_EQ(c_attn.out_features, 192);
  EXPECT_EQ(gpt2.weights().get(0, Role::Up).weight->name, "transformer.h.0.mlp.c_fc.weight");
  EXPECT_EQ(gpt2.weights().get(Role::PosEmbed).weight->shape, (Shape{256, 64}));
  EXPECT_EQ(gpt2.weights().get(Role::FinalNorm).bias->name, "transformer.ln_f.bias");

  ModelFiles phi = ModelFiles::open(fixtures_dir() / "phi-tiny");
  EXPECT_EQ(phi.weights().get(Role::LmHead).bias->shape, Shape{512});
  EXPECT_EQ(phi.weights().get(0, Role::O).weight->name, "model.layers.0.self_attn.dense.weight");
  EXPECT_FALSE(phi.weights().get(0, Role::MlpNorm).present());
  EXPECT_EQ(phi.weights().get(0, Role::Down).in_features, 176);

  ModelFiles phi3 = ModelFiles::open(fixtures_dir() / "phi3-tiny");
  EXPECT_EQ(phi3.weights().get(0, Role::Qkv).out_features, 128);  // 4*16 + 2*2*16
  EXPECT_EQ(phi3.weights().get(0, Role::GateUp).weight->shape, (Shape{352, 64}));

  ModelFiles gemma3 = ModelFiles::open(fixtures_dir() / "gemma3-tiny");
  EXPECT_EQ(gemma3.weights().get(1, Role::QNorm).weight->shape, Shape{16});
  EXPECT_EQ(gemma3.weights().get(1, Role::MlpPostNorm).weight->name,
            "model.layers.1.post_feedforward_layernorm.weight");

  ModelFiles llama = ModelFiles::open(fixtures_dir() / "llama-tiny-bf16");
  EXPECT_FALSE(llama.weights().tied);
  EXPECT_EQ(llama.weights().get(Role::LmHead).weight->name, "lm_head.weight");
  EXPECT_EQ(llama.weights().get(Role::LmHead).weight->dtype, DType::BF16);
}

TEST(ModelFiles, GptqLayers) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(fixtures_dir() / "qwen2-tiny-gptq-int4");
  const RoleTensors& down = files.weights().get(1, Role::Down);
  EXPECT_FALSE(down.weight.has_value());
  ASSERT_TRUE(down.gptq.has_value());
  EXPECT_EQ(down.in_features, 128);
  EXPECT_EQ(down.out_features, 64);
  EXPECT_EQ(down.gptq->group_size, 32);
  EXPECT_EQ(down.gptq->qweight.shape, (Shape{16, 64}));
  EXPECT_EQ(down.gptq->qzeros.shape, (Shape{4, 8}));
  EXPECT_EQ(down.gptq->scales.dtype, DType::F16);
  EXPECT_EQ(down.gptq->g_idx.name, "model.layers.1.mlp.down_proj.g_idx");
  const RoleTensors& k = files.weights().get(0, Role::K);
  EXPECT_EQ(k.bias->dtype, DType::F16);
  EXPECT_EQ(k.gptq->qzeros.shape, (Shape{2, 4}));
  EXPECT_EQ(files.weights().get(Role::Embed).weight->dtype, DType::F16);
}

TEST(ModelFiles, TokenIdCheck) {
  GERBIL_REQUIRE_FIXTURES();
  ModelConfig config = load_config(fixtures_dir() / "llama-tiny");
  check_token_id(config, 0);
  check_token_id(config, 511);
  EXPECT_THAT(error_of([&] { check_token_id(config, 512, "prompt position 3"); }),
              AllOf(HasSubstr("token id 512"), HasSubstr("prompt position 3"), HasSubstr("vocab_size 512"),
                    HasSubstr("llama-tiny/config.json")));
  EXPECT_THAT(error_of([&] { check_token_id(config, -1); }), HasSubstr("token id -1"));
}

// --- bad checkpoints: a fixture copied with one edit -----------------------------------------------

void erase_tensor(std::vector<TensorSource>& tensors, const std::string& name) {
  std::erase_if(tensors, [&](const TensorSource& t) { return t.name == name; });
}

TensorSource zeros(const std::string& name, DType dtype, Shape shape) {
  TensorSource source{name, dtype, std::move(shape),
                      [](uint64_t, std::span<std::byte> out) { std::memset(out.data(), 0, out.size()); }};
  return source;
}

TEST(ModelFiles, RejectsAMissingTensor) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  test::copy_fixture("qwen2-tiny", dir.path(),
                     [](auto& t) { erase_tensor(t, "model.layers.1.self_attn.v_proj.bias"); });
  EXPECT_THAT(error_of([&] { ModelFiles::open(dir.path()); }),
              AllOf(HasSubstr("missing"), HasSubstr("model.layers.1.self_attn.v_proj.bias [32]"),
                    HasSubstr("config.json")));
}

TEST(ModelFiles, RejectsAMissingLmHeadWhenUntied) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  test::copy_fixture("llama-tiny", dir.path(), [](auto& t) { erase_tensor(t, "lm_head.weight"); });
  EXPECT_THAT(error_of([&] { ModelFiles::open(dir.path()); }), HasSubstr("lm_head.weight [512, 64]"));
}

TEST(ModelFiles, RejectsAWrongShape) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  test::copy_fixture("llama-tiny", dir.path(), [](auto& t) {
    erase_tensor(t, "model.layers.0.self_attn.k_proj.weight");
    t.push_back(zeros("model.layers.0.self_attn.k_proj.weight", DType::F32, {64, 64}));
  });
  EXPECT_THAT(error_of([&] { ModelFiles::open(dir.path()); }),
              AllOf(HasSubstr("\"model.layers.0.self_attn.k_proj.weight\""), HasSubstr("has shape [64, 64]"),
                    HasSubstr("implies [32, 64]"), HasSubstr("model.safetensors")));
}

TEST(ModelFiles, RejectsAShapeThatDisagreesWithTheConfig) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  test::copy_fixture("mistral-tiny", dir.path(), {}, [](json& c) { c["intermediate_size"] = 128; });
  EXPECT_THAT(error_of([&] { ModelFiles::open(dir.path()); }),
              AllOf(HasSubstr("model.layers.0.mlp.gate_proj.weight"), HasSubstr("has shape [176, 64]"),
                    HasSubstr("config.json implies [128, 64]")));
}

TEST(ModelFiles, RejectsAnUnexpectedTensor) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  test::copy_fixture("gemma-tiny", dir.path(), [](auto& t) {
    t.push_back(zeros("model.layers.0.self_attn.q_norm.weight", DType::F32, {16}));
  });
  EXPECT_THAT(error_of([&] { ModelFiles::open(dir.path()); }),
              AllOf(HasSubstr("unexpected"), HasSubstr("model.layers.0.self_attn.q_norm.weight"),
                    HasSubstr("GemmaForCausalLM")));
}

TEST(ModelFiles, AcceptsHarmlessExtras) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  test::copy_fixture("qwen2-tiny", dir.path(), [](auto& t) {
    t.push_back(zeros("model.layers.0.self_attn.rotary_emb.inv_freq", DType::F32, {8}));
    t.push_back(zeros("lm_head.weight", DType::F32, {512, 64}));  // redundant copy in a tied model
  });
  ModelFiles files = ModelFiles::open(dir.path());
  EXPECT_EQ(files.weights().get(Role::LmHead).weight->name, "model.embed_tokens.weight");
  EXPECT_EQ(files.weight_bytes() + 8 * 4 + 512 * 64 * 4, files.tensors().total_bytes());

  ScratchDir gpt2;
  test::copy_fixture("gpt2-tiny", gpt2.path(), [](auto& t) {
    t.push_back(zeros("transformer.h.0.attn.bias", DType::F32, {1, 1, 256, 256}));
  });
  EXPECT_NO_THROW(ModelFiles::open(gpt2.path()));
}

TEST(ModelFiles, RejectsAWrongDtype) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  test::copy_fixture("phi3-tiny", dir.path(), [](auto& t) {
    erase_tensor(t, "model.norm.weight");
    t.push_back(zeros("model.norm.weight", DType::I32, {64}));
  });
  EXPECT_THAT(
      error_of([&] { ModelFiles::open(dir.path()); }),
      AllOf(HasSubstr("\"model.norm.weight\""), HasSubstr("dtype I32"), HasSubstr("F32, F16 or BF16")));
}

// A g_idx that moves inputs between groups makes the layer act-order (desc_act); one that names a group the layer
// does not have is refused.
TEST(ModelFiles, ReadsAGptqGroupIndexOutOfOrderAsActOrder) {
  GERBIL_REQUIRE_FIXTURES();
  std::vector<int32_t> g_idx(64);
  for (int k = 0; k < 64; ++k) g_idx[std::size_t(k)] = k / 32;
  auto with_g_idx = [&](const ScratchDir& dir) {
    test::copy_fixture("qwen2-tiny-gptq-int4", dir.path(), [&](auto& t) {
      erase_tensor(t, "model.layers.1.self_attn.o_proj.g_idx");
      t.push_back(tensor_from_bytes("model.layers.1.self_attn.o_proj.g_idx", DType::I32, {64},
                                    std::as_bytes(std::span(g_idx))));
    });
  };
  ScratchDir in_order, swapped, beyond;
  with_g_idx(in_order);
  EXPECT_FALSE(ModelFiles::open(in_order.path()).weights().get(1, Role::O).gptq->act_order);
  std::swap(g_idx[3], g_idx[40]);  // what an act-order checkpoint looks like
  with_g_idx(swapped);
  ModelFiles act_order = ModelFiles::open(swapped.path());
  EXPECT_TRUE(act_order.weights().get(1, Role::O).gptq->act_order);
  EXPECT_FALSE(act_order.weights().get(1, Role::Q).gptq->act_order);
  g_idx[5] = 2;
  with_g_idx(beyond);
  EXPECT_THAT(error_of([&] { ModelFiles::open(beyond.path()); }),
              AllOf(HasSubstr("\"model.layers.1.self_attn.o_proj.g_idx\""),
                    HasSubstr("input row 5 in group 2, outside the layer's 2 groups")));
}

TEST(ModelFiles, RejectsGptqShapesAndSettings) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  test::copy_fixture("qwen2-tiny-gptq-int4", dir.path(), [](auto& t) {
    erase_tensor(t, "model.layers.0.mlp.up_proj.qzeros");
    t.push_back(zeros("model.layers.0.mlp.up_proj.qzeros", DType::I32, {2, 128}));  // not packed along N
  });
  EXPECT_THAT(
      error_of([&] { ModelFiles::open(dir.path()); }),
      AllOf(HasSubstr("model.layers.0.mlp.up_proj.qzeros"), HasSubstr("[2, 128]"), HasSubstr("[2, 16]")));

  ScratchDir group;
  test::copy_fixture("qwen2-tiny-gptq-int4", group.path(), {},
                     [](json& c) { c["quantization_config"]["group_size"] = 48; });
  EXPECT_THAT(error_of([&] { ModelFiles::open(group.path()); }),
              AllOf(HasSubstr("model.layers.0.self_attn.q_proj"), HasSubstr("group_size 48")));
  // Groups of 16 divide the inputs but not gerbil's 32-input int4 blocks (kernels::WeightType::Q4_G).
  ScratchDir small_group;
  test::copy_fixture("qwen2-tiny-gptq-int4", small_group.path(), {},
                     [](json& c) { c["quantization_config"]["group_size"] = 16; });
  EXPECT_THAT(error_of([&] { ModelFiles::open(small_group.path()); }),
              AllOf(HasSubstr("model.layers.0.self_attn.q_proj"), HasSubstr("group_size 16"),
                    HasSubstr("a multiple of 32")));

  // A dense checkpoint whose config claims GPTQ has no qweight tensors.
  ScratchDir dense;
  test::copy_fixture("qwen2-tiny", dense.path(), {}, [](json& c) {
    c["quantization_config"] = {
        {"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}, {"desc_act", false}};
  });
  EXPECT_THAT(error_of([&] { ModelFiles::open(dense.path()); }),
              AllOf(HasSubstr("missing"), HasSubstr("model.layers.0.self_attn.q_proj.qweight [8, 64]")));
}

}  // namespace
}  // namespace gerbil
