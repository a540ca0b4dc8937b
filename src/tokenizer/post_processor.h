// Post-processors add the special tokens of encode(text, add_special_tokens=true), such as a BOS
// in front. Supported "type"s of tokenizer.json: TemplateProcessing (single-sequence template),
// ByteLevel (which only trims offsets, so it changes no ids) and Sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace gerbil::tok {

class JsonField;

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

// The post-processor a tokenizer.json "post_processor" field describes; null when it adds nothing.
// Special-token ids must be below vocab_size.
std::unique_ptr<PostProcessor> make_post_processor(const JsonField& field, size_t vocab_size);

}  // namespace gerbil::tok
