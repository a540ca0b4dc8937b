#include "generate/stop_strings.h"

#include <algorithm>

#include "gerbil/error.h"
#include "tokenizer/utf8.h"

namespace gerbil {

StopStringFilter::StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (auto& stop : stops_) {
    if (stop.empty()) fail("generate: stop strings must not be empty");
    // A stop string that is not whole characters could cut a character in two.
    tok::check_utf8(stop, "stop string");
  }
}

std::string StopStringFilter::add(std::string_view piece, bool& stopped) {
  text_ += piece;
  size_t cut = std::string::npos;
  for (auto& stop : stops_)
    cut = std::min(cut, text_.find(stop, released_ >= stop.size() ? released_ - stop.size() + 1 : 0));
  if (cut != std::string::npos) {
    stopped = true;
    text_.resize(cut);
    return release(cut);
  }
  return release(text_.size() - held_back());
}

size_t StopStringFilter::held_back() const {
  size_t hold = 0;
  for (auto& stop : stops_)
    for (size_t n = std::min(stop.size() - 1, text_.size() - released_); n > hold; --n)
      if (text_.compare(text_.size() - n, n, stop, 0, n) == 0) {
        hold = n;
        break;
      }
  return hold;
}

std::string StopStringFilter::release(size_t upto) {
  if (upto <= released_) return {};
  std::string out = text_.substr(released_, upto - released_);
  released_ = upto;
  return out;
}

}  // namespace gerbil
