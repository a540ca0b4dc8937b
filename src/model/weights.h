// A model folder opened and checked: config.json + safetensors, with every tensor the architecture and
// config call for found, of the right shape and dtype, and nothing left over. The graph builder asks
// for tensors by logical role (layer 3, Role::Q) and never spells a tensor name.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/architecture.h"
#include "model/config.h"
#include "model/quant.h"
#include "model/safetensors.h"

namespace gerbil {

// A GPTQ v1 linear layer with K inputs, N outputs and G groups (layout in the fixtures README):
// qweight I32 [K/8, N] (8 nibbles along K), qzeros I32 [G, N/8] (8 nibbles along N, stored zero = real - 1),
// scales float [G, N], g_idx I32 [K] (input k's group, checked to lie in 0..G-1). AWQ layers come repacked into
// this layout (repack_awq_gemm, model/quant.h), their views pointing at ModelFiles' copies, with no g_idx (empty).
struct GptqLinear {
  TensorView qweight, qzeros, scales, g_idx;
  int64_t group_size = 0;
  // Act-order (desc_act): g_idx puts some input k outside group k / group_size, so groups are not runs of inputs.
  bool act_order = false;
};

// The tensors of one role. Norms: weight (+ bias for LayerNorm). Embeddings: weight. Linear layers:
// weight or gptq, plus bias where the architecture has one.
struct RoleTensors {
  // linear: [out, in], or [in, out] where weight_in_out says
  std::optional<TensorView> weight;
  std::optional<TensorView> bias;    // [out] / [dim]
  std::optional<GptqLinear> gptq;
  int64_t in_features = 0, out_features = 0;  // linear roles only
  // The weight is a float matrix stored [in, out] (stored_in_out: GPT-2's Conv1D layers); block views, a GGUF
  // file's quantized matrices, are [out, in] whatever the checkpoint stored.
  bool weight_in_out = false;

  bool present() const { return weight || gptq; }
};

// Which piece of a role a tensor is.
enum class Part { Weight, Bias, QWeight, QZeros, Scales, GIdx };

// One tensor the config and architecture call for. LAYER is -1 for global roles.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  int layer = -1;
  Role role = Role::Embed;
  Part part = Part::Weight;
};

// Every tensor a checkpoint of CONFIG must hold (no lm_head when tied), in a stable order: globals, then
// layer by layer. Throws if the config makes a GPTQ layout impossible (K not a multiple of group_size, ...).
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

struct ModelWeights {
  std::array<RoleTensors, std::size_t(Role::Count)> globals;  // Embed, PosEmbed, FinalNorm, LmHead
  std::vector<std::array<RoleTensors, std::size_t(Role::Count)>> layers;  // per-layer roles
  bool tied = false;                                                      // LmHead.weight is the Embed tensor

  const RoleTensors& get(Role role) const { return globals[std::size_t(role)]; }
  const RoleTensors& get(int layer, Role role) const {
    return layers.at(std::size_t(layer))[std::size_t(role)];
  }
};

// Fails with "DIR: no such model folder or GGUF file" unless DIR is a folder or a GGUF file: the one check of a
// model's path, made before any device is created, so a mistyped path reads the same from every command and the
// library.
void check_model_folder(const std::filesystem::path& dir);

class ModelFiles {
 public:
  // Loads and checks DIR (a model folder, or one .gguf file); throws gerbil::Error naming the file, tensor,
  // and expected vs actual shape.
  static ModelFiles open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const ArchitectureSpec& arch() const { return *config_.arch; }
  const Safetensors& tensors() const { return tensors_; }
  const ModelWeights& weights() const { return weights_; }
  // Bytes of all tensors the model uses (a tied embedding counted once).
  uint64_t weight_bytes() const { return weight_bytes_; }

 private:
  std::filesystem::path dir_;
  ModelConfig config_;
  Safetensors tensors_;
  ModelWeights weights_;
  uint64_t weight_bytes_ = 0;
  std::vector<std::shared_ptr<const GptqInt4>> repacked_;  // AWQ layers in GPTQ's layout; copies share them
};

// Throws unless 0 <= ID < vocab_size, naming the id, the model's config.json and WHERE it came from.
void check_token_id(const ModelConfig& config, int64_t id, std::string_view where = "input");

}  // namespace gerbil
