// JSON Schema's "pattern" (and the string formats built on it) as a deterministic automaton over Unicode scalar
// values, for the structured-output constraint (json_constraint.h) to step a string's decoded characters through.
//
//   RegexAutomaton digits = RegexAutomaton::from_pattern("^[0-9]{3}$", "schema.pattern");
//   uint32_t state = RegexAutomaton::kStart;
//   for (char32_t c : U"123") state = digits.next(state, c);  // kRefused once no match can follow
//   digits.accepting(state);  // true
//
// The automaton is minimal and every state of it can still reach acceptance, so a character it takes never leads
// into a dead end. The pattern's subset (ECMA-262, as JSON Schema names it, with code points as characters, as its
// "u" flag reads them): literal characters; escapes \d \D \w \W \s \S, \t \n \r \f \v \0, \uXXXX (a surrogate
// pair makes one character), \u{X...}, \xHH and escaped punctuation; "." (anything but a line terminator);
// classes [...] and [^...] with ranges and class escapes; groups ( ), (?: ) and (?<name> ); alternation; the
// quantifiers * + ? {n} {n,} {n,m} and their lazy forms (the same language); "^" and "$" at the start and end of
// the pattern or of one of its top-level alternatives. A pattern matches anywhere in the string unless "^" / "$"
// anchor it. Backreferences, lookarounds, \b, \B, \p{...}, anchors elsewhere and flags are errors naming the
// position (in characters from 0), as is a pattern that needs more than kMaxStates states.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil {

class RegexAutomaton {
 public:
  struct Transition {
    uint32_t first, last;  // code points, inclusive
    uint32_t target;
  };
  static constexpr uint32_t kStart = 0;
  static constexpr uint32_t kRefused = UINT32_MAX;
  // The most states of the automaton before minimization, and of the expanded pattern (a {n,m} copies its atom).
  static constexpr uint32_t kMaxStates = 4096;

  // Throws gerbil::Error "PATH: ..." where the pattern is outside the subset or too large.
  static RegexAutomaton from_pattern(std::string_view pattern, const std::string& path);
  // The strings both A and B match (a pattern beside a format). Throws where there is none, or too many states.
  static RegexAutomaton intersection(const RegexAutomaton& a, const RegexAutomaton& b, const std::string& path);

  size_t size() const { return states_.size(); }
  bool accepting(uint32_t state) const { return states_[state].accepting; }
  // Accepting, and every character keeps it there: whatever follows matches.
  bool universal(uint32_t state) const { return states_[state].universal; }
  // Sorted and disjoint; characters outside them are refused.
  std::span<const Transition> transitions(uint32_t state) const { return states_[state].transitions; }
  uint32_t next(uint32_t state, uint32_t code_point) const;

  struct State {
    std::vector<Transition> transitions;
    bool accepting = false;
    bool universal = false;
  };

 private:
  // From a deterministic automaton whose start is states[0]: its states that can reach acceptance, minimized.
  // Throws "PATH: no string matches MATCHED_BY" where the start cannot.
  static RegexAutomaton trimmed(const std::vector<State>& states, const std::string& path,
                                std::string_view matched_by);

  std::vector<State> states_;
};

}  // namespace gerbil
