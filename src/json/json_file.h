// The one JSON reader: every JSON gerbil reads (config.json, safetensors headers, tokenizer files, chat
// templates' tokenizer_config.json, chat messages, template variables) goes through it, so all of it has
// one strictness. Syntax errors and duplicate keys (which nlohmann::json would silently collapse to the
// last one) become gerbil::Error naming where the text came from.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gerbil {

// Parses TEXT. ORIGIN names where it came from (a file, or a description such as "chat messages"); WHAT,
// when not empty, says which part of it TEXT is ("the header"). JSON is nlohmann::json, or
// nlohmann::ordered_json where the order of an object's keys matters (chat templates render it).
template <class Json = nlohmann::json>
Json parse_json_strict(std::string_view text, const std::filesystem::path& origin, std::string_view what = {});

// The bytes of FILE. A file that is missing, a folder, or fails to read is a gerbil::Error naming it.
std::string read_file_bytes(const std::filesystem::path& file);

// Reads and parses a whole JSON file.
template <class Json = nlohmann::json>
Json read_json_file(const std::filesystem::path& file);

}  // namespace gerbil
