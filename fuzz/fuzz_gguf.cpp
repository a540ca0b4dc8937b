// fuzz-link: gerbil_model
// Fuzz target: the GGUF reader (src/model/gguf.cpp) on arbitrary bytes, then the typed metadata reads, the
// dequantization of every tensor it accepted, and the conversions to a Hugging Face config (then parsed as
// config.json is, rope scalings included), tensors and tokenizer.json (src/model/gguf_model.cpp,
// gguf_tokenizer.cpp). Any input may be refused with gerbil::Error; none may
// crash, hang, read out of bounds or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gerbil/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"
#include "model/quant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gerbil;
  try {
    Gguf gguf = Gguf::parse(std::as_bytes(std::span(data, size)), "fuzz.gguf");
    for (const auto& [key, value] : gguf.metadata()) {
      try {
        if (value.type == GgufValueType::Array) {
          gguf.get_strings(key);
        } else {
          gguf.get_float(key);
        }
      } catch (const Error&) {
      }
    }
    std::vector<float> values;
    for (const GgufTensor& tensor : gguf.tensors()) {
      if (!ggml_type_info(tensor.type).dequantizable || tensor.numel() > (1u << 20)) continue;
      values.resize(tensor.numel());
      dequantize(tensor.type, tensor.bytes, values, tensor.name);
    }
    gguf_summary(gguf);
    // Each conversion may refuse the file; the later ones still run.
    try {
      gguf_tokenizer_json(gguf);
    } catch (const Error&) {
    }
    nlohmann::json config = gguf_config_json(gguf);
    try {
      parse_config(config, "fuzz.gguf");
    } catch (const Error&) {
    }
    gguf_tensors(gguf, config);
  } catch (const Error&) {
  }
  return 0;
}
