#include "token_ids.h"

#include <charconv>

#include "gerbil/error.h"

namespace gerbil::cli {
namespace {

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

}  // namespace

std::vector<int32_t> parse_token_ids(std::string_view text, std::string_view option, bool allow_empty) {
  std::string_view rest = trim(text);
  if (rest.starts_with('[') != rest.ends_with(']')) fail("{}: '{}' has an unmatched bracket", option, text);
  if (rest.starts_with('[')) rest = trim(rest.substr(1, rest.size() - 2));
  std::vector<int32_t> ids;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    int32_t id = 0;
    auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || id < 0)
      fail("{}: entry {} ('{}') is not a token id", option, ids.size(), item);
    ids.push_back(id);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
    if (trim(rest).empty()) fail("{}: entry {} is empty", option, ids.size());
  }
  if (ids.empty() && !allow_empty) fail("{}: no token ids given", option);
  return ids;
}

}  // namespace gerbil::cli
