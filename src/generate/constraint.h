// A constraint on what a sequence may generate next (structured output: a JSON schema, a JSON object, a
// tool call's arguments). The scheduler asks it for the allowed ids before each token is drawn and tells it
// which id was drawn; the sampler then draws only among allowed ids.
#pragma once

#include <cstdint>
#include <span>

namespace gerbil {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // ALLOWED has one entry per logit of the model (it may be longer than the tokenizer's vocabulary); every
  // entry is 1 on entry. Clears the entries of the ids that may not come next. End-of-sequence ids are
  // part of this: a constraint allows them only once its text is complete.
  virtual void mask(std::span<uint8_t> allowed) = 0;

  // Advances past ID, which the last mask() allowed.
  virtual void accept(int32_t id) = 0;

  // Whether the text accepted so far is complete (e.g. a whole JSON value).
  virtual bool complete() const = 0;
};

}  // namespace gerbil
