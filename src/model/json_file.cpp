#include "model/json_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "gerbil/error.h"

namespace gerbil {

using nlohmann::json;

json parse_json_strict(std::string_view text, const std::filesystem::path& file, std::string_view what) {
  // seen[d] holds the keys of the object open at nesting depth d (nlohmann reports an object's
  // keys one level deeper than its object_start event).
  std::vector<std::set<std::string>> seen;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    std::size_t level = std::size_t(depth);
    if (seen.size() <= level + 1) seen.resize(level + 2);
    if (event == json::parse_event_t::object_start) {
      seen[level + 1].clear();
    } else if (event == json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen[level].insert(key).second) fail("{}: {} names \"{}\" twice", file.string(), what, key);
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    fail("{}: {} is not valid JSON: {}", file.string(), what, e.what());
  }
}

json read_json_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot open {}: {}", file.string(), std::strerror(errno));
  std::string text(std::istreambuf_iterator<char>(in), {});
  return parse_json_strict(text, file, "the file");
}

}  // namespace gerbil
