// The tokenizer a GGUF file carries (tokenizer.ggml.* metadata) as the Hugging Face tokenizer.json it was
// converted from, so that gerbil's tokenizer loader builds it (Tokenizer::from_json), and the chat template.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/gguf.h"

namespace gerbil {

// tokenizer.json for GGUF's tokenizers. "gpt2" (byte-level BPE; the pre-tokenizer from tokenizer.ggml.pre:
// "qwen2", "llama-bpe", "gpt-2" / "default"): vocabulary and merges. "llama" (SentencePiece: Llama 2, Mistral,
// Gemma, Phi-3): BPE with byte fallback whose merges come from tokenizer.ggml.scores, spaces as "▁" (one in
// front when tokenizer.ggml.add_space_prefix, default true). Both: control, unknown and user-defined tokens as
// added tokens, BOS / EOS added when tokenizer.ggml.add_bos_token / add_eos_token say so (BOS by default for
// "llama", as in llama.cpp). Throws naming the key for other models and pre-tokenizers and for inconsistent
// metadata (counts that differ from the tokens', ids outside them, unknown token types, malformed byte tokens).
nlohmann::json gguf_tokenizer_json(const Gguf& gguf);

// tokenizer.chat_template, when the file has one.
std::optional<std::string> gguf_chat_template(const Gguf& gguf);

}  // namespace gerbil
