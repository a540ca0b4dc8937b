// A GGUF model file seen as a Hugging Face checkpoint, so that ModelFiles checks and serves it like a model
// folder: the config.json the file's metadata stands for (`general.architecture` and its `<arch>.*` keys),
// and every tensor under its Hugging Face name, dequantized to f32 with what llama.cpp's converter changed
// undone (llama's Q/K rows permuted for its rope layout, Gemma's norms stored with the +1 folded in, GPT-2's
// Conv1D weights transposed).
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

// Every tensor of GGUF under its Hugging Face name, in f32. Throws naming the tensor for unknown names,
// unsupported types, and tensors gerbil cannot use (such as llama.cpp's rope_freqs).
Safetensors gguf_tensors(const Gguf& gguf, const nlohmann::json& config);

// What `gerbil info --model FILE.gguf` prints: {"file", "version", "architecture", "name", "parameters",
// "context_length", "tensors" (count), "types" ({"Q4_K": tensors, ...}), "type_bytes" ({"Q4_K": bytes, ...}),
// "chat_template" (present or not), "tokenizer" (tokenizer.ggml.model, or null)}.
nlohmann::json gguf_summary(const Gguf& gguf);

}  // namespace gerbil
