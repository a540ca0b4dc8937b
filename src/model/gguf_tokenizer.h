// The tokenizer a GGUF file carries (tokenizer.ggml.* metadata) as the Hugging Face tokenizer.json it was
// converted from, so that gerbil's tokenizer loader builds it (Tokenizer::from_json), and the chat template.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/gguf.h"

namespace gerbil {

// tokenizer.json for GGUF's byte-level BPE tokenizers (tokenizer.ggml.model "gpt2"; the pre-tokenizer from
// tokenizer.ggml.pre: "qwen2", "llama-bpe", "gpt-2" / "default"): vocabulary and merges, control and
// user-defined tokens as added tokens, BOS prepended when tokenizer.ggml.add_bos_token says so. Throws
// naming the key for other models (SentencePiece "llama" is not supported yet) and pre-tokenizers.
nlohmann::json gguf_tokenizer_json(const Gguf& gguf);

// tokenizer.chat_template, when the file has one.
std::optional<std::string> gguf_chat_template(const Gguf& gguf);

}  // namespace gerbil
