// A GGUF model file seen as a Hugging Face checkpoint, so that ModelFiles checks and serves it like a model
// folder: the config.json the file's metadata stands for (`general.architecture` and its `<arch>.*` keys),
// and every tensor under its Hugging Face name with what llama.cpp's converter changed undone (llama's Q/K
// rows permuted for its rope layout, Gemma's norms stored with the +1 folded in, GPT-2's Conv1D weights
// transposed). Matrices are not expanded: quantized ones are block views (TensorView::block_type) straight
// from the mapped file, F16/BF16/F32 ones ordinary views of the file's bytes; only llama's Q/K matrices are
// copied (their rows put back in order, blocks moved whole with their row).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/architecture.h"
#include "model/gguf.h"
#include "model/safetensors.h"

namespace gerbil {

// llama.cpp's name for the tensor of ROLE in LAYER (-1 for global roles), PART "weight" or "bias":
// gguf_tensor_name(llama, Role::Q, 3, "weight") = "blk.3.attn_q.weight".
std::string gguf_tensor_name(const ArchitectureSpec& arch, Role role, int layer, std::string_view part);

// True when PATH is a file that starts with the GGUF magic.
bool is_gguf_file(const std::filesystem::path& path);

// The Hugging Face config.json that GGUF's metadata describes; throws naming the key at fault, or an
// unsupported architecture.
nlohmann::json gguf_config_json(const Gguf& gguf);

// Every tensor of GGUF under its Hugging Face name. Norm weights, biases and learned position tables become
// f32 (small; Gemma's +1 taken off); embeddings and linear weights keep their type: F32/F16/BF16 views, or
// block views for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, shaped [out, in] (GPT-2's float Conv1D
// weights go back to [in, out], its block ones stay [out, in]). Throws naming the tensor for unknown names,
// other types, and tensors gerbil cannot use (such as llama.cpp's rope_freqs).
Safetensors gguf_tensors(const Gguf& gguf, const nlohmann::json& config);

// What `gerbil info --model FILE.gguf` prints: {"file", "version", "architecture", "name", "parameters",
// "context_length", "tensors" (count), "types" ({"Q4_K": tensors, ...}), "type_bytes" ({"Q4_K": bytes, ...}),
// "chat_template" (present or not), "tokenizer" (tokenizer.ggml.model, or null)}.
nlohmann::json gguf_summary(const Gguf& gguf);

}  // namespace gerbil
