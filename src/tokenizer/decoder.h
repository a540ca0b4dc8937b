// Decoders turn the vocabulary strings of ids back into text, as a chain over the list of token
// strings (HF's decode_chain). Supported "type"s of tokenizer.json: ByteLevel, Replace,
// ByteFallback, Fuse, Strip, Metaspace, Sequence.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::tok {

class JsonField;

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // Whether a run of <0xNN> byte tokens is decoded as a whole (ByteFallback): the text of such a
  // run is not final until the run ends.
  virtual bool joins_byte_tokens() const { return false; }
  // Rewrites one token's string into the bytes it adds in the middle of a text: what decode_chain does to
  // it, less the rules for the text's start (Strip, Metaspace's first token) and less UTF-8 repair, so a
  // token holding part of a character keeps its raw bytes. Steps that only join tokens leave it alone.
  virtual void token_bytes(std::string& /*token*/) const {}
};

// The decoder a tokenizer.json "decoder" field describes; null for JSON null.
std::unique_ptr<Decoder> make_decoder(const JsonField& field);
std::unique_ptr<Decoder> make_byte_level_decoder();

// The byte a "<0xNN>" byte-fallback token stands for, or -1.
int byte_token_value(std::string_view token);

}  // namespace gerbil::tok
