// The one parser of token-id lists on the command line (generate and logits --tokens, detokenize --ids).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace gerbil::cli {

// "1,2,3", with white space allowed and optionally in brackets, so a JSON array such as `gerbil tokenize`
// prints works too. OPTION names the flag in errors: "--tokens: entry 2 ('x') is not a token id".
// An empty list is an error unless ALLOW_EMPTY.
std::vector<int32_t> parse_token_ids(std::string_view text, std::string_view option, bool allow_empty = false);

}  // namespace gerbil::cli
