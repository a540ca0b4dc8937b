#include "generate/regex_automaton.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>
#include <utility>

#include <utf8proc.h>

#include "gerbil/error.h"

namespace gerbil {

namespace {

constexpr uint32_t kLastCodePoint = 0x10FFFF;
constexpr uint32_t kUnbounded = UINT32_MAX;
constexpr uint32_t kMaxCount = 100000;  // a quantifier's {n,m} beyond it could never fit kMaxStates anyway

// A set of code points: sorted, disjoint ranges (inclusive).
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalized(Ranges ranges) {
  std::sort(ranges.begin(), ranges.end());
  Ranges merged;
  for (const auto& range : ranges) {
    if (!merged.empty() && range.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, range.second);
    else
      merged.push_back(range);
  }
  return merged;
}

Ranges complement(const Ranges& set) {
  Ranges result;
  uint32_t next = 0;
  for (const auto& [first, last] : set) {
    if (first > next) result.emplace_back(next, first - 1);
    next = last + 1;
  }
  if (next <= kLastCodePoint) result.emplace_back(next, kLastCodePoint);
  return result;
}

// The characters a JSON string can hold: every code point but the surrogates.
Ranges scalar_values(const Ranges& set) {
  Ranges result;
  for (auto [first, last] : set) {
    if (first < 0xD800) result.emplace_back(first, std::min<uint32_t>(last, 0xD7FF));
    if (last > 0xDFFF) result.emplace_back(std::max<uint32_t>(first, 0xE000), last);
  }
  return result;
}

// ECMA-262's class escapes and ".".
const Ranges kDigits = {{'0', '9'}};
const Ranges kWordCharacters = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kWhitespace = {{0x09, 0x0D}, {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                            {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const Ranges kLineTerminators = {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};
const Ranges kEveryCharacter = {{0, kLastCodePoint}};

// The pattern's syntax tree.
struct Regex {
  enum class Kind { Characters, Sequence, Alternatives, Repeat };
  Kind kind = Kind::Sequence;
  Ranges characters;         // Characters
  std::vector<Regex> parts;  // Sequence, Alternatives; Repeat: the one repeated
  uint32_t min = 0, max = 0;  // Repeat (max: kUnbounded)

  static Regex of(Ranges characters) { return {Kind::Characters, std::move(characters), {}, 0, 0}; }
  static Regex repeat(Regex part, uint32_t min, uint32_t max) {
    return {Kind::Repeat, {}, {std::move(part)}, min, max};
  }
};

bool is_hex(char32_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
uint32_t hex_value(char32_t c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }
bool is_ascii_punctuation(char32_t c) { return c < 0x80 && c > 0x20 && !std::isalnum(static_cast<int>(c)); }

// A recursive-descent parser of the subset (regex_automaton.h). Positions in errors count characters from 0.
class Parser {
 public:
  Parser(std::u32string text, const std::string& path) : text_(std::move(text)), path_(path) {}

  Regex parse() {
    Regex pattern = alternatives(/*top_level=*/true);
    if (pos_ < text_.size()) error(pos_, "')' closes no group");
    return pattern;
  }

 private:
  [[noreturn]] void error(size_t position, std::string_view what) const {
    fail("{}: {} (at position {} of the pattern)", path_, what, position);
  }
  bool more() const { return pos_ < text_.size(); }
  char32_t peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0; }
  bool take(char32_t c) {
    if (!more() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  Regex alternatives(bool top_level) {
    Regex choice;
    choice.kind = Regex::Kind::Alternatives;
    do choice.parts.push_back(alternative(top_level));
    while (take('|'));
    return choice.parts.size() == 1 ? std::move(choice.parts[0]) : std::move(choice);
  }

  // A top-level alternative matches anywhere in the string: any characters on each side that '^' / '$' do not
  // anchor.
  Regex alternative(bool top_level) {
    Regex sequence;  // a Sequence
    bool anchored_start = top_level && take('^'), anchored_end = false;
    while (more() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && top_level && (pos_ + 1 == text_.size() || peek(1) == '|')) {
        ++pos_;
        anchored_end = true;
        break;
      }
      if (peek() == '^' || peek() == '$')
        error(pos_, fmt::format("'{}' is supported only at the {} of the pattern or of a top-level alternative",
                                static_cast<char>(peek()), peek() == '^' ? "start" : "end"));
      Regex part = atom();
      sequence.parts.push_back(quantified(std::move(part)));
    }
    if (top_level && !anchored_start)
      sequence.parts.insert(sequence.parts.begin(), Regex::repeat(Regex::of(kEveryCharacter), 0, kUnbounded));
    if (top_level && !anchored_end) sequence.parts.push_back(Regex::repeat(Regex::of(kEveryCharacter), 0, kUnbounded));
    return sequence;
  }

  Regex atom() {
    size_t at = pos_;
    char32_t c = text_[pos_++];
    switch (c) {
      case '.': return Regex::of(complement(kLineTerminators));
      case '[': return Regex::of(character_class(at));
      case '(': return group(at);
      case '\\': return Regex::of(escape(at, /*in_class=*/false));
      case '*':
      case '+':
      case '?': error(at, fmt::format("'{}' has nothing to repeat", static_cast<char>(c)));
      case '{': error(at, "'{' begins no quantifier here (write \\{ for the character)");
      default: return Regex::of({{c, c}});
    }
  }

  Regex group(size_t at) {
    if (take('?')) {
      if (peek() == '=' || peek() == '!' || (peek() == '<' && (peek(1) == '=' || peek(1) == '!')))
        error(at, "lookahead and lookbehind are not supported");
      if (take('<')) {
        while (more() && peek() != '>' && (peek() == '_' || peek() == '$' || peek() >= 0x80 ||
                                           std::isalnum(static_cast<int>(peek()))))
          ++pos_;
        if (!take('>')) error(at, "a group's name must be an identifier ended by '>'");
      } else if (!take(':')) {
        error(at, "only the groups ( ), (?: ) and (?<name> ) are supported (no flags)");
      }
    }
    Regex inner = alternatives(/*top_level=*/false);
    if (!take(')')) error(at, "the group is not closed");
    return inner;
  }

  Regex quantified(Regex atom) {
    size_t at = pos_;
    uint32_t min = 0, max = kUnbounded;
    if (take('*')) {
    } else if (take('+')) {
      min = 1;
    } else if (take('?')) {
      max = 1;
    } else if (take('{')) {
      min = count(at);
      max = take(',') ? (peek() == '}' ? kUnbounded : count(at)) : min;
      if (!take('}')) error(at, "'{' begins no quantifier here (write \\{ for the character)");
      if (min > max) error(at, "a quantifier {n,m} with n above m");
    } else {
      return atom;
    }
    take('?');  // lazy: the same language
    return Regex::repeat(std::move(atom), min, max);
  }

  uint32_t count(size_t at) {
    if (!more() || peek() < '0' || peek() > '9')
      error(at, "'{' begins no quantifier here (write \\{ for the character)");
    uint32_t value = 0;
    while (more() && peek() >= '0' && peek() <= '9') {
      value = value * 10 + (text_[pos_++] - '0');
      if (value > kMaxCount) error(at, fmt::format("a quantifier's count above {}", kMaxCount));
    }
    return value;
  }

  // After '\' at AT: the characters the escape stands for.
  Ranges escape(size_t at, bool in_class) {
    if (!more()) error(at, "'\\' ends the pattern");
    char32_t c = text_[pos_++];
    switch (c) {
      case 'd': return kDigits;
      case 'D': return complement(kDigits);
      case 'w': return kWordCharacters;
      case 'W': return complement(kWordCharacters);
      case 's': return kWhitespace;
      case 'S': return complement(kWhitespace);
      case 't': return {{'\t', '\t'}};
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case 'x': {
        uint32_t value = hex_digits(at, 2);
        return {{value, value}};
      }
      case 'u': {
        uint32_t value = unicode_escape(at);
        return {{value, value}};
      }
      case '0':
        if (peek() >= '0' && peek() <= '9') error(at, "octal escapes and backreferences are not supported");
        return {{0, 0}};
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        [[fallthrough]];
      case 'B': error(at, "word boundaries (\\b, \\B) are not supported");
      case 'k': error(at, "backreferences are not supported");
      case 'p':
      case 'P': error(at, "Unicode property escapes (\\p{...}) are not supported");
      case 'c': error(at, "control escapes (\\cX) are not supported");
      default:
        if (c >= '1' && c <= '9') error(at, "backreferences are not supported");
        if (!is_ascii_punctuation(c)) error(at, "this escape is not supported");
        return {{c, c}};
    }
  }

  uint32_t hex_digits(size_t at, int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      if (!is_hex(peek())) error(at, fmt::format("the escape needs {} hex digits", digits));
      value = value * 16 + hex_value(text_[pos_++]);
    }
    return value;
  }

  // After "\u": XXXX (a high surrogate and a "\uXXXX" low one after it are one character), or {X...}.
  uint32_t unicode_escape(size_t at) {
    if (take('{')) {
      uint32_t value = 0;
      size_t digits = 0;
      for (; is_hex(peek()); ++digits) {
        value = value * 16 + hex_value(text_[pos_++]);
        if (value > kLastCodePoint) error(at, "a code point past U+10FFFF");
      }
      if (digits == 0 || !take('}')) error(at, "\\u{ needs hex digits and '}'");
      return value;
    }
    uint32_t value = hex_digits(at, 4);
    if (value < 0xD800 || value > 0xDBFF || peek() != '\\' || peek(1) != 'u') return value;
    size_t high_end = pos_;
    pos_ += 2;
    uint32_t low = 0;
    for (int i = 0; i < 4 && is_hex(peek()); ++i) low = low * 16 + hex_value(text_[pos_++]);
    if (pos_ == high_end + 6 && low >= 0xDC00 && low <= 0xDFFF)
      return 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
    pos_ = high_end;  // a lone high surrogate: no character of a JSON string
    return value;
  }

  // After '[' at AT, to its ']'.
  Ranges character_class(size_t at) {
    bool negated = take('^');
    Ranges set;
    for (;;) {
      if (!more()) error(at, "the character class is not closed");
      if (take(']')) break;
      size_t item = pos_;
      Ranges low = class_atom();
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        Ranges high = class_atom();
        bool single = low.size() == 1 && low[0].first == low[0].second && high.size() == 1 &&
                      high[0].first == high[0].second;
        if (!single) {  // a class escape at either end: the '-' is itself (Annex B)
          set.insert(set.end(), low.begin(), low.end());
          set.emplace_back('-', '-');
          set.insert(set.end(), high.begin(), high.end());
          continue;
        }
        if (low[0].first > high[0].first) error(item, "a class range out of order");
        set.emplace_back(low[0].first, high[0].first);
      } else {
        set.insert(set.end(), low.begin(), low.end());
      }
    }
    set = normalized(std::move(set));
    return negated ? complement(set) : set;
  }

  Ranges class_atom() {
    size_t at = pos_;
    char32_t c = text_[pos_++];
    if (c == '\\') return escape(at, /*in_class=*/true);
    return {{c, c}};
  }

  std::u32string text_;
  const std::string& path_;
  size_t pos_ = 0;
};

std::u32string decoded(std::string_view pattern, const std::string& path) {
  std::u32string text;
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(pattern.data());
  for (size_t pos = 0; pos < pattern.size();) {
    utf8proc_int32_t code_point = 0;
    utf8proc_ssize_t length =
        utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(pattern.size() - pos), &code_point);
    if (length <= 0) fail("{}: the pattern is not valid UTF-8 (at byte {})", path, pos);
    text.push_back(static_cast<char32_t>(code_point));
    pos += static_cast<size_t>(length);
  }
  return text;
}

// ---- Thompson's construction, then subsets

constexpr uint32_t kNoState = UINT32_MAX;

struct NfaState {
  std::vector<uint32_t> epsilon;
  Ranges characters;  // taken to `next`
  uint32_t next = kNoState;
};

class Nfa {
 public:
  explicit Nfa(const std::string& path) : path_(path) {}

  struct Fragment {
    uint32_t start, end;  // END has no edges yet
  };

  Fragment build(const Regex& regex) {
    switch (regex.kind) {
      case Regex::Kind::Characters: {
        Fragment fragment{add(), add()};
        states_[fragment.start].characters = scalar_values(regex.characters);
        states_[fragment.start].next = fragment.end;
        return fragment;
      }
      case Regex::Kind::Sequence: {
        uint32_t start = add(), end = start;
        for (const Regex& part : regex.parts) {
          Fragment fragment = build(part);
          link(end, fragment.start);
          end = fragment.end;
        }
        return {start, end};
      }
      case Regex::Kind::Alternatives: {
        Fragment result{add(), add()};
        for (const Regex& part : regex.parts) {
          Fragment fragment = build(part);
          link(result.start, fragment.start);
          link(fragment.end, result.end);
        }
        return result;
      }
      case Regex::Kind::Repeat: return repeat(regex.parts[0], regex.min, regex.max);
    }
    return {};
  }

  const std::vector<NfaState>& states() const { return states_; }

 private:
  // PART MIN times, then up to MAX in all (a loop where unbounded): copies of it, as {n,m} means.
  Fragment repeat(const Regex& part, uint32_t min, uint32_t max) {
    uint32_t start = add(), end = add(), at = start;
    for (uint32_t i = 0; i < min; ++i) {
      Fragment copy = build(part);
      link(at, copy.start);
      at = copy.end;
    }
    if (max == kUnbounded) {
      Fragment loop = build(part);
      link(at, loop.start);
      link(loop.end, at);
    } else {
      for (uint32_t i = min; i < max; ++i) {
        Fragment copy = build(part);
        link(at, copy.start);
        link(at, end);
        at = copy.end;
      }
    }
    link(at, end);
    return {start, end};
  }

  uint32_t add() {
    if (states_.size() >= RegexAutomaton::kMaxStates)
      fail("{}: the pattern needs more than {} automaton states (a quantifier {{n,m}} repeats a copy of its atom m "
           "times)", path_, RegexAutomaton::kMaxStates);
    states_.emplace_back();
    return static_cast<uint32_t>(states_.size() - 1);
  }
  void link(uint32_t from, uint32_t to) { states_[from].epsilon.push_back(to); }

  std::vector<NfaState> states_;
  const std::string& path_;
};

// The states ε-edges reach from SET (sorted).
std::vector<uint32_t> closure(const std::vector<NfaState>& nfa, std::vector<uint32_t> set) {
  std::vector<bool> seen(nfa.size());
  for (uint32_t state : set) seen[state] = true;
  for (size_t i = 0; i < set.size(); ++i)
    for (uint32_t next : nfa[set[i]].epsilon)
      if (!seen[next]) {
        seen[next] = true;
        set.push_back(next);
      }
  std::sort(set.begin(), set.end());
  return set;
}

using State = RegexAutomaton::State;
using Transition = RegexAutomaton::Transition;

void add_transition(std::vector<Transition>& transitions, uint32_t first, uint32_t last, uint32_t target) {
  if (!transitions.empty() && transitions.back().target == target && transitions.back().last + 1 == first)
    transitions.back().last = last;
  else
    transitions.push_back({first, last, target});
}

// The subset construction: one state per set of NFA states the same characters reach.
std::vector<State> determinized(const std::vector<NfaState>& nfa, uint32_t start, uint32_t accept,
                                const std::string& path) {
  std::map<std::vector<uint32_t>, uint32_t> ids;
  std::vector<std::vector<uint32_t>> sets;
  std::vector<State> states;
  auto id_of = [&](std::vector<uint32_t> set) {
    auto [it, added] = ids.emplace(set, static_cast<uint32_t>(sets.size()));
    if (added) {
      if (sets.size() >= RegexAutomaton::kMaxStates)
        fail("{}: the pattern needs more than {} automaton states", path, RegexAutomaton::kMaxStates);
      sets.push_back(std::move(set));
    }
    return it->second;
  };
  id_of(closure(nfa, {start}));
  for (size_t id = 0; id < sets.size(); ++id) {
    struct Edge {
      uint32_t first, last, target;
    };
    std::vector<Edge> edges;
    std::vector<uint32_t> bounds;
    for (uint32_t member : sets[id])
      for (auto [first, last] : nfa[member].characters) {
        edges.push_back({first, last, nfa[member].next});
        bounds.push_back(first);
        bounds.push_back(last + 1);
      }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    State state;
    state.accepting = std::binary_search(sets[id].begin(), sets[id].end(), accept);
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      std::vector<uint32_t> targets;
      for (const Edge& edge : edges)
        if (edge.first <= bounds[i] && bounds[i] <= edge.last) targets.push_back(edge.target);
      if (targets.empty()) continue;
      add_transition(state.transitions, bounds[i], bounds[i + 1] - 1, id_of(closure(nfa, std::move(targets))));
    }
    states.push_back(std::move(state));
  }
  return states;
}

// Hopcroft's minimization: the classes of states that accept the same continuations (every state not LIVE, and
// every character a state refuses, lead to one dead state, the last). The characters are the stretches between
// the bounds of every transition's range; a class is split by the states whose transition on some stretch lands in a
// splitter class, and the smaller half of each split becomes a splitter, which bounds the work by n log n per stretch.
std::vector<uint32_t> equivalence_classes(const std::vector<State>& states, const std::vector<bool>& live) {
  const uint32_t n = static_cast<uint32_t>(states.size()), dead = n, total = n + 1;
  std::vector<uint32_t> bounds;
  for (const State& state : states)
    for (const Transition& t : state.transitions) bounds.insert(bounds.end(), {t.first, t.last + 1});
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  const size_t m = bounds.empty() ? 0 : bounds.size() - 1;  // stretches
  auto stretch = [&](uint32_t c) {
    return static_cast<size_t>(std::upper_bound(bounds.begin(), bounds.end(), c) - bounds.begin() - 1);
  };
  // The states whose transition on stretch a leads to t: sources[begin[t * m + a] .. begin[t * m + a + 1]).
  std::vector<uint32_t> target(total * m, dead);
  for (uint32_t s = 0; s < n; ++s)
    for (const Transition& t : states[s].transitions)
      for (size_t a = stretch(t.first); a <= stretch(t.last); ++a) target[s * m + a] = live[t.target] ? t.target : dead;
  std::vector<uint32_t> begin(total * m + 1, 0), sources(total * m);
  for (size_t i = 0; i < total * m; ++i) ++begin[target[i] * m + i % m + 1];
  for (size_t i = 0; i < total * m; ++i) begin[i + 1] += begin[i];
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  for (size_t i = 0; i < total * m; ++i) sources[fill[target[i] * m + i % m]++] = static_cast<uint32_t>(i / m);

  // The partition: each block a stretch of ELEMENTS, its marked states first while a splitter is applied.
  struct Block {
    uint32_t begin, end, marked = 0;
  };
  std::vector<Block> blocks;
  std::vector<uint32_t> elements, location(total), block_of(total);
  for (bool accepting : {false, true}) {
    uint32_t first = static_cast<uint32_t>(elements.size());
    for (uint32_t s = 0; s < total; ++s)
      if ((s < n && live[s] && states[s].accepting) == accepting) {
        location[s] = static_cast<uint32_t>(elements.size());
        block_of[s] = static_cast<uint32_t>(blocks.size());
        elements.push_back(s);
      }
    if (elements.size() > first) blocks.push_back({first, static_cast<uint32_t>(elements.size())});
  }
  std::vector<bool> waiting(blocks.size() * m);
  std::vector<std::pair<uint32_t, size_t>> work;
  auto wait = [&](uint32_t block, size_t a) {
    waiting[block * m + a] = true;
    work.emplace_back(block, a);
  };
  auto size = [&](uint32_t block) { return blocks[block].end - blocks[block].begin; };
  uint32_t smaller = blocks.size() == 2 && size(1) < size(0) ? 1 : 0;
  for (size_t a = 0; a < m; ++a) wait(smaller, a);
  std::vector<uint32_t> splitter_sources, touched;
  while (!work.empty()) {
    auto [splitter, a] = work.back();
    work.pop_back();
    waiting[splitter * m + a] = false;
    splitter_sources.clear();
    for (uint32_t i = blocks[splitter].begin; i < blocks[splitter].end; ++i) {
      size_t key = elements[i] * m + a;
      splitter_sources.insert(splitter_sources.end(), sources.begin() + begin[key], sources.begin() + begin[key + 1]);
    }
    touched.clear();
    for (uint32_t s : splitter_sources) {
      Block& block = blocks[block_of[s]];
      uint32_t first_unmarked = block.begin + block.marked;
      if (location[s] < first_unmarked) continue;
      std::swap(elements[location[s]], elements[first_unmarked]);
      std::swap(location[s], location[elements[location[s]]]);
      if (block.marked++ == 0) touched.push_back(block_of[s]);
    }
    for (uint32_t old : touched) {
      uint32_t marked = std::exchange(blocks[old].marked, 0);
      if (marked == size(old)) continue;
      uint32_t split = static_cast<uint32_t>(blocks.size());
      blocks.push_back({blocks[old].begin, blocks[old].begin + marked});
      blocks[old].begin += marked;
      for (uint32_t i = blocks[split].begin; i < blocks[split].end; ++i) block_of[elements[i]] = split;
      waiting.resize(blocks.size() * m);
      for (size_t c = 0; c < m; ++c)
        if (waiting[old * m + c]) wait(split, c);
        else wait(size(split) < size(old) ? split : old, c);
    }
  }
  std::vector<uint32_t> class_of(block_of.begin(), block_of.end() - 1);
  for (uint32_t& c : class_of) c = c == block_of[dead] ? kNoState : c;
  return class_of;
}

}  // namespace

RegexAutomaton RegexAutomaton::from_pattern(std::string_view pattern, const std::string& path) {
  Regex regex = Parser(decoded(pattern, path), path).parse();
  Nfa nfa(path);
  Nfa::Fragment whole = nfa.build(regex);
  return trimmed(determinized(nfa.states(), whole.start, whole.end, path), path, "the pattern");
}

RegexAutomaton RegexAutomaton::intersection(const RegexAutomaton& a, const RegexAutomaton& b,
                                            const std::string& path) {
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  auto id_of = [&](uint32_t x, uint32_t y) {
    auto [it, added] = ids.emplace(std::pair(x, y), static_cast<uint32_t>(pairs.size()));
    if (added) {
      if (pairs.size() >= kMaxStates)
        fail("{}: the pattern and the format together need more than {} automaton states", path, kMaxStates);
      pairs.emplace_back(x, y);
    }
    return it->second;
  };
  id_of(kStart, kStart);
  std::vector<State> states;
  for (size_t id = 0; id < pairs.size(); ++id) {
    auto [x, y] = pairs[id];
    State state;
    state.accepting = a.accepting(x) && b.accepting(y);
    std::span<const Transition> left = a.transitions(x), right = b.transitions(y);
    for (size_t i = 0, j = 0; i < left.size() && j < right.size();) {
      uint32_t first = std::max(left[i].first, right[j].first), last = std::min(left[i].last, right[j].last);
      if (first <= last) add_transition(state.transitions, first, last, id_of(left[i].target, right[j].target));
      (left[i].last < right[j].last ? i : j)++;
    }
    states.push_back(std::move(state));
  }
  return trimmed(states, path, "both the pattern and the format");
}

// Drops the states that cannot reach acceptance, then merges those that accept the same continuations.
RegexAutomaton RegexAutomaton::trimmed(const std::vector<State>& states, const std::string& path,
                                       std::string_view matched_by) {
  size_t n = states.size();
  std::vector<std::vector<uint32_t>> sources(n);
  for (uint32_t s = 0; s < n; ++s)
    for (const Transition& t : states[s].transitions) sources[t.target].push_back(s);
  std::vector<bool> live(n);
  std::vector<uint32_t> work;
  for (uint32_t s = 0; s < n; ++s)
    if (states[s].accepting) {
      live[s] = true;
      work.push_back(s);
    }
  while (!work.empty()) {
    uint32_t s = work.back();
    work.pop_back();
    for (uint32_t source : sources[s])
      if (!live[source]) {
        live[source] = true;
        work.push_back(source);
      }
  }
  if (!live[kStart]) fail("{}: no string matches {}", path, matched_by);

  std::vector<uint32_t> class_of = equivalence_classes(states, live);

  // Number the classes in the order a walk from the start meets them, so that the start is state 0.
  std::vector<uint32_t> number(n + 1, kNoState), representative;
  RegexAutomaton automaton;
  auto number_of = [&](uint32_t s) {
    if (number[class_of[s]] == kNoState) {
      number[class_of[s]] = static_cast<uint32_t>(representative.size());
      representative.push_back(s);
    }
    return number[class_of[s]];
  };
  number_of(kStart);
  for (size_t i = 0; i < representative.size(); ++i) {
    const State& original = states[representative[i]];
    State state;
    state.accepting = original.accepting;
    for (const Transition& t : original.transitions)
      if (live[t.target]) add_transition(state.transitions, t.first, t.last, number_of(t.target));
    uint32_t self = static_cast<uint32_t>(i);
    std::vector<Transition> everything = {{0, 0xD7FF, self}, {0xE000, kLastCodePoint, self}};
    state.universal = state.accepting && state.transitions.size() == 2 &&
                      std::equal(everything.begin(), everything.end(), state.transitions.begin(),
                                 [](const Transition& x, const Transition& y) {
                                   return x.first == y.first && x.last == y.last && x.target == y.target;
                                 });
    automaton.states_.push_back(std::move(state));
  }
  return automaton;
}

uint32_t RegexAutomaton::next(uint32_t state, uint32_t code_point) const {
  std::span<const Transition> transitions = states_[state].transitions;
  auto it = std::upper_bound(transitions.begin(), transitions.end(), code_point,
                             [](uint32_t c, const Transition& t) { return c < t.first; });
  if (it == transitions.begin() || (--it)->last < code_point) return kRefused;
  return it->target;
}

}  // namespace gerbil
