#include "json/json_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "gerbil/error.h"

namespace gerbil {
namespace {

// "ORIGIN: WHAT: PROBLEM", or "ORIGIN: PROBLEM" when WHAT is empty.
[[noreturn]] void fail_at(const std::filesystem::path& origin, std::string_view what, std::string_view problem) {
  if (what.empty()) fail("{}: {}", origin.string(), problem);
  fail("{}: {}: {}", origin.string(), what, problem);
}

}  // namespace

template <class Json>
Json parse_json_strict(std::string_view text, const std::filesystem::path& origin, std::string_view what) {
  // seen[d] holds the keys of the object open at nesting depth d (nlohmann reports an object's
  // keys one level deeper than its object_start event).
  std::vector<std::set<std::string>> seen;
  auto callback = [&](int depth, typename Json::parse_event_t event, Json& parsed) {
    std::size_t level = std::size_t(depth);
    if (seen.size() <= level + 1) seen.resize(level + 2);
    if (event == Json::parse_event_t::object_start) {
      seen[level + 1].clear();
    } else if (event == Json::parse_event_t::key) {
      const auto& key = parsed.template get_ref<const std::string&>();
      if (!seen[level].insert(key).second) fail_at(origin, what, fmt::format("names \"{}\" twice", key));
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    fail_at(origin, what, fmt::format("not valid JSON: {}", e.what()));
  }
}

std::string read_file_bytes(const std::filesystem::path& file) {
  std::error_code error;
  if (std::filesystem::is_directory(file, error)) fail("{}: is a folder, not a file", file.string());
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot open {}: {}", file.string(), std::strerror(errno));
  try {
    return std::string(std::istreambuf_iterator<char>(in), {});
  } catch (const std::exception& e) {  // libstdc++'s filebuf throws on a read error
    fail("{}: cannot be read: {}", file.string(), e.what());
  }
}

template <class Json>
Json read_json_file(const std::filesystem::path& file) {
  return parse_json_strict<Json>(read_file_bytes(file), file);
}

template nlohmann::json parse_json_strict(std::string_view, const std::filesystem::path&, std::string_view);
template nlohmann::ordered_json parse_json_strict(std::string_view, const std::filesystem::path&, std::string_view);
template nlohmann::json read_json_file(const std::filesystem::path&);
template nlohmann::ordered_json read_json_file(const std::filesystem::path&);

}  // namespace gerbil
