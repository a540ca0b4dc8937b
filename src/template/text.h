// Python str semantics over UTF-8 strings, for the template interpreter: jinja2 runs on Python strings,
// so lengths, indices and slices count code points, and strip/split treat Unicode whitespace as Python
// does. Case mapping is one-to-one for Latin, Greek and Cyrillic letters (no "ß" -> "SS").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::jinja::text {

std::u32string decode(std::string_view utf8);  // invalid bytes decode as U+FFFD
std::string encode(std::u32string_view codepoints);
void append_utf8(std::string& out, char32_t c);
size_t length(std::string_view utf8);  // in code points

bool is_space(char32_t c);  // Python str.isspace
std::vector<std::string> splitlines(std::string_view s, bool keepends = false);

enum class Side { Both, Left, Right };
// str.strip / lstrip / rstrip; `chars` absent means whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, Side side);
// str.split / str.rsplit; `sep` absent splits on runs of whitespace. maxsplit < 0 means no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right);
std::string replace(std::string_view s, std::string_view old, std::string_view replacement, int64_t count);
int64_t count(std::string_view s, std::string_view sub);
int64_t find(std::string_view s, std::string_view sub, bool from_right);  // in code points, -1 if absent

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);    // first character upper, the rest lower
std::string title_words(std::string_view s);   // Python str.title
std::string title_filter(std::string_view s);  // jinja2's `title` filter: words split at -, whitespace, ([{<
bool is_lower(std::string_view s);             // Python str.islower
bool is_upper(std::string_view s);

// Python repr() of a str: single quotes unless the text holds ' and no ", escapes for controls.
std::string repr(std::string_view s);
// json.dumps of a str.
std::string json_quote(std::string_view s, bool ensure_ascii);
// Python repr() of a float: shortest round-trip digits, exponent outside 1e-4 <= |x| < 1e16.
std::string float_repr(double x);

}  // namespace gerbil::jinja::text
