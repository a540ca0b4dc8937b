// JSON reading shared by the model loaders: parse errors and duplicate keys (which nlohmann::json would
// silently collapse to the last one) become gerbil::Error naming the file.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

namespace gerbil {

// Parses TEXT, which came from FILE; WHAT says which part of the file it is ("the header").
nlohmann::json parse_json_strict(std::string_view text, const std::filesystem::path& file,
                                 std::string_view what);
// Reads and parses a whole JSON file.
nlohmann::json read_json_file(const std::filesystem::path& file);

}  // namespace gerbil
