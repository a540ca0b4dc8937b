// fuzz-link: gerbil_model
// config.json (and generation_config.json after the part separator, when there is one) read with the
// strict JSON reader and normalised into a ModelConfig, as load_config does.
#include <nlohmann/json.hpp>
#include <optional>

#include "fuzz_support.h"
#include "model/config.h"
#include "json/json_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gerbil::fuzz::TwoParts parts = gerbil::fuzz::split_parts(gerbil::fuzz::as_text(data, size));
  return gerbil::fuzz::expect_clean_rejection([&] {
    nlohmann::json config = gerbil::parse_json_strict(parts.first, "config.json", "the file");
    std::optional<nlohmann::json> generation;
    if (!parts.second.empty())
      generation = gerbil::parse_json_strict(parts.second, "generation_config.json", "the file");
    gerbil::parse_config(config, "config.json", generation ? &*generation : nullptr);
  });
}
