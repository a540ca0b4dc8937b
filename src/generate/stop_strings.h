// Streams text while watching for stop strings: text is released only once no stop string can still begin
// inside it, and cut before the first stop string that appears.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gerbil {

class StopStringFilter {
 public:
  // Throws gerbil::Error for an empty stop string or one that is not whole UTF-8 characters.
  explicit StopStringFilter(std::vector<std::string> stops);

  // Adds text; returns the part now safe to release. Sets `stopped` when a stop string appeared (the text then
  // ends before it).
  std::string add(std::string_view piece, bool& stopped);
  // Releases everything held back.
  std::string flush() { return release(text_.size()); }

 private:
  size_t held_back() const;  // length of the longest tail of the text that is a proper prefix of a stop string
  std::string release(size_t upto);

  std::vector<std::string> stops_;
  std::string text_;
  size_t released_ = 0;
};

}  // namespace gerbil
