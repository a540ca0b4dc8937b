// A constraint on what a sequence may generate next (structured output: a JSON schema, a JSON object, a
// tool call's arguments). The scheduler asks it for the allowed ids before each token is drawn and tells it
// which id was drawn; the sampler then draws only among allowed ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gerbil {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // ALLOWED has one entry per logit of the model (it may be longer than the tokenizer's vocabulary); every
  // entry is 1 on entry. Clears the entries of the ids that may not come next. End-of-sequence ids are
  // part of this: a constraint allows them only once its text is complete.
  virtual void mask(std::span<uint8_t> allowed) = 0;

  // mask() as a bit per id, for a mask that goes to the GPU (graph::Model::TokenMask): id i is bit i % 32 of
  // ALLOWED[i / 32], and on entry the bits of ids 0 .. IDS - 1 are set and the rest clear. Clears the bits of the
  // ids that may not come next. This default goes through mask(); a constraint that keeps its masks as bits
  // overrides it to skip the byte per id.
  virtual void mask_bits(std::span<uint32_t> allowed, size_t ids) {
    std::vector<uint8_t> bytes(ids, 1);
    mask(bytes);
    for (size_t i = 0; i < ids; ++i)
      if (!bytes[i]) allowed[i / 32] &= ~(uint32_t{1} << (i % 32));
  }

  // Advances past ID, which the last mask() allowed.
  virtual void accept(int32_t id) = 0;

  // Whether the text accepted so far is complete (e.g. a whole JSON value).
  virtual bool complete() const = 0;
};

}  // namespace gerbil
