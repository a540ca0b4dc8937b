#include "tokenizer/string_map.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace gerbil::tok {

uint64_t hash_string(std::string_view text) { return XXH3_64bits(text.data(), text.size()); }

}  // namespace gerbil::tok
