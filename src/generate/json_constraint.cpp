#include "generate/json_constraint.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "generate/regex_automaton.h"
#include "gerbil/error.h"

namespace gerbil {

// ---- the vocabulary trie -------------------------------------------------------------------------

namespace {

// The length of the UTF-8 character a lead byte starts, 0 for a byte that cannot start one.
int utf8_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The range of the byte after a lead byte (RFC 3629: no overlong forms, surrogates or code points past
// U+10FFFF); every later continuation byte is 0x80..0xBF.
std::pair<uint8_t, uint8_t> second_byte_range(uint8_t lead) {
  switch (lead) {
    case 0xE0: return {0xA0, 0xBF};
    case 0xED: return {0x80, 0x9F};
    case 0xF0: return {0x90, 0xBF};
    case 0xF4: return {0x80, 0x8F};
    default: return {0x80, 0xBF};
  }
}

// Whether TEXT is plain string content from a character boundary: no '"', '\' or control byte, and valid
// UTF-8 except that the last character may be cut short.
bool plain_string_text(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    uint8_t lead = static_cast<uint8_t>(text[pos]);
    if (lead < 0x20 || lead == '"' || lead == '\\') return false;
    int length = utf8_length(lead);
    if (length == 0) return false;
    for (int i = 1; i < length && pos + i < text.size(); ++i) {
      uint8_t byte = static_cast<uint8_t>(text[pos + i]);
      auto [low, high] = i == 1 ? second_byte_range(lead) : std::pair<uint8_t, uint8_t>{0x80, 0xBF};
      if (byte < low || byte > high) return false;
    }
    pos += length;
  }
  return true;
}

}  // namespace

TokenTrie::TokenTrie(const Tokenizer& tokenizer) {
  bytes_.resize(tokenizer.vocab_size());
  std::vector<int32_t> ids;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    int32_t token = static_cast<int32_t>(id);
    if (tokenizer.is_added(token)) continue;
    try {
      bytes_[id] = tokenizer.token_bytes(token);
    } catch (const Error&) {
      continue;  // an id the vocabulary skips
    }
    if (!bytes_[id].empty()) ids.push_back(token);
    max_token_length_ = std::max(max_token_length_, bytes_[id].size());
    max_token_commas_ = std::max<size_t>(max_token_commas_, std::count(bytes_[id].begin(), bytes_[id].end(), ','));
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  sorted_ids_ = std::move(ids);
  build(sorted_ids_, 0);
}

std::string_view TokenTrie::bytes(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < bytes_.size() ? std::string_view(bytes_[id]) : std::string_view();
}

// Builds the node of the sorted IDS that share their first DEPTH bytes; returns its index. Nodes come in
// pre-order, so a subtree's tokens are one stretch of sorted_ids_.
uint32_t TokenTrie::build(std::span<const int32_t> ids, size_t depth) {
  uint32_t index = static_cast<uint32_t>(nodes_.size());
  nodes_.emplace_back();
  uint32_t begin = static_cast<uint32_t>(ids.data() - sorted_ids_.data());
  size_t here = 0;
  while (here < ids.size() && bytes_[ids[here]].size() == depth) ++here;
  bool plain = std::all_of(ids.begin(), ids.end(), [&](int32_t id) {
    return plain_string_text(std::string_view(bytes_[id]).substr(depth));
  });
  size_t longest = 0;
  for (int32_t id : ids) longest = std::max(longest, bytes_[id].size() - depth);
  std::vector<Edge> edges;
  for (size_t lo = here; lo < ids.size();) {
    uint8_t byte = static_cast<uint8_t>(bytes_[ids[lo]][depth]);
    size_t hi = lo;
    while (hi < ids.size() && static_cast<uint8_t>(bytes_[ids[hi]][depth]) == byte) ++hi;
    edges.push_back({byte, build(ids.subspan(lo, hi - lo), depth + 1)});
    lo = hi;
  }
  Node& node = nodes_[index];
  node.edges_begin = static_cast<uint32_t>(edges_.size());
  edges_.insert(edges_.end(), edges.begin(), edges.end());
  node.edges_end = static_cast<uint32_t>(edges_.size());
  node.tokens_begin = begin;
  node.tokens_end_here = begin + static_cast<uint32_t>(here);
  node.tokens_end = begin + static_cast<uint32_t>(ids.size());
  node.plain_string = plain;
  node.longest = static_cast<uint32_t>(longest);
  return index;
}

std::shared_ptr<const TokenTrie> TokenTrie::of(const Tokenizer& tokenizer) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const TokenTrie>> tries;
  std::lock_guard lock(mutex);
  std::shared_ptr<const TokenTrie>& trie = tries[tokenizer.source().string()];
  if (!trie) trie = std::make_shared<const TokenTrie>(tokenizer);
  return trie;
}

// ---- the compiled grammar ----------------------------------------------------------------------------

enum class Kind : uint8_t { Object, Map, Array, String, Number, Integer, Literals, Choice };

constexpr uint32_t kNone = UINT32_MAX;
constexpr size_t kMaxProperties = 64;  // an object's seen properties are one 64-bit mask
// The most readings of the text followed at once (JsonMatcher::State), and so the most branches of a choice that may
// begin with one byte (the grammar refuses more). Past it, where nested choices multiply their readings, a reading
// is dropped: each one kept is a valid prefix with a way to a complete value, so the text stays valid and only its
// continuations are narrower.
constexpr size_t kMaxReadings = 256;
constexpr uint32_t kMaxNumberLength = 40;  // bytes: a model cannot write digits for ever

// A trie of the exact texts a node may be: enum / const values, true / false / null, an object's "keys".
struct LiteralNode {
  std::vector<std::pair<uint8_t, uint32_t>> children;
  int32_t terminal = -1;  // which literal ends here (an object's property index)
  uint64_t properties = 0;  // for key tries: the properties whose key passes through here
};

// A number's minimum or maximum, inclusive and exact, as the automaton compares a value's digits with it.
struct NumberBound {
  bool negative = false;  // never for zero
  std::string digits;     // of its magnitude's integer part, "0" if none; empty where the schema sets no such bound
  std::string fraction;   // of its magnitude's fraction, without trailing zeros
};

// A string's pattern, and which of its states can still end in a match within the string's lengths. A string counts
// its characters up to its maxLength, or without one up to its minLength (see Frame::count): from each count, the
// characters still to come must be able to lead the pattern to acceptance at a length within the bounds. Without
// bounds every state can (the automaton keeps only such states), and no table is kept.
class StringPattern {
 public:
  static constexpr size_t kMaxCells = size_t{1} << 22;  // (counts) x (states) in the table

  // DESCRIBED names what the automaton matches in errors ("the pattern", "the format 'date'").
  StringPattern(RegexAutomaton automaton, uint32_t min_length, uint32_t max_length, const std::string& path,
                std::string_view described)
      : automaton_(std::move(automaton)) {
    if (min_length == 0 && max_length == UINT32_MAX) return;
    size_t states = automaton_.size(), rows = (max_length == UINT32_MAX ? min_length : max_length) + size_t{1};
    if (rows * states > kMaxCells)
      fail("{}: a pattern of {} states beside a length bound of {} is too large to combine (at most {} states times "
           "the bound)", path, states, rows - 1, kMaxCells);
    table_.resize(rows * states);
    if (max_length == UINT32_MAX)
      fill_at_least(min_length);
    else
      fill_within(min_length, max_length);
    if (!completable(RegexAutomaton::kStart, 0))
      fail("{}: no string of {} characters matches {}", path,
           max_length == UINT32_MAX ? fmt::format("at least {}", min_length)
                                    : fmt::format("{} to {}", min_length, max_length),
           described);
  }

  const RegexAutomaton& automaton() const { return automaton_; }
  // Whether a string in STATE with COUNT characters counted can still end matched within its lengths.
  bool completable(uint32_t state, uint32_t count) const {
    return table_.empty() || table_[count * automaton_.size() + state];
  }

 private:
  using States = std::vector<bool>;

  // The states with a transition into one of TARGETS.
  States predecessors(const States& targets) const {
    States result(automaton_.size());
    for (uint32_t s = 0; s < automaton_.size(); ++s)
      for (const RegexAutomaton::Transition& t : automaton_.transitions(s)) result[s] = result[s] || targets[t.target];
    return result;
  }
  void set_row(uint32_t count, const States& states) {
    std::copy(states.begin(), states.end(), table_.begin() + static_cast<std::ptrdiff_t>(count * states.size()));
  }

  // Without a maxLength: from count c (at most MIN), a match MIN - c or more characters away.
  void fill_at_least(uint32_t min) {
    States at_least(automaton_.size(), true);  // 0 or more: every state
    set_row(min, at_least);
    for (uint32_t count = min; count-- > 0;) set_row(count, at_least = predecessors(at_least));
  }

  // With a maxLength: from count c, a match k characters away for some k in [max(0, MIN - c), MAX - c]. Going
  // down from k = MAX, each state's nearest such k is known at every k; the rows whose window starts at k take it.
  void fill_within(uint32_t min, uint32_t max) {
    std::vector<States> exactly(max + size_t{1});
    exactly[0].resize(automaton_.size());
    for (uint32_t s = 0; s < automaton_.size(); ++s) exactly[0][s] = automaton_.accepting(s);
    for (uint32_t k = 1; k <= max; ++k) exactly[k] = predecessors(exactly[k - 1]);
    std::vector<uint32_t> nearest(automaton_.size(), UINT32_MAX);
    for (uint32_t k = max + 1; k-- > 0;) {
      for (uint32_t s = 0; s < automaton_.size(); ++s)
        if (exactly[k][s]) nearest[s] = k;
      // The counts whose window starts at k: min - k where 0 < k <= min, and min to max where k = 0.
      if (k > min) continue;
      uint32_t first = min - k, last = k > 0 ? first : max;
      for (uint32_t count = first; count <= last; ++count) {
        States row(automaton_.size());
        for (uint32_t s = 0; s < automaton_.size(); ++s) row[s] = nearest[s] <= max - count;
        set_row(count, row);
      }
    }
  }

  RegexAutomaton automaton_;
  std::vector<bool> table_;  // [count * states + state]
};

// The string formats OpenAI's structured outputs enforce, as patterns of their common form that match valid values
// only (dates of the Gregorian calendar, leap days included; times without a leap second, "T" and "Z" in capitals;
// a pragmatic email address: a dot-atom, "@", host labels and a top-level domain of letters), with the most
// characters where the format limits them. Other formats stay annotations, as JSON Schema allows.
struct StringFormat {
  const char* name;
  uint32_t max_length = UINT32_MAX;
};
constexpr StringFormat kStringFormats[] = {{"date"},  {"time"},  {"date-time"},      {"uuid"},
                                           {"ipv4"}, {"email"}, {"hostname", 253}};

// The patterns of kStringFormats, by name.
std::map<std::string, std::string> format_patterns() {
  const std::string year = R"(\d{4})";
  const std::string leap_year = R"((?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00))";
  const std::string month_day = R"((?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|)"
                                R"(02-(?:0[1-9]|1\d|2[0-8])))";
  const std::string date = "(?:" + year + "-" + month_day + "|" + leap_year + "-02-29)";
  const std::string time = R"((?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
  const std::string label = R"([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)";
  const std::string octet = R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
  const std::string atom = R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)";
  return {
      {"date", "^" + date + "$"},
      {"time", "^" + time + "$"},
      {"date-time", "^" + date + "T" + time + "$"},
      {"uuid", R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)"},
      {"ipv4", "^(?:" + octet + R"(\.){3})" + octet + "$"},
      {"email", "^" + atom + R"((?:\.)" + atom + ")*@(?:" + label + R"(\.)+[A-Za-z]{2,}$)"},
      {"hostname", "^" + label + R"((?:\.)" + label + ")*$"},
  };
}

// The format's automaton, compiled once for the process.
const RegexAutomaton& format_automaton(const StringFormat& format) {
  static const std::map<std::string, RegexAutomaton> automata = [] {
    std::map<std::string, RegexAutomaton> compiled;
    for (const auto& [name, pattern] : format_patterns())
      compiled.emplace(name, RegexAutomaton::from_pattern(pattern, "format " + name));
    return compiled;
  }();
  return automata.at(format.name);
}

class JsonMaskTable;  // the token constraint's cache of masks (below)

struct JsonGrammar::Impl {
  struct Property {
    uint32_t value;
    bool required;
  };
  struct Node {
    Kind kind = Kind::String;
    std::vector<Property> properties;  // Object
    uint64_t required = 0;             // Object: mask of required properties
    uint32_t literals = kNone;         // Object: its key trie; Literals: its value trie
    uint32_t item = kNone;             // Map: the value of every key; Array: every item past the prefix
    std::vector<uint32_t> prefix_items;  // Array: its first items, in order (prefixItems)
    uint32_t min_count = 0, max_count = UINT32_MAX;  // Array: items; String: characters
    uint32_t pattern = kNone;                          // String: its pattern, in patterns
    NumberBound minimum, maximum;                      // Integer, Number
    uint32_t fraction_digits = 0;  // Number: the fewest fraction digits a value within its bounds is written with
    std::vector<uint32_t> alternatives;  // Choice
    // Choice: per first byte, the values (no choices among them) that may begin with it, as an index into
    // Impl::value_lists (kNone: none). More than one where branches begin alike: the automaton follows each.
    std::array<uint32_t, 256> by_first_byte{};
    std::string path;  // Choice: its schema path, for errors (empty: the document's)
    bool exclusive = false;  // Choice of a oneOf: its branches must rule one another out
    std::array<bool, 256> first_bytes{};      // the bytes a value of this node may begin with
  };
  std::vector<Node> nodes;
  std::vector<std::vector<uint32_t>> value_lists;  // Node::by_first_byte's
  std::vector<LiteralNode> literal_nodes;
  std::vector<StringPattern> patterns;
  uint32_t root = kNone;
  uint32_t string_node = kNone;  // a plain string: the keys of free-form objects
  // The masks of the grammar's states, one table per vocabulary, end ids and options (mask_table()), shared by
  // every constraint made from the grammar: a state's mask is walked once for all the requests of one schema.
  mutable std::mutex mask_tables_mutex;
  mutable std::map<std::string, std::shared_ptr<JsonMaskTable>> mask_tables;

  uint32_t add(Kind kind) {
    nodes.emplace_back().kind = kind;
    return static_cast<uint32_t>(nodes.size() - 1);
  }
  uint32_t add_literal_node() {
    literal_nodes.emplace_back();
    return static_cast<uint32_t>(literal_nodes.size() - 1);
  }
  // Adds TEXT to the literal trie at ROOT, ending in TERMINAL.
  void add_literal(uint32_t root, std::string_view text, int32_t terminal, uint64_t property_bit) {
    uint32_t at = root;
    literal_nodes[at].properties |= property_bit;
    for (char c : text) {
      uint8_t byte = static_cast<uint8_t>(c);
      auto& children = literal_nodes[at].children;
      auto it = std::find_if(children.begin(), children.end(), [&](auto& child) { return child.first == byte; });
      uint32_t next = it != children.end() ? it->second : kNone;
      if (next == kNone) {
        next = add_literal_node();
        literal_nodes[at].children.emplace_back(byte, next);
      }
      at = next;
      literal_nodes[at].properties |= property_bit;
    }
    literal_nodes[at].terminal = terminal;
  }
  uint32_t literals(const std::vector<std::string>& texts) {
    uint32_t node = add(Kind::Literals);
    uint32_t trie = add_literal_node();
    for (const std::string& text : texts) add_literal(trie, text, 0, 0);
    nodes[node].literals = trie;
    return node;
  }
  // Any JSON value, objects and arrays nesting any values.
  uint32_t any_value() {
    uint32_t choice = add(Kind::Choice);
    uint32_t map = add(Kind::Map), array = add(Kind::Array);
    nodes[map].item = nodes[array].item = choice;
    nodes[choice].alternatives = {map, array, string_node, add(Kind::Number), literals({"true", "false", "null"})};
    return choice;
  }
  // Fills first_bytes (a fixpoint: $ref may make choices refer to one another) and the choices' tables.
  void finish(const std::string& path);

 private:
  // A depth-first walk for the values (nodes other than choices) a node may be: the nodes it has seen carry its mark
  // (a choice may reach itself through $ref). One stamp vector serves every walk of finish().
  struct Visits {
    std::vector<uint32_t> stamp;
    uint32_t mark = 0;
  };
  // Adds to VALUES the values NODE may be that begin with byte B (with any byte where B is negative), in the order
  // of the alternatives, each once in the walk.
  void collect_values(uint32_t node, int b, Visits& visits, std::vector<uint32_t>& values) const;
  std::vector<uint32_t> values_of(uint32_t node, int b, Visits& visits) const;  // one new walk
  // The required properties of object node OBJECT whose values are all fixed (const or enum), by name (with its
  // quotes), with those values.
  std::map<std::string, std::vector<nlohmann::json>> fixed_properties(uint32_t object, Visits& visits) const;
  // Every text of the literal trie at TRIE (an object's keys, or values as JSON text), with its terminal.
  std::vector<std::pair<int32_t, std::string>> literal_texts(uint32_t trie) const;
  // The values of Literals node NODE as JSON values, which compare as JSON Schema does (1 and 1.0 are one number).
  std::vector<nlohmann::json> literal_values(uint32_t node) const;
  void check_one_of(const Node& choice, Visits& visits) const;
};

void JsonGrammar::Impl::finish(const std::string& path) {
  for (Node& node : nodes) {
    auto set = [&](std::string_view bytes) {
      for (char c : bytes) node.first_bytes[static_cast<uint8_t>(c)] = true;
    };
    switch (node.kind) {
      case Kind::Object:
      case Kind::Map: set("{"); break;
      case Kind::Array: set("["); break;
      case Kind::String: set("\""); break;
      case Kind::Number:
      case Kind::Integer: set("-0123456789"); break;
      case Kind::Literals:
        for (auto& child : literal_nodes[node.literals].children) node.first_bytes[child.first] = true;
        break;
      case Kind::Choice: break;
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (Node& node : nodes)
      for (uint32_t alternative : node.alternatives)
        for (int b = 0; b < 256; ++b)
          if (nodes[alternative].first_bytes[b] && !node.first_bytes[b]) changed = node.first_bytes[b] = true;
  }
  // Only a cycle of references that never reaches a value ({"$ref": "#"}) begins with no byte: decoding would
  // find no token to take.
  for (const Node& node : nodes)
    if (std::none_of(node.first_bytes.begin(), node.first_bytes.end(), [](bool b) { return b; }))
      fail("{}: a $ref leads back to itself before any value (references in a cycle with nothing to match)", path);
  std::map<std::vector<uint32_t>, uint32_t> list_index;
  Visits visits{std::vector<uint32_t>(nodes.size(), 0)};
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    if (nodes[n].kind != Kind::Choice) continue;
    for (int b = 0; b < 256; ++b) {
      std::vector<uint32_t> values = values_of(n, b, visits);
      if (values.size() > kMaxReadings)
        fail("{}: {} of its branches may begin with '{}'; at most {} may", nodes[n].path.empty() ? path : nodes[n].path,
             values.size(), static_cast<char>(b), kMaxReadings);
      uint32_t list = kNone;
      if (!values.empty()) {
        auto [it, added] = list_index.try_emplace(values, static_cast<uint32_t>(value_lists.size()));
        if (added) value_lists.push_back(std::move(values));
        list = it->second;
      }
      nodes[n].by_first_byte[b] = list;
    }
    if (nodes[n].exclusive) check_one_of(nodes[n], visits);
  }
}

void JsonGrammar::Impl::collect_values(uint32_t node, int b, Visits& visits, std::vector<uint32_t>& values) const {
  if ((b >= 0 && !nodes[node].first_bytes[b]) || visits.stamp[node] == visits.mark) return;
  visits.stamp[node] = visits.mark;
  if (nodes[node].kind != Kind::Choice) {
    values.push_back(node);
    return;
  }
  for (uint32_t alternative : nodes[node].alternatives) collect_values(alternative, b, visits, values);
}

std::vector<uint32_t> JsonGrammar::Impl::values_of(uint32_t node, int b, Visits& visits) const {
  std::vector<uint32_t> values;
  ++visits.mark;
  collect_values(node, b, visits, values);
  return values;
}

std::map<std::string, std::vector<nlohmann::json>> JsonGrammar::Impl::fixed_properties(uint32_t object,
                                                                                         Visits& visits) const {
  const Node& node = nodes[object];
  std::map<std::string, std::vector<nlohmann::json>> fixed;
  for (const auto& [index, name] : literal_texts(node.literals)) {
    const Property& property = node.properties[static_cast<size_t>(index)];
    if (!property.required) continue;
    std::vector<nlohmann::json> values;
    bool all_fixed = true;
    for (uint32_t value : values_of(property.value, -1, visits)) {
      all_fixed = all_fixed && nodes[value].kind == Kind::Literals;
      if (!all_fixed) break;
      std::ranges::move(literal_values(value), std::back_inserter(values));
    }
    if (all_fixed) fixed.emplace(name, std::move(values));
  }
  return fixed;
}

std::vector<std::pair<int32_t, std::string>> JsonGrammar::Impl::literal_texts(uint32_t trie) const {
  std::vector<std::pair<int32_t, std::string>> found;
  std::vector<std::pair<uint32_t, std::string>> open = {{trie, ""}};
  while (!open.empty()) {
    auto [at, text] = std::move(open.back());
    open.pop_back();
    if (literal_nodes[at].terminal >= 0) found.emplace_back(literal_nodes[at].terminal, text);
    for (const auto& [byte, child] : literal_nodes[at].children) open.emplace_back(child, text + static_cast<char>(byte));
  }
  return found;
}

std::vector<nlohmann::json> JsonGrammar::Impl::literal_values(uint32_t node) const {
  std::vector<nlohmann::json> values;
  for (const auto& [_, text] : literal_texts(nodes[node].literals)) values.push_back(nlohmann::json::parse(text));
  return values;
}

// A oneOf's value must be valid against exactly one of its branches. Branches that begin with different bytes never
// both match; where two may begin alike, their objects must be told apart by a discriminator (a property both
// require whose fixed values have none in common, as Pydantic writes tagged unions): the automaton follows both, and
// could not otherwise keep a value that both match from being written.
void JsonGrammar::Impl::check_one_of(const Node& choice, Visits& visits) const {
  const size_t count = choice.alternatives.size();
  std::vector<std::vector<uint32_t>> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = values_of(choice.alternatives[i], -1, visits);
  std::map<uint32_t, std::map<std::string, std::vector<nlohmann::json>>> fixed;  // by object node, as needed
  auto fixed_of = [&](uint32_t object) -> const std::map<std::string, std::vector<nlohmann::json>>& {
    auto it = fixed.find(object);
    if (it == fixed.end()) it = fixed.emplace(object, fixed_properties(object, visits)).first;
    return it->second;
  };
  auto disjoint = [](const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
    return std::ranges::none_of(a, [&](const nlohmann::json& v) { return std::ranges::find(b, v) != b.end(); });
  };
  auto told_apart = [&](uint32_t x, uint32_t y) {
    if (x == y || nodes[x].kind != Kind::Object || nodes[y].kind != Kind::Object) return false;
    const auto& y_fixed = fixed_of(y);
    for (const auto& [name, x_values] : fixed_of(x)) {
      auto it = y_fixed.find(name);
      if (it != y_fixed.end() && disjoint(x_values, it->second)) return true;
    }
    return false;
  };
  for (size_t i = 0; i < count; ++i)
    for (size_t j = i + 1; j < count; ++j)
      for (uint32_t x : values[i])
        for (uint32_t y : values[j]) {
          // Literals, whatever bytes they begin with, by their values (0 and -0.0 are one; "a" and "b" two).
          if (nodes[x].kind == Kind::Literals && nodes[y].kind == Kind::Literals) {
            if (!disjoint(literal_values(x), literal_values(y)))
              fail("{}: branches {} and {} may both match one value (their const / enum values share one); anyOf "
                   "allows a value that both match", choice.path, i, j);
            continue;
          }
          int shared = 0;
          while (shared < 256 && !(nodes[x].first_bytes[shared] && nodes[y].first_bytes[shared])) ++shared;
          if (shared < 256 && !told_apart(x, y))
            fail("{}: branches {} and {} may both match one value (both may begin with '{}', and no property both "
                 "require has const or enum values that tell them apart); anyOf allows a value that both match",
                 choice.path, i, j, static_cast<char>(shared));
        }
}

namespace {

using nlohmann::json;

void drop_trailing_zeros(std::string& fraction) {
  fraction.erase(std::min(fraction.find_last_not_of('0') + 1, fraction.size()));
}

// The bound that TEXT, a JSON number ("-12", "0.25", "1e-07", "1.5e+300"), is exactly.
NumberBound bound_of(std::string_view text) {
  NumberBound bound;
  bound.negative = text.starts_with('-');
  if (bound.negative) text.remove_prefix(1);
  size_t exponent_at = text.find_first_of("eE");
  int exponent = exponent_at == std::string_view::npos ? 0 : std::stoi(std::string(text.substr(exponent_at + 1)));
  std::string_view mantissa = text.substr(0, exponent_at);
  size_t point = std::min(mantissa.find('.'), mantissa.size());
  std::string digits(mantissa.substr(0, point));
  if (point < mantissa.size()) digits += mantissa.substr(point + 1);
  // Zeros on either side, so that the point falls among the digits: after the first, at the latest after the last.
  int integer_digits = static_cast<int>(point) + exponent;
  if (integer_digits < 1) digits.insert(0, static_cast<size_t>(1 - integer_digits), '0');
  size_t split = static_cast<size_t>(std::max(integer_digits, 1));
  if (digits.size() < split) digits.append(split - digits.size(), '0');
  size_t first = std::min(digits.find_first_not_of('0'), split - 1);  // "0" where the integer part is zero
  bound.digits = digits.substr(first, split - first);
  bound.fraction = digits.substr(split);
  drop_trailing_zeros(bound.fraction);
  bound.negative = bound.negative && (bound.digits != "0" || !bound.fraction.empty());
  return bound;
}

std::string text_of(const NumberBound& bound) {
  return (bound.negative ? "-" : "") + bound.digits + (bound.fraction.empty() ? "" : "." + bound.fraction);
}

// -1, 0 or 1 as A's magnitude is below, equal to or above B's (digits without leading zeros, fractions without
// trailing ones: lengths, then the order of the digits, decide).
int compare_magnitudes(const NumberBound& a, const NumberBound& b) {
  if (a.digits.size() != b.digits.size()) return a.digits.size() < b.digits.size() ? -1 : 1;
  int order = a.digits != b.digits ? a.digits.compare(b.digits) : a.fraction.compare(b.fraction);
  return (order > 0) - (order < 0);
}

int compare(const NumberBound& a, const NumberBound& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  return a.negative ? -compare_magnitudes(a, b) : compare_magnitudes(a, b);
}

// Whether a number of at most kMaxNumberLength bytes is within NODE's bounds (with the automaton, below).
bool some_number_fits(const JsonGrammar::Impl::Node& node);

// Compiles schema objects into grammar nodes.
class SchemaCompiler {
 public:
  SchemaCompiler(JsonGrammar::Impl& grammar, const json& document) : g_(grammar), document_(&document) {}

  uint32_t compile(const json& schema, const std::string& path) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) fail("{}: the schema false allows no value", path);
      return g_.any_value();
    }
    if (!schema.is_object()) fail("{}: a schema must be an object, not {}", path, schema.type_name());
    // A schema with an "$id" is a document of its own: the "#..." references inside it point into it (as a
    // tool's parameters, with their "$defs", inside the schema of a whole call).
    if (schema.contains("$id") && &schema != document_) {
      const json* outer = std::exchange(document_, &schema);
      uint32_t compiled = compile(schema, path);
      document_ = outer;
      return compiled;
    }
    if (schema.contains("allOf")) {
      // A reference with annotations stays a reference: a recursive model's fields may be such wrappers.
      if (std::optional<json> ref = sole_reference(schema)) return compile(*ref, path);
      return compile(merge_all_of(schema, path, 0), path);
    }
    check_keywords(schema, path);
    if (schema.contains("$ref")) return reference(schema, path);
    if (schema.contains("const")) return g_.literals({schema["const"].dump()});
    if (schema.contains("enum")) return enumeration(schema["enum"], path + ".enum");
    for (const char* keyword : {"anyOf", "oneOf"})
      if (schema.contains(keyword))
        return choice(branches_with_siblings(schema, keyword, path + "." + keyword), path + "." + keyword,
                      std::string_view(keyword) == "oneOf");
    if (!schema.contains("type")) {
      if (schema.contains("properties")) return object(schema, path);
      if (schema.contains("items") || schema.contains("prefixItems")) return array(schema, path);
      return g_.any_value();
    }
    const json& type = schema["type"];
    if (type.is_string()) return typed(schema, type.get<std::string>(), path);
    if (!type.is_array() || type.empty())
      fail("{}.type: expected a type name or a non-empty list of them, not {}", path, type.dump());
    uint32_t node = g_.add(Kind::Choice);
    g_.nodes[node].path = path + ".type";
    std::vector<uint32_t> alternatives;
    for (size_t i = 0; i < type.size(); ++i) {
      if (!type[i].is_string()) fail("{}.type[{}]: expected a type name, not {}", path, i, type[i].dump());
      alternatives.push_back(typed(schema, type[i].get<std::string>(), path));
    }
    g_.nodes[node].alternatives = alternatives;
    return node;
  }

 private:
  static void check_keywords(const json& schema, const std::string& path) {
    static const char* const kUnsupported[] = {
        "not", "if", "then", "else", "patternProperties", "propertyNames", "multipleOf",
        "minProperties", "maxProperties", "uniqueItems", "contains", "minContains", "maxContains", "additionalItems",
        "unevaluatedItems", "unevaluatedProperties", "dependentRequired", "dependentSchemas",
        "dependencies", "$dynamicRef", "contentSchema"};
    for (const char* keyword : kUnsupported)
      if (schema.contains(keyword))
        fail("{}.{}: the keyword '{}' is not supported in structured output", path, keyword, keyword);
    int kinds = schema.contains("$ref") + schema.contains("const") + schema.contains("enum") +
                schema.contains("anyOf") + schema.contains("oneOf");
    if (kinds > 1)
      fail("{}: only one of $ref, const, enum, anyOf and oneOf may appear in one schema", path);
    // Lengths and bounds narrow the string, number and integer nodes of "type"; elsewhere they would narrow values
    // (any value, an enum's, a reference's) that nothing checks them on.
    if (kinds > 0 || !schema.contains("type"))
      for (const char* keyword :
           {"minLength", "maxLength", "pattern", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"})
        if (schema.contains(keyword))
          fail("{}.{}: '{}' is supported only beside \"type\" (not beside $ref, const, enum, anyOf or oneOf)", path,
               keyword, keyword);
  }

  struct BoundKeyword {
    const char* name;
    bool lower, exclusive;
  };
  static constexpr BoundKeyword kBounds[] = {{"minimum", true, false},
                                             {"exclusiveMinimum", true, true},
                                             {"maximum", false, false},
                                             {"exclusiveMaximum", false, true}};

  uint32_t typed(const json& schema, const std::string& type, const std::string& path) {
    if (type == "object") return object(schema, path);
    if (type == "array") return array(schema, path);
    if (type == "string") return string(schema, path);
    if (type == "number") return number(schema, path);
    if (type == "integer") return integer(schema, path);
    if (type == "boolean") return g_.literals({"true", "false"});
    if (type == "null") return g_.literals({"null"});
    fail("{}.type: unknown type '{}' (expected object, array, string, number, integer, boolean or null)", path,
         type);
  }

  uint32_t object(const json& schema, const std::string& path) {
    const json* properties = schema.contains("properties") ? &schema["properties"] : nullptr;
    const json* additional = schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    if (properties && !properties->is_object())
      fail("{}.properties: expected an object, not {}", path, properties->type_name());
    if (!properties || properties->empty()) {
      if (schema.contains("required") && !schema["required"].empty())
        fail("{}.required: names properties the schema does not declare", path);
      if (additional && additional->is_boolean() && !additional->get<bool>())
        return object_node(schema, json::object(), path);
      uint32_t map = g_.add(Kind::Map);
      uint32_t value = additional && !additional->is_boolean() ? compile(*additional, path + ".additionalProperties")
                                                               : g_.any_value();
      g_.nodes[map].item = value;
      return map;
    }
    if (additional && !(additional->is_boolean() && !additional->get<bool>()))
      fail("{}.additionalProperties: only false is supported alongside properties", path);
    return object_node(schema, *properties, path);
  }

  uint32_t object_node(const json& schema, const json& properties, const std::string& path) {
    if (properties.size() > kMaxProperties)
      fail("{}.properties: {} properties, at most {} are supported", path, properties.size(), kMaxProperties);
    uint32_t node = g_.add(Kind::Object);
    uint32_t keys = g_.add_literal_node();
    std::vector<JsonGrammar::Impl::Property> compiled;
    std::vector<std::string> names;
    for (auto& [name, property] : properties.items()) {
      uint32_t value = compile(property, path + ".properties." + name);
      g_.add_literal(keys, json(name).dump(), static_cast<int32_t>(compiled.size()), uint64_t{1} << compiled.size());
      compiled.push_back({value, false});
      names.push_back(name);
    }
    g_.nodes[node].properties = std::move(compiled);
    g_.nodes[node].literals = keys;
    g_.nodes[node].required = required_mask(schema, node, names, path);
    return node;
  }

  uint64_t required_mask(const json& schema, uint32_t node, const std::vector<std::string>& names,
                         const std::string& path) {
    if (!schema.contains("required")) return 0;
    const json& required = schema["required"];
    if (!required.is_array()) fail("{}.required: expected a list of property names", path);
    uint64_t mask = 0;
    for (size_t i = 0; i < required.size(); ++i) {
      auto it = required[i].is_string() ? std::find(names.begin(), names.end(), required[i].get<std::string>())
                                        : names.end();
      if (it == names.end())
        fail("{}.required[{}]: {} is not one of the declared properties", path, i, required[i].dump());
      size_t index = static_cast<size_t>(it - names.begin());
      mask |= uint64_t{1} << index;
      g_.nodes[node].properties[index].required = true;
    }
    return mask;
  }

  // An array: its prefixItems in order, then items (absent: any values; false: none). Without a minItems, a tuple
  // is written whole: JSON Schema allows it cut short, but a model asked for a tuple means all of it (Pydantic sets
  // minItems to its length, and OpenAI's structured outputs require every item).
  uint32_t array(const json& schema, const std::string& path) {
    uint32_t node = g_.add(Kind::Array);
    std::vector<uint32_t> prefix = prefix_items(schema, path);
    bool closed = schema.contains("items") && schema["items"] == json(false);
    uint32_t item = kNone;
    if (!closed) item = schema.contains("items") ? compile(schema["items"], path + ".items") : g_.any_value();
    JsonGrammar::Impl::Node& compiled = g_.nodes[node];
    compiled.item = item;
    compiled.prefix_items = std::move(prefix);
    uint32_t prefix_size = static_cast<uint32_t>(compiled.prefix_items.size());
    counts(schema, "minItems", "maxItems", compiled, path);
    if (closed && compiled.min_count > prefix_size)
      fail("{}: minItems {} asks for more items than the {} of prefixItems, and items is false", path,
           compiled.min_count, prefix_size);
    if (closed) compiled.max_count = std::min(compiled.max_count, prefix_size);
    if (!schema.contains("minItems")) compiled.min_count = std::min(prefix_size, compiled.max_count);
    return node;
  }

  std::vector<uint32_t> prefix_items(const json& schema, const std::string& path) {
    if (!schema.contains("prefixItems")) return {};
    const json& prefix = schema["prefixItems"];
    if (!prefix.is_array() || prefix.empty())
      fail("{}.prefixItems: expected a non-empty list of schemas, not {}", path, prefix.dump());
    std::vector<uint32_t> items;
    for (size_t i = 0; i < prefix.size(); ++i)
      items.push_back(compile(prefix[i], fmt::format("{}.prefixItems[{}]", path, i)));
    return items;
  }

  // A string within its lengths that matches its pattern and its format (both: their intersection).
  uint32_t string(const json& schema, const std::string& path) {
    std::optional<RegexAutomaton> language = pattern(schema, path);
    const StringFormat* format = string_format(schema, path);
    std::string described = language ? "the pattern" : "";
    if (format) {
      const RegexAutomaton& formatted = format_automaton(*format);
      language = language ? RegexAutomaton::intersection(*language, formatted, path) : formatted;
      described += fmt::format("{}the format '{}'", described.empty() ? "" : " and ", format->name);
    }
    if (!language && !schema.contains("minLength") && !schema.contains("maxLength")) return g_.string_node;
    uint32_t node = g_.add(Kind::String);
    JsonGrammar::Impl::Node& compiled = g_.nodes[node];
    counts(schema, "minLength", "maxLength", compiled, path);
    if (format) compiled.max_count = std::min(compiled.max_count, format->max_length);
    if (language) {
      compiled.pattern = static_cast<uint32_t>(g_.patterns.size());
      g_.patterns.emplace_back(std::move(*language), compiled.min_count, compiled.max_count, path, described);
    }
    return node;
  }

  // The known format SCHEMA names, if any.
  static const StringFormat* string_format(const json& schema, const std::string& path) {
    if (!schema.contains("format")) return nullptr;
    const json& name = schema["format"];
    if (!name.is_string()) fail("{}.format: expected a format name, not {}", path, name.dump());
    for (const StringFormat& format : kStringFormats)
      if (name.get<std::string>() == format.name) return &format;
    return nullptr;
  }

  static std::optional<RegexAutomaton> pattern(const json& schema, const std::string& path) {
    if (!schema.contains("pattern")) return std::nullopt;
    const json& pattern = schema["pattern"];
    if (!pattern.is_string()) fail("{}.pattern: expected a regular expression, not {}", path, pattern.dump());
    return RegexAutomaton::from_pattern(pattern.get<std::string>(), path + ".pattern");
  }

  // NODE's min_count and max_count, from the keywords MIN and MAX.
  static void counts(const json& schema, const char* min, const char* max, JsonGrammar::Impl::Node& node,
                     const std::string& path) {
    node.min_count = count(schema, min, 0, path);
    node.max_count = count(schema, max, UINT32_MAX, path);
    if (node.min_count > node.max_count)
      fail("{}: {} {} is above {} {}", path, min, node.min_count, max, node.max_count);
  }

  static uint32_t count(const json& schema, const char* keyword, uint32_t otherwise, const std::string& path) {
    if (!schema.contains(keyword)) return otherwise;
    const json& value = schema[keyword];
    // A schema built in code may hold a count as a signed integer (parsed text holds it unsigned).
    bool fits = value.is_number_unsigned()  ? value.get<uint64_t>() <= UINT32_MAX
                : value.is_number_integer() ? value.get<int64_t>() >= 0 && value.get<int64_t>() <= int64_t{UINT32_MAX}
                                            : false;
    if (!fits) fail("{}.{}: expected a count, not {}", path, keyword, value.dump());
    return value.get<uint32_t>();
  }

  // An integer within the schema's bounds, all of them (minimum and exclusiveMinimum may both be given).
  uint32_t integer(const json& schema, const std::string& path) {
    std::optional<int64_t> minimum, maximum;
    for (const BoundKeyword& keyword : kBounds) {
      std::optional<int64_t> bound = integer_bound(schema, keyword, path);
      std::optional<int64_t>& kept = keyword.lower ? minimum : maximum;
      if (bound) kept = !kept ? *bound : keyword.lower ? std::max(*kept, *bound) : std::min(*kept, *bound);
    }
    if (minimum && maximum && *minimum > *maximum)
      fail("{}: no integer is within its bounds (at least {}, at most {})", path, *minimum, *maximum);
    uint32_t node = g_.add(Kind::Integer);
    g_.nodes[node].minimum = digits_of(minimum);
    g_.nodes[node].maximum = digits_of(maximum);
    return node;
  }

  // KEYWORD's value, if the schema has it, as an inclusive bound on integers: a fraction rounds inward (which
  // excludes it), an exclusive integer moves in by one. A bound written with a fraction or an exponent was parsed
  // into a double, which rounds integers past 2^53: such a bound is refused rather than met approximately.
  static std::optional<int64_t> integer_bound(const json& schema, const BoundKeyword& keyword,
                                              const std::string& path) {
    if (!schema.contains(keyword.name)) return std::nullopt;
    const json& value = schema[keyword.name];
    if (!value.is_number()) fail("{}.{}: expected a number, not {}", path, keyword.name, value.dump());
    auto beyond = [&] {
      fail("{}.{}: {} is out of range: an integer's bounds, made inclusive, must fit in 64 bits", path, keyword.name,
           value.dump());
    };
    int64_t bound = 0;
    bool exclusive = keyword.exclusive;
    if (value.is_number_float()) {
      double exact = value.get<double>(), rounded = keyword.lower ? std::ceil(exact) : std::floor(exact);
      if (!(std::abs(exact) < 0x1p53))  // 2^53 itself may be 2^53 + 1 rounded
        fail("{}.{}: {} is 2^53 or past it, where a number written with a fraction or an exponent is no longer exact; "
             "write the bound as an integer", path, keyword.name, value.dump());
      bound = static_cast<int64_t>(rounded);
      exclusive = exclusive && rounded == exact;
    } else if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX}) {
      beyond();
    } else {
      bound = value.get<int64_t>();
    }
    if (exclusive) {
      if (bound == (keyword.lower ? INT64_MAX : INT64_MIN)) beyond();
      bound += keyword.lower ? 1 : -1;
    }
    return bound;
  }

  static NumberBound digits_of(std::optional<int64_t> bound) {
    if (!bound) return {};
    uint64_t magnitude = *bound < 0 ? 0 - static_cast<uint64_t>(*bound) : static_cast<uint64_t>(*bound);
    return {*bound < 0, std::to_string(magnitude), ""};
  }

  // A number within the schema's bounds, all of them, written without an exponent (its digits are compared with
  // the bounds' as they come).
  uint32_t number(const json& schema, const std::string& path) {
    std::optional<NumberBound> minimum, maximum;
    for (const BoundKeyword& keyword : kBounds) {
      std::optional<NumberBound> bound = number_bound(schema, keyword, path);
      std::optional<NumberBound>& kept = keyword.lower ? minimum : maximum;
      if (bound && (!kept || (compare(*bound, *kept) > 0) == keyword.lower)) kept = bound;
    }
    if (minimum && maximum && compare(*minimum, *maximum) > 0)
      fail("{}: no number is within its bounds (at least {}, at most {})", path, text_of(*minimum),
           text_of(*maximum));
    uint32_t node = g_.add(Kind::Number);
    JsonGrammar::Impl::Node& compiled = g_.nodes[node];
    compiled.minimum = minimum.value_or(NumberBound{});
    compiled.maximum = maximum.value_or(NumberBound{});
    if (minimum && maximum) compiled.fraction_digits = fewest_fraction_digits(*minimum, *maximum);
    if (!some_number_fits(compiled))
      fail("{}: no number within its bounds can be written in {} bytes (a number with bounds is written without an "
           "exponent)", path, kMaxNumberLength);
    return node;
  }

  // KEYWORD's value, if the schema has it, as an inclusive bound. Text rounds to the nearest double monotonically, so
  // a value whose digits are at least (at most) those of the shortest text of a double is at least (at most) that
  // double; a value written beyond the bound's shortest text may yet round to the bound itself, so an exclusive
  // bound becomes the next double inward. An integer is its own digits (exact past 2^53 too).
  static std::optional<NumberBound> number_bound(const json& schema, const BoundKeyword& keyword,
                                                 const std::string& path) {
    if (!schema.contains(keyword.name)) return std::nullopt;
    const json& value = schema[keyword.name];
    if (!value.is_number()) fail("{}.{}: expected a number, not {}", path, keyword.name, value.dump());
    if (value.is_number_integer() && !keyword.exclusive) return bound_of(value.dump());
    double bound = value.get<double>();
    if (keyword.exclusive) bound = std::nextafter(bound, keyword.lower ? HUGE_VAL : -HUGE_VAL);
    if (!std::isfinite(bound))
      fail("{}.{}: {} leaves no number between it and the largest double", path, keyword.name, value.dump());
    return bound_of(fmt::format("{}", bound));
  }

  // The fewest fraction digits of a number within MINIMUM and MAXIMUM: the least number of them at which a multiple
  // of their unit falls between the bounds. Where the bounds are on one side of zero, the farther one cut to so
  // many digits (toward zero) must still reach the nearer.
  static uint32_t fewest_fraction_digits(const NumberBound& minimum, const NumberBound& maximum) {
    if (minimum.negative != maximum.negative) return 0;  // zero is between them
    const NumberBound& nearer = minimum.negative ? maximum : minimum;
    const NumberBound& farther = minimum.negative ? minimum : maximum;
    for (uint32_t digits = 0;; ++digits) {
      NumberBound cut = farther;
      cut.fraction.resize(std::min<size_t>(digits, cut.fraction.size()));
      drop_trailing_zeros(cut.fraction);
      if (compare_magnitudes(cut, nearer) >= 0) return digits;
    }
  }

  uint32_t enumeration(const json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) fail("{}: expected a non-empty list of values", path);
    std::vector<std::string> texts;
    for (const json& value : values) texts.push_back(value.dump());
    return g_.literals(texts);
  }

  // SCHEMA's KEYWORD (anyOf or oneOf) branches, each merged with the keywords beside it that narrow values (a value
  // must be valid against them and a branch: {"properties": ..., "oneOf": [...]} as OpenAPI writes a base object and
  // its variants), as allOf merges them.
  static json branches_with_siblings(const json& schema, const char* keyword, const std::string& path) {
    json siblings = json::object();
    for (const auto& [name, value] : schema.items())
      if (name != keyword && name != "discriminator" && !is_annotation(name) && !is_definition(name)) siblings[name] = value;
    const json& branches = schema[keyword];
    if (siblings.empty() || !branches.is_array()) return branches;
    json merged = json::array();
    for (const json& branch : branches) {
      if (branch.is_object() && branch.contains("$id"))
        fail("{}: a branch with its own \"$id\" beside keywords of its choice is not supported (move them into the "
             "branch)", path);
      merged.push_back(branch == json(true) ? siblings : json{{"allOf", json::array({siblings, branch})}});
    }
    return merged;
  }

  // anyOf, or oneOf (EXCLUSIVE: Impl::check_one_of checks that its branches rule one another out).
  uint32_t choice(const json& branches, const std::string& path, bool exclusive) {
    if (!branches.is_array() || branches.empty()) fail("{}: expected a non-empty list of schemas", path);
    uint32_t node = g_.add(Kind::Choice);
    std::vector<uint32_t> alternatives;
    for (size_t i = 0; i < branches.size(); ++i)
      alternatives.push_back(compile(branches[i], fmt::format("{}[{}]", path, i)));
    g_.nodes[node].alternatives = alternatives;
    g_.nodes[node].path = path;
    g_.nodes[node].exclusive = exclusive;
    return node;
  }

  // "$ref": "#/json/pointer" into the same document. A node stands in for the target while it compiles, so
  // recursive schemas become cycles of nodes.
  uint32_t reference(const json& schema, const std::string& path) {
    std::string pointer = reference_pointer(schema, path);
    auto key = std::pair(document_, pointer);
    if (auto it = references_.find(key); it != references_.end()) return it->second;
    const json& target = referenced(schema, path);
    uint32_t stand_in = g_.add(Kind::Choice);
    references_[key] = stand_in;
    uint32_t compiled = compile(target, "#" + pointer);
    g_.nodes[stand_in].alternatives = {compiled};
    return stand_in;
  }

  // The JSON pointer of SCHEMA's "$ref" ("#/$defs/x": "/$defs/x").
  static std::string reference_pointer(const json& schema, const std::string& path) {
    const json& ref = schema["$ref"];
    if (!ref.is_string() || !ref.get<std::string>().starts_with("#"))
      fail("{}.$ref: only references into the same schema (\"#/...\") are supported, not {}", path, ref.dump());
    return ref.get<std::string>().substr(1);
  }

  const json& referenced(const json& schema, const std::string& path) const {
    json::json_pointer target;
    try {
      target = json::json_pointer(reference_pointer(schema, path));
    } catch (const json::exception& e) {
      fail("{}.$ref: {} is not a JSON pointer ({})", path, schema["$ref"].dump(), e.what());
    }
    if (!document_->contains(target)) fail("{}.$ref: {} names nothing in the schema", path, schema["$ref"].dump());
    return document_->at(target);
  }

  // ---- allOf
  // A value valid against every schema of an allOf is one valid against their merge, where they do not conflict:
  // their properties and required names together, every other keyword as each gives it (a keyword two of them give
  // differently is refused, as is an object one of them closes to properties another adds). Pydantic writes
  // {"allOf": [{"$ref": ...}], "description": ...} for a field whose model or enum it describes.
  static constexpr int kMaxMergeDepth = 32, kMaxMerges = 4096;
  // Keywords that say nothing of the value; the merge keeps the first of each (and drops the definitions, which
  // references reach in the document itself).
  static bool is_annotation(const std::string& keyword) {
    static const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$comment",
                                                       "deprecated", "readOnly", "writeOnly"};
    return kAnnotations.contains(keyword);
  }
  static bool is_definition(const std::string& keyword) {
    return keyword == "$defs" || keyword == "definitions" || keyword == "$id" || keyword == "$schema";
  }
  static bool only_annotations(const json& schema, std::string_view besides) {
    for (const auto& [keyword, _] : schema.items())
      if (keyword != besides && !is_annotation(keyword) && !is_definition(keyword)) return false;
    return true;
  }

  // {"$ref": ...} where SCHEMA's allOf is that one reference and everything else annotations.
  static std::optional<json> sole_reference(const json& schema) {
    const json& all = schema["allOf"];
    if (!all.is_array() || all.size() != 1 || !all[0].is_object() || !all[0].contains("$ref")) return std::nullopt;
    if (!only_annotations(all[0], "$ref") || !only_annotations(schema, "allOf")) return std::nullopt;
    return json{{"$ref", all[0]["$ref"]}};
  }

  // SCHEMA with its allOf (and a $ref beside it, or in the allOf's schemas) merged into one schema.
  json merge_all_of(const json& schema, const std::string& path, int depth) {
    if (depth > kMaxMergeDepth)
      fail("{}: allOf and $ref nest more than {} deep (a reference cycle?)", path, kMaxMergeDepth);
    // Every merge counts, nested ones too: schemas that branch at every level would otherwise take exponential time.
    if (++merges_ > kMaxMerges)
      fail("{}: more than {} allOf merges (a schema recursive through allOf is not supported)", path, kMaxMerges);
    json parts = json::array();
    json rest = schema;
    if (schema.contains("allOf")) {
      const json& all = schema["allOf"];
      if (!all.is_array() || all.empty())
        fail("{}.allOf: expected a non-empty list of schemas, not {}", path, all.dump());
      parts = all;
      rest.erase("allOf");
    }
    if (rest.contains("$ref")) {
      parts.push_back(json{{"$ref", rest["$ref"]}});
      rest.erase("$ref");
    }
    json merged = json::object();
    std::vector<const json*> closed;  // the parts with "additionalProperties": false
    json expanded = json::array();
    for (size_t i = 0; i < parts.size(); ++i) {
      std::string at = fmt::format("{}.allOf[{}]", path, i);
      const json& part = parts[i];
      if (!part.is_object()) fail("{}: a schema to merge must be an object, not {}", at, part.dump());
      if (part.contains("$ref"))  // named after its target, as a reference's schema is
        expanded.push_back(
            merge_all_of(resolved_with(part, at), fmt::format("#{}", reference_pointer(part, at)), depth + 1));
      else
        expanded.push_back(part.contains("allOf") ? merge_all_of(part, at, depth + 1) : part);
    }
    expanded.push_back(rest);
    for (size_t i = 0; i < expanded.size(); ++i) {
      merge_into(merged, expanded[i], fmt::format("{}.allOf[{}]", path, i));
      if (expanded[i].value("additionalProperties", json(true)) == json(false)) closed.push_back(&expanded[i]);
    }
    const json properties = merged.value("properties", json::object());
    for (const json* part : closed)
      for (const auto& [name, _] : properties.items())
        if (!part->contains("properties") || !(*part)["properties"].contains(name))
          fail("{}.allOf: one schema closes its object (additionalProperties false) to property '{}', which "
               "another adds", path, name);
    return merged;
  }

  // The schema PART's $ref names, with PART's other keywords beside it.
  json resolved_with(const json& part, const std::string& path) const {
    json target = referenced(part, path);
    json rest = part;
    rest.erase("$ref");
    if (!target.is_object())
      fail("{}.$ref: the schema it names must be an object to merge, not {}", path, target.dump());
    return json{{"allOf", json::array({target, rest})}};
  }

  // The types a value of both "type" A and B may have (an integer is a number too).
  static json common_types(const json& a, const json& b, const std::string& path) {
    auto names = [&](const json& type) {
      if (type.is_string()) return std::vector<std::string>{type.get<std::string>()};
      if (!type.is_array()) fail("{}.type: expected a type name or a list of them, not {}", path, type.dump());
      std::vector<std::string> list;
      for (const json& name : type) {
        if (!name.is_string()) fail("{}.type: expected a type name, not {}", path, name.dump());
        list.push_back(name.get<std::string>());
      }
      return list;
    };
    std::vector<std::string> a_names = names(a), b_names = names(b), common;
    auto has = [](const std::vector<std::string>& list, const char* name) { return std::ranges::count(list, name) > 0; };
    for (const std::string& name : a_names) {
      std::string kept = has(b_names, name.c_str()) ? name
                         : (name == "integer" && has(b_names, "number")) || (name == "number" && has(b_names, "integer"))
                             ? "integer"
                             : "";
      if (!kept.empty() && !std::ranges::count(common, kept)) common.push_back(kept);
    }
    if (common.empty())
      fail("{}.type: allOf's schemas give types no value has together ({} and {})", path, a.dump(), b.dump());
    return common.size() == 1 ? json(common[0]) : json(common);
  }

  static void merge_into(json& merged, const json& part, const std::string& path) {
    for (const auto& [keyword, value] : part.items()) {
      if (is_definition(keyword)) continue;
      if (is_annotation(keyword)) {
        if (!merged.contains(keyword)) merged[keyword] = value;
      } else if (keyword == "properties") {
        if (!value.is_object()) fail("{}.properties: expected an object, not {}", path, value.dump());
        json& properties = merged["properties"];
        for (const auto& [name, property] : value.items())  // a property two of them give: valid against both
          properties[name] = properties.contains(name) && properties[name] != property
                                 ? json{{"allOf", json::array({properties[name], property})}}
                                 : property;
      } else if (keyword == "required") {
        if (!value.is_array()) fail("{}.required: expected a list of names, not {}", path, value.dump());
        json& required = merged["required"];
        if (required.is_null()) required = json::array();
        for (const json& name : value)
          if (std::find(required.begin(), required.end(), name) == required.end()) required.push_back(name);
      } else if (keyword == "type" && merged.contains("type")) {
        merged["type"] = common_types(merged["type"], value, path);
      } else if (merged.contains(keyword) && merged[keyword] != value) {
        fail("{}.{}: allOf's schemas give '{}' two different values ({} and {})", path, keyword, keyword,
             merged[keyword].dump(), value.dump());
      } else {
        merged[keyword] = value;
      }
    }
  }

  JsonGrammar::Impl& g_;
  const json* document_;  // what "#..." references point into
  std::map<std::pair<const json*, std::string>, uint32_t> references_;
  int merges_ = 0;
};

std::unique_ptr<JsonGrammar::Impl> new_grammar() {
  auto grammar = std::make_unique<JsonGrammar::Impl>();
  grammar->string_node = grammar->add(Kind::String);
  return grammar;
}

}  // namespace

JsonGrammar::JsonGrammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JsonGrammar::~JsonGrammar() = default;

std::shared_ptr<const JsonGrammar> JsonGrammar::from_schema(const nlohmann::json& schema, const std::string& path) {
  // The last grammars compiled, by schema: a server's requests with one schema share one grammar (and so its masks).
  static constexpr size_t kKept = 16;
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const JsonGrammar>> kept;
  static std::deque<std::string> order;  // oldest first
  std::string key = path + '\n' + schema.dump();
  {
    std::lock_guard lock(mutex);
    if (auto it = kept.find(key); it != kept.end()) return it->second;
  }
  auto grammar = new_grammar();
  SchemaCompiler compiler(*grammar, schema);
  grammar->root = compiler.compile(schema, path);
  grammar->finish(path);
  auto compiled = std::make_shared<const JsonGrammar>(std::move(grammar));
  std::lock_guard lock(mutex);
  if (kept.emplace(key, compiled).second) order.push_back(std::move(key));
  if (order.size() > kKept) {
    kept.erase(order.front());
    order.pop_front();
  }
  return compiled;
}

nlohmann::json embeddable_schema(nlohmann::json schema) {
  if (schema.is_object() && !schema.contains("$id")) schema["$id"] = "gerbil:embedded";
  return schema;
}

std::shared_ptr<const JsonGrammar> JsonGrammar::any_object() {
  auto grammar = new_grammar();
  uint32_t any = grammar->any_value();
  grammar->root = grammar->nodes[any].alternatives[0];  // the object branch
  grammar->finish("json_object");
  return std::make_shared<const JsonGrammar>(std::move(grammar));
}

// ---- the automaton ---------------------------------------------------------------------------------

namespace {

// Phases of a frame, per kind of node. The frame at the bottom of the stack is the document.
enum Phase : uint8_t {
  kDocBefore = 0, kDocValue, kDocAfter,
  kOpen = 0, kContainerStart, kKey, kColon, kValue, kAfter, kNext,  // objects, maps; arrays: no Key or Colon
  kStringOpen = 0, kStringBody, kStringEscape, kStringHex, kStringUtf8,
  kNumberStart = 0, kNumberSign, kNumberZero, kNumberInt, kNumberDot, kNumberFrac, kNumberE, kNumberExpSign,
  kNumberExp,
};

// One open value. No padding, so a stack's bytes are a cache key.
struct Frame {
  uint32_t node = 0;
  uint8_t phase = 0;
  // object: the property being read; string: continuation bytes or hex digits left; a bounded number or integer:
  // its sign and how its integer digits compare with its bounds' (see "number bounds" below)
  uint8_t aux = 0;
  uint8_t whitespace = 0;  // the current run of whitespace
  // string: the lead byte while the byte after it is next (its range may be narrower); a bounded number: how its
  // fraction digits compare with its bounds'
  uint8_t range = 0;
  // literal / key trie node, items read, number length; string: the bits of the character being read where it has
  // a pattern, else of a \u escape its first hex digit (no state per character, so strings share their states)
  uint32_t pos = 0;
  // string: characters read; without a maxLength, only up to minLength, so that longer strings share one state;
  // a bounded number or integer: its integer digits
  uint32_t count = 0;
  uint64_t seen = 0;  // object: properties read; string with a pattern: the pattern automaton's state
};
static_assert(sizeof(Frame) == 24);

// One reading of the text so far: its open values, the document first.
struct Stack {
  uint32_t depth = 0;
  std::vector<Frame> frames;  // frames[0..depth), and room for more (push() makes it)

  void copy_from(const Stack& other) {
    depth = other.depth;
    if (frames.size() < depth + size_t{1}) frames.resize(depth + size_t{1});
    std::memcpy(frames.data(), other.frames.data(), depth * sizeof(Frame));
  }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(frames.data()), depth * sizeof(Frame)}; }
  bool operator==(const Stack& other) const { return bytes() == other.bytes(); }
};

}  // namespace

// Every reading of the text so far: one, except where branches of an anyOf (or a list of types) may begin alike,
// which are followed side by side until the text rules all but one out. stacks[size..) are kept for reuse.
struct JsonMatcher::State {
  std::vector<Stack> stacks;
  std::vector<size_t> hashes;  // of stacks[i].bytes(), for finding a reading twice where there are several
  size_t size = 0;

  std::span<const Stack> readings() const { return {stacks.data(), size}; }
  Stack& append(const Stack& stack) {
    if (size == stacks.size()) stacks.emplace_back(), hashes.emplace_back();
    stacks[size].copy_from(stack);
    return stacks[size++];
  }
  // Keeps the last reading appended unless an earlier one is the same.
  void keep_last_if_new() {
    if (size == 1) return;  // hashes[0] is made when a second reading comes
    auto hash_of = [](const Stack& stack) { return std::hash<std::string_view>()(stack.bytes()); };
    if (size == 2) hashes[0] = hash_of(stacks[0]);
    Stack& last = stacks[size - 1];
    size_t hash = hash_of(last);
    for (size_t i = 0; i + 1 < size; ++i)
      if (hashes[i] == hash && stacks[i] == last) {
        --size;
        return;
      }
    hashes[size - 1] = hash;
  }
  void copy_from(const State& other) {
    size = 0;
    for (const Stack& stack : other.readings()) append(stack);  // grows hashes with stacks
    if (size > 1) std::copy_n(other.hashes.begin(), size, hashes.begin());
  }
  // Puts the readings in the order of their bytes. Which readings kMaxReadings drops depends on their order: in this
  // one, a state's readings decide its steps (and so the mask cached for them) whatever order they came in.
  void sort() {
    if (size < 2) return;
    std::vector<size_t> order(size);
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return stacks[a].bytes() < stacks[b].bytes(); });
    std::vector<Stack> sorted;
    std::vector<size_t> sorted_hashes;
    for (size_t i : order) sorted.push_back(std::move(stacks[i])), sorted_hashes.push_back(hashes[i]);
    std::move(sorted.begin(), sorted.end(), stacks.begin());
    std::copy(sorted_hashes.begin(), sorted_hashes.end(), hashes.begin());
  }
};

namespace {

using State = JsonMatcher::State;
using Node = JsonGrammar::Impl::Node;

bool is_whitespace(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
int hex_value(uint8_t b) {
  if (is_digit(b)) return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

// ---- number bounds
// A bounded number (an integer, or a number without an exponent) is read digit by digit: its frame keeps its sign
// and, for each bound, how its integer digits compare with as many of the bound's first digits (less, equal so far,
// greater), and, once its integer part is the bound's, how its fraction digits compare with the bound's (zeros past
// them). That is enough to tell, for any number of integer digits it may end with and any number of fraction digits
// there is room for, whether a value of that shape is within a bound: a magnitude of fewer integer digits than the
// bound's is smaller, one of more is larger, and one of as many compares as its first differing digit does. For one
// shape, the values that begin with the digits read are the multiples of one unit (10^-fraction digits) in an
// interval, and so are those in range: the two meet exactly when each bound is met by some value of the first and
// the range holds a multiple of the unit (Node::fraction_digits), so the bounds are checked one at a time.

enum Comparison : uint8_t { kEqualSoFar = 0, kLess = 1, kGreater = 2 };
constexpr uint8_t kNegative = 1;  // in Frame::aux, below each bound's Comparison (2 bits)

// Where each bound's Comparison of the integer digits is in Frame::aux, and of the fraction digits in Frame::range.
int integer_shift(bool maximum) { return maximum ? 3 : 1; }
int fraction_shift(bool maximum) { return maximum ? 2 : 0; }
Comparison integer_comparison(const Frame& frame, bool maximum) {
  return static_cast<Comparison>(frame.aux >> integer_shift(maximum) & 3);
}
Comparison fraction_comparison(const Frame& frame, bool maximum) {
  return static_cast<Comparison>(frame.range >> fraction_shift(maximum) & 3);
}
Comparison compare_digit(uint8_t digit, char bound) {
  return digit < static_cast<uint8_t>(bound) ? kLess : digit > static_cast<uint8_t>(bound) ? kGreater : kEqualSoFar;
}

bool negative(const Frame& frame) { return frame.aux & kNegative; }
uint32_t digits_read(const Frame& frame) { return frame.count; }
uint32_t fraction_read(const Frame& frame) {
  bool fraction = frame.phase == kNumberDot || frame.phase == kNumberFrac;
  return fraction ? frame.pos - negative(frame) - frame.count - 1 : 0;
}
bool bounded(const Node& node) { return !node.minimum.digits.empty() || !node.maximum.digits.empty(); }
const NumberBound& bound(const Node& node, bool maximum) { return maximum ? node.maximum : node.minimum; }

// The phase byte B takes a number to from PHASE; kNumberStart where B cannot come there. An integer has no fraction,
// and a bounded number no exponent.
Phase next_number_phase(uint8_t phase, const Node& node, uint8_t b) {
  bool fraction = node.kind == Kind::Number, exponent = fraction && !bounded(node);
  switch (phase) {
    case kNumberStart: return b == '-' ? kNumberSign : b == '0' ? kNumberZero : is_digit(b) ? kNumberInt : kNumberStart;
    case kNumberSign: return b == '0' ? kNumberZero : is_digit(b) ? kNumberInt : kNumberStart;
    case kNumberZero:
    case kNumberInt:
    case kNumberFrac:
      if (is_digit(b) && phase != kNumberZero) return static_cast<Phase>(phase);
      if (b == '.' && fraction && phase != kNumberFrac) return kNumberDot;
      if ((b == 'e' || b == 'E') && exponent) return kNumberE;
      return kNumberStart;
    case kNumberDot: return is_digit(b) ? kNumberFrac : kNumberStart;
    case kNumberE: return b == '+' || b == '-' ? kNumberExpSign : is_digit(b) ? kNumberExp : kNumberStart;
    case kNumberExpSign:
    case kNumberExp: return is_digit(b) ? kNumberExp : kNumberStart;
    default: return kNumberStart;
  }
}

// Notes an integer digit: compared with each bound's digit in its place.
void read_integer_digit(Frame& frame, const Node& node, uint8_t b) {
  for (bool maximum : {false, true}) {
    const std::string& digits = bound(node, maximum).digits;
    if (integer_comparison(frame, maximum) == kEqualSoFar && frame.count < digits.size())
      frame.aux |= static_cast<uint8_t>(compare_digit(b, digits[frame.count]) << integer_shift(maximum));
  }
  ++frame.count;
}

// Notes a fraction digit: compared with each bound's in its place where the integer parts are the same.
void read_fraction_digit(Frame& frame, const Node& node, uint8_t b) {
  uint32_t place = fraction_read(frame);
  for (bool maximum : {false, true}) {
    const NumberBound& limit = bound(node, maximum);
    bool same_integer = frame.count == limit.digits.size() && integer_comparison(frame, maximum) == kEqualSoFar;
    if (!same_integer || fraction_comparison(frame, maximum) != kEqualSoFar) continue;
    char digit = place < limit.fraction.size() ? limit.fraction[place] : '0';
    frame.range |= static_cast<uint8_t>(compare_digit(b, digit) << fraction_shift(maximum));
  }
}

// FRAME past B, a byte that takes its number to the phase NEXT.
Frame number_after(Frame frame, const Node& node, uint8_t b, Phase next) {
  frame.phase = next;
  // Only a bounded number's frame notes its sign and digits: unbounded ones of any digits share their states (and
  // so their cached masks).
  if (bounded(node)) {
    if (next == kNumberSign) frame.aux |= kNegative;
    if (next == kNumberZero || next == kNumberInt) read_integer_digit(frame, node, b);
    if (next == kNumberFrac) read_fraction_digit(frame, node, b);
  }
  ++frame.pos;
  return frame;
}

// With the digits so far equal to the bound's first ones: whether nines in every place still open (the integer
// digits up to the bound's number of them, then fraction digits to ROOM of them) reach the bound's magnitude.
bool nines_reach(const Frame& frame, const NumberBound& bound, uint32_t room) {
  if (bound.digits.find_first_not_of('9', digits_read(frame)) != std::string::npos) return true;
  return bound.fraction.find_first_not_of('9', fraction_read(frame)) < room || bound.fraction.size() <= room;
}

// Whether the frame's digits, followed by others to LENGTH integer digits in all and to ROOM fraction digits at most,
// can make a value within BOUND.
bool within(const Frame& frame, const NumberBound& bound, bool maximum, uint32_t length, uint32_t room) {
  if (bound.digits.empty()) return true;
  // On the other side of zero from the bound (zero is on both), the sign decides: a positive value is above a
  // negative bound, a negative one below a positive bound.
  bool zero = bound.digits == "0" && bound.fraction.empty();
  if (bound.negative != negative(frame) && !zero) return maximum == negative(frame);
  // On its side, the magnitude: at least the bound's for a positive minimum or a negative maximum, else at most.
  bool at_least = maximum == negative(frame);
  uint32_t size = static_cast<uint32_t>(bound.digits.size());
  if (length != size) return (length > size) == at_least;
  for (Comparison so_far : {integer_comparison(frame, maximum), fraction_comparison(frame, maximum)})
    if (so_far != kEqualSoFar) return (so_far == kGreater) == at_least;
  // Equal so far: zeros in the places still open stay at most the bound; nines may reach it.
  return !at_least || nines_reach(frame, bound, room);
}

// Whether some value of LENGTH integer digits and at most ROOM fraction digits that begins with the frame's digits
// is within both bounds.
bool fits(const Frame& frame, const Node& node, uint32_t length, uint32_t room) {
  return room >= node.fraction_digits && within(frame, node.minimum, false, length, room) &&
         within(frame, node.maximum, true, length, room);
}

// The most fraction digits a number with LENGTH integer digits has room for.
uint32_t fraction_room(const Frame& frame, const Node& node, uint32_t length) {
  uint32_t before = negative(frame) + length + 1;  // the point's byte included
  return node.kind == Kind::Number && before < kMaxNumberLength ? kMaxNumberLength - before : 0;
}

// Whether the number read so far can still end within its bounds: as it is, or with more digits where there is
// room (an integer part that is a zero, or that a point ended, takes no more).
bool reachable(const Frame& frame, const Node& node) {
  if (!bounded(node)) return true;
  uint32_t read = digits_read(frame);
  bool integer_open = frame.phase == kNumberSign || frame.phase == kNumberInt;
  uint32_t longest = integer_open ? kMaxNumberLength - negative(frame) : read;
  for (uint32_t length = std::max<uint32_t>(read, 1); length <= longest; ++length)
    if (fits(frame, node, length, fraction_room(frame, node, length))) return true;
  return false;
}

// Whether the value read so far is within its bounds.
bool in_range(const Frame& frame, const Node& node) {
  return fits(frame, node, digits_read(frame), fraction_read(frame));
}

bool some_number_fits(const Node& node) {
  for (char c : std::string_view("-0123456789")) {
    uint8_t b = static_cast<uint8_t>(c);
    if (reachable(number_after(Frame{}, node, b, next_number_phase(kNumberStart, node, b)), node)) return true;
  }
  return false;
}

// Which of NODE's bounds COUNT has reached, as 1 + 2 (min_count) + 4 (max_count); 0 where LOOKAHEAD more steps could
// reach one.
char bounds_passed(uint32_t count, const Node& node, size_t lookahead) {
  char passed = 1;
  for (auto [bound, bit] : {std::pair(node.min_count, 2), std::pair(node.max_count, 4)}) {
    if (count >= bound)
      passed = static_cast<char>(passed | bit);
    else if (bound - count <= lookahead)
      return 0;
  }
  return passed;
}

// The byte-level automaton of a grammar. Stateless: the state is a stack of frames the caller owns.
class Automaton {
 public:
  Automaton(const JsonGrammar::Impl& grammar, const JsonConstraintOptions& options)
      : g_(grammar), max_whitespace_(std::min<uint32_t>(options.max_whitespace, 255)),
        max_depth_(options.max_depth + 1) {}

  void start(State& state) const {
    Stack document;
    document.frames.assign(max_depth_ + 1, Frame{});
    document.depth = 1;
    document.frames[0].phase = kDocBefore;
    state.size = 0;
    state.append(document);
  }

  // TO: the readings of FROM that take byte B (a reading may become several, one per branch of a choice that B may
  // begin). False if none does.
  bool step(const State& from, uint8_t b, State& to) const {
    to.size = 0;
    for (const Stack& stack : from.readings()) {
      fork_ = {};
      follow(stack, b, to);
      const std::vector<uint32_t>* branches = fork_.branches;
      for (size_t k = 1; branches && k < branches->size(); ++k) {
        fork_ = {(*branches)[k], nullptr};
        follow(stack, b, to);
      }
    }
    return to.size > 0;
  }

  bool complete(const State& state) const {
    return std::ranges::any_of(state.readings(), [&](const Stack& stack) {
      if (stack.depth == 1) return stack.frames[0].phase == kDocAfter;
      return stack.depth == 2 && may_end(stack.frames[1]);
    });
  }

  // STATE as the key of the mask of tokens that add at most LOOKAHEAD.characters characters to a string and
  // LOOKAHEAD.items items to an array. A count that one token cannot carry to one of its bounds is only compared
  // with them there, so the key keeps which bounds it has passed instead of the count (a byte a frame): a long
  // string or array then takes its mask from the cache instead of walking the vocabulary once per count.
  struct Lookahead {
    size_t characters, items;
  };
  std::string mask_key(const State& state, Lookahead lookahead) const {
    std::string key(1, static_cast<char>(state.size));
    if (state.size == 1) {
      key += stack_key(state.stacks[0], lookahead);
      return key;
    }
    // Several readings: their keys in order, each after its length, so that the key is the set's.
    std::vector<std::string> keys;
    for (const Stack& stack : state.readings()) keys.push_back(stack_key(stack, lookahead));
    std::sort(keys.begin(), keys.end());
    for (const std::string& part : keys) fmt::format_to(std::back_inserter(key), "{}:{}", part.size(), part);
    return key;
  }

  // Whether some reading is in a string's body at a character boundary, with room for BYTES more characters (a byte
  // starts one at most): every plain string text is allowed there.
  bool in_plain_string(const State& state, size_t bytes) const {
    return std::ranges::any_of(state.readings(), [&](const Stack& stack) { return in_plain_string(stack, bytes); });
  }

 private:
  enum class Result { Accept, Reject, EndRetry };

  // How step() follows a choice whose branches may begin with the same byte: push() takes the branch `forced` where
  // one is set (and clears it), else the first, noting them all in `branches` so that step() follows the others.
  // A byte begins one value at most, so one such choice at most is met in a byte's step.
  struct Fork {
    uint32_t forced = kNone;
    const std::vector<uint32_t>* branches = nullptr;
  };
  mutable Fork fork_;

  // Adds STACK after byte B to TO, unless it refuses B, TO has that reading already, or holds kMaxReadings.
  void follow(const Stack& stack, uint8_t b, State& to) const {
    if (to.size == kMaxReadings) return;
    if (step(to.append(stack), b))
      to.keep_last_if_new();
    else
      --to.size;
  }

  bool step(Stack& state, uint8_t b) const {
    for (;;) {
      switch (feed(state, b)) {
        case Result::Accept: return true;
        case Result::Reject: return false;
        case Result::EndRetry: close(state); break;  // the value ended before b: its parent takes b
      }
    }
  }

  std::string stack_key(const Stack& state, Lookahead lookahead) const {
    std::vector<Frame> frames(state.frames.begin(), state.frames.begin() + state.depth);
    std::string passed(frames.size(), '\0');
    for (size_t d = 0; d < frames.size(); ++d) {
      const Node& node = g_.nodes[frames[d].node];
      bool string = node.kind == Kind::String && node.pattern == kNone;
      uint32_t* count = string ? &frames[d].count
                        : node.kind == Kind::Array && frames[d].pos >= node.prefix_items.size() ? &frames[d].pos
                                                                                                 : nullptr;
      if (!count) continue;
      passed[d] = bounds_passed(*count, node, string ? lookahead.characters : lookahead.items);
      if (passed[d]) *count = 0;
    }
    return std::string(reinterpret_cast<const char*>(frames.data()), frames.size() * sizeof(Frame)) + passed;
  }

  bool in_plain_string(const Stack& state, size_t bytes) const {
    const Frame& top = state.frames[state.depth - 1];
    const Node& node = g_.nodes[top.node];
    return state.depth > 1 && node.kind == Kind::String && top.phase == kStringBody &&
           node.max_count - top.count >= bytes &&
           (node.pattern == kNone || g_.patterns[node.pattern].automaton().universal(pattern_state(top)));
  }

  bool may_end(const Frame& frame) const {
    switch (g_.nodes[frame.node].kind) {
      case Kind::Number:
      case Kind::Integer:
        return (frame.phase == kNumberZero || frame.phase == kNumberInt || frame.phase == kNumberFrac ||
                frame.phase == kNumberExp) &&
               in_range(frame, g_.nodes[frame.node]);
      case Kind::Literals: return g_.literal_nodes[frame.pos].terminal >= 0;
      default: return false;
    }
  }

  Result feed(Stack& state, uint8_t b) const {
    Frame& frame = state.frames[state.depth - 1];
    if (state.depth == 1) return document(state, frame, b);
    const Node& node = g_.nodes[frame.node];
    switch (node.kind) {
      case Kind::Object: return object(state, frame, node, b);
      case Kind::Map: return map(state, frame, node, b);
      case Kind::Array: return array(state, frame, node, b);
      case Kind::String: return string(state, frame, node, b);
      case Kind::Number:
      case Kind::Integer: return number(frame, node, b);
      case Kind::Literals: return literal(state, frame, b);
      case Kind::Choice: break;  // resolved by push()
    }
    return Result::Reject;
  }

  // Whitespace in a gap between tokens: counted, up to the limit.
  Result whitespace(Frame& frame) const {
    if (frame.whitespace >= max_whitespace_) return Result::Reject;
    ++frame.whitespace;
    return Result::Accept;
  }

  // Opens a value of NODE with its first byte B.
  Result push(Stack& state, uint32_t node, uint8_t b) const {
    if (g_.nodes[node].kind == Kind::Choice) {
      uint32_t list = g_.nodes[node].by_first_byte[b];
      if (list == kNone) return Result::Reject;
      const std::vector<uint32_t>& values = g_.value_lists[list];
      if (values.size() == 1) {
        node = values.front();
      } else if (fork_.forced != kNone) {
        node = std::exchange(fork_.forced, kNone);
      } else {
        fork_.branches = &values;
        node = values.front();
      }
    }
    if (state.depth >= max_depth_ &&
        (g_.nodes[node].kind == Kind::Object || g_.nodes[node].kind == Kind::Map || g_.nodes[node].kind == Kind::Array))
      return Result::Reject;
    if (state.frames.size() <= state.depth + size_t{1}) state.frames.resize(state.depth + size_t{2});
    Frame& frame = state.frames[state.depth++];
    frame = Frame{};
    frame.node = node;
    if (g_.nodes[node].kind == Kind::Literals) frame.pos = g_.nodes[node].literals;
    return feed(state, b);
  }

  // Ends the top value and moves its parent past it.
  void close(Stack& state) const {
    --state.depth;
    Frame& parent = state.frames[state.depth - 1];
    if (state.depth == 1) {
      parent.phase = kDocAfter;
      return;
    }
    const Node& node = g_.nodes[parent.node];
    if (node.kind == Kind::Object) {
      parent.seen |= uint64_t{1} << parent.aux;
      parent.phase = kAfter;
    } else if (node.kind == Kind::Map) {
      parent.phase = parent.phase == kKey ? kColon : kAfter;
    } else {  // an array
      ++parent.pos;
      parent.phase = kAfter;
    }
  }

  // A value that ends at its last byte (a string's quote, a bracket): closes it at once.
  Result finish(Stack& state) const {
    close(state);
    return Result::Accept;
  }

  Result document(Stack& state, Frame& frame, uint8_t b) const {
    if (is_whitespace(b)) return frame.phase == kDocValue ? Result::Reject : whitespace(frame);
    if (frame.phase != kDocBefore) return Result::Reject;
    frame.whitespace = 0;
    frame.phase = kDocValue;
    return push(state, g_.root, b);
  }

  Result open(Frame& frame, uint8_t bracket, uint8_t b) const {
    if (b != bracket) return Result::Reject;
    frame.phase = kContainerStart;
    return Result::Accept;
  }

  Result object(Stack& state, Frame& frame, const Node& node, uint8_t b) const {
    if (frame.phase == kKey) return key(frame, b);
    if (frame.phase == kOpen) return open(frame, '{', b);
    if (is_whitespace(b)) return whitespace(frame);
    frame.whitespace = 0;
    uint64_t all = node.properties.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << node.properties.size()) - 1;
    bool unseen = (frame.seen & all) != all;
    switch (frame.phase) {
      case kContainerStart:
      case kNext:
        if (b == '"' && unseen) {
          frame.phase = kKey;
          frame.pos = node.literals;
          return key(frame, b);
        }
        if (b == '}' && frame.phase == kContainerStart && (node.required & ~frame.seen) == 0) return finish(state);
        return Result::Reject;
      case kColon:
        if (b != ':') return Result::Reject;
        frame.phase = kValue;
        return Result::Accept;
      case kValue: return push(state, node.properties[frame.aux].value, b);
      case kAfter:
        if (b == ',' && unseen) {
          frame.phase = kNext;
          return Result::Accept;
        }
        if (b == '}' && (node.required & ~frame.seen) == 0) return finish(state);
        return Result::Reject;
      default: return Result::Reject;
    }
  }

  // One byte of a declared key (its quotes included), among the properties not read yet.
  Result key(Frame& frame, uint8_t b) const {
    for (const auto& [byte, child] : g_.literal_nodes[frame.pos].children) {
      if (byte != b || (g_.literal_nodes[child].properties & ~frame.seen) == 0) continue;
      frame.pos = child;
      int32_t terminal = g_.literal_nodes[child].terminal;
      if (terminal >= 0 && !(frame.seen >> terminal & 1)) {
        frame.aux = static_cast<uint8_t>(terminal);
        frame.phase = kColon;
      }
      return Result::Accept;
    }
    return Result::Reject;
  }

  Result map(Stack& state, Frame& frame, const Node& node, uint8_t b) const {
    if (frame.phase == kOpen) return open(frame, '{', b);
    if (is_whitespace(b)) return whitespace(frame);
    frame.whitespace = 0;
    switch (frame.phase) {
      case kContainerStart:
      case kNext:
        if (b == '"') {
          frame.phase = kKey;
          return push(state, g_.string_node, b);
        }
        if (b == '}' && frame.phase == kContainerStart) return finish(state);
        return Result::Reject;
      case kColon:
        if (b != ':') return Result::Reject;
        frame.phase = kValue;
        return Result::Accept;
      case kValue: return push(state, node.item, b);
      case kAfter:
        if (b == ',') {
          frame.phase = kNext;
          return Result::Accept;
        }
        return b == '}' ? finish(state) : Result::Reject;
      default: return Result::Reject;
    }
  }

  Result array(Stack& state, Frame& frame, const Node& node, uint8_t b) const {
    if (frame.phase == kOpen) return open(frame, '[', b);
    if (is_whitespace(b)) return whitespace(frame);
    frame.whitespace = 0;
    switch (frame.phase) {
      case kContainerStart:
      case kNext:
        if (b == ']' && frame.phase == kContainerStart && node.min_count == 0) return finish(state);
        if (frame.pos >= node.max_count) return Result::Reject;
        frame.phase = kValue;
        return push(state, frame.pos < node.prefix_items.size() ? node.prefix_items[frame.pos] : node.item, b);
      case kAfter:
        if (b == ',' && frame.pos < node.max_count) {
          frame.phase = kNext;
          return Result::Accept;
        }
        if (b == ']' && frame.pos >= node.min_count) return finish(state);
        return Result::Reject;
      default: return Result::Reject;
    }
  }

  Result string(Stack& state, Frame& frame, const Node& node, uint8_t b) const {
    bool patterned = node.pattern != kNone;
    switch (frame.phase) {
      case kStringOpen:
        if (b != '"') return Result::Reject;
        frame.phase = kStringBody;
        return Result::Accept;
      case kStringBody: {
        if (b == '"')
          return frame.count >= node.min_count && pattern_accepts(frame, node) ? finish(state) : Result::Reject;
        if (b != '\\' && (b < 0x20 || utf8_length(b) == 0)) return Result::Reject;
        // A character begins (an escape, or a UTF-8 character of one or more bytes): counted once, here.
        if (frame.count >= node.max_count) return Result::Reject;
        if (frame.count < node.min_count || node.max_count != UINT32_MAX) ++frame.count;
        if (b == '\\') {
          frame.phase = kStringEscape;
          return may_take(frame, node, 0, 0xFFFF);  // \u writes any character below U+10000
        }
        int length = utf8_length(b);
        if (length == 1) return take(frame, node, b);
        frame.phase = kStringUtf8;
        frame.aux = static_cast<uint8_t>(length - 1);
        frame.range = b;
        if (!patterned) return Result::Accept;
        frame.pos = b & (0x3Fu >> (length - 1));
        auto [first, last] = completions(frame.pos, 6 * frame.aux);
        constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};  // no overlong forms
        return may_take(frame, node, std::max(first, kLeast[length]), std::min<uint32_t>(last, 0x10FFFF));
      }
      case kStringEscape: {
        if (b == 'u') {
          frame.phase = kStringHex;
          frame.aux = 0;
          return Result::Accept;
        }
        size_t escape = std::string_view("\"\\/bfnrt").find(static_cast<char>(b));
        if (escape == std::string_view::npos) return Result::Reject;
        frame.phase = kStringBody;
        return take(frame, node, static_cast<uint8_t>("\"\\/\b\f\n\r\t"[escape]));
      }
      case kStringHex: {
        int value = hex_value(b);
        if (value < 0) return Result::Reject;
        // No surrogates (\uD800..\uDFFF): a lone one is invalid, and characters past U+FFFF come as UTF-8.
        if (frame.aux == 1 && frame.pos == 0xD && value >= 8) return Result::Reject;
        if (frame.aux == 0 || patterned) frame.pos = frame.pos * 16 + static_cast<uint32_t>(value);
        if (++frame.aux < 4) {
          auto [first, last] = completions(frame.pos, 4 * (4 - frame.aux));
          return may_take(frame, node, first, last);
        }
        frame.phase = kStringBody;
        return take(frame, node, std::exchange(frame.pos, 0));
      }
      case kStringUtf8: {
        auto [low, high] = frame.range ? second_byte_range(frame.range) : std::pair<uint8_t, uint8_t>{0x80, 0xBF};
        if (b < low || b > high) return Result::Reject;
        frame.range = 0;
        if (patterned) frame.pos = frame.pos << 6 | (b & 0x3Fu);
        if (--frame.aux > 0) {
          auto [first, last] = completions(frame.pos, 6 * frame.aux);
          return may_take(frame, node, first, last);
        }
        frame.phase = kStringBody;
        return take(frame, node, std::exchange(frame.pos, 0));
      }
      default: return Result::Reject;
    }
  }

  // ---- a string's pattern
  // Its automaton takes the string's decoded characters. A byte is refused unless some character it may begin (or
  // go on) leads the pattern to a state from which a match can still end within the string's lengths: the model can
  // never write itself into a dead end.

  // The code points whose first bits are BITS, FREE_BITS more to come.
  static std::pair<uint32_t, uint32_t> completions(uint32_t bits, int free_bits) {
    return {bits << free_bits, (bits << free_bits) | ((uint32_t{1} << free_bits) - 1)};
  }

  bool pattern_accepts(const Frame& frame, const Node& node) const {
    return node.pattern == kNone || g_.patterns[node.pattern].automaton().accepting(pattern_state(frame));
  }

  // Whether some character in [FIRST, LAST] may come next.
  Result may_take(const Frame& frame, const Node& node, uint32_t first, uint32_t last) const {
    if (node.pattern == kNone) return Result::Accept;
    const StringPattern& pattern = g_.patterns[node.pattern];
    for (const RegexAutomaton::Transition& t : pattern.automaton().transitions(pattern_state(frame)))
      if (t.first <= last && first <= t.last && pattern.completable(t.target, frame.count)) return Result::Accept;
    return Result::Reject;
  }

  // The pattern past the string's next character, CODE_POINT.
  Result take(Frame& frame, const Node& node, uint32_t code_point) const {
    if (node.pattern == kNone) return Result::Accept;
    const StringPattern& pattern = g_.patterns[node.pattern];
    uint32_t next = pattern.automaton().next(pattern_state(frame), code_point);
    if (next == RegexAutomaton::kRefused || !pattern.completable(next, frame.count)) return Result::Reject;
    frame.seen = next;
    return Result::Accept;
  }

  static uint32_t pattern_state(const Frame& frame) { return static_cast<uint32_t>(frame.seen); }

  Result number(Frame& frame, const Node& node, uint8_t b) const {
    Phase next = next_number_phase(frame.phase, node, b);
    bool ok = next != kNumberStart;
    // A byte after which the number cannot end yet ('-', '.', 'e', an exponent's sign) needs room for a digit.
    bool ends_after = next == kNumberZero || next == kNumberInt || next == kNumberFrac || next == kNumberExp;
    Frame after = ok ? number_after(frame, node, b, next) : frame;
    // A byte that no value within the bounds begins with is refused where it comes: no dead end later.
    ok = ok && reachable(after, node);
    if (!ok || frame.pos + (ends_after ? 1 : 2) > kMaxNumberLength)
      return may_end(frame) ? Result::EndRetry : Result::Reject;
    frame = after;
    return Result::Accept;
  }

  Result literal(Stack& state, Frame& frame, uint8_t b) const {
    const LiteralNode& at = g_.literal_nodes[frame.pos];
    for (const auto& [byte, child] : at.children) {
      if (byte != b) continue;
      frame.pos = child;
      const LiteralNode& next = g_.literal_nodes[child];
      return next.terminal >= 0 && next.children.empty() ? finish(state) : Result::Accept;
    }
    return at.terminal >= 0 ? Result::EndRetry : Result::Reject;
  }

  const JsonGrammar::Impl& g_;
  uint32_t max_whitespace_;
  uint32_t max_depth_;  // frames, the document's included
};

}  // namespace

// ---- JsonMatcher -----------------------------------------------------------------------------------

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> grammar, const JsonConstraintOptions& options)
    : grammar_(std::move(grammar)), options_(options), state_(std::make_unique<State>()) {
  Automaton(grammar_->impl(), options_).start(*state_);
}
JsonMatcher::~JsonMatcher() = default;
JsonMatcher::JsonMatcher(JsonMatcher&&) noexcept = default;
JsonMatcher::JsonMatcher(const JsonMatcher& other)
    : grammar_(other.grammar_), options_(other.options_), state_(std::make_unique<State>(*other.state_)),
      dead_(other.dead_) {}

bool JsonMatcher::feed(std::string_view bytes) {
  Automaton automaton(grammar_->impl(), options_);
  State next;
  for (char c : bytes) {
    if (dead_) break;
    dead_ = !automaton.step(*state_, static_cast<uint8_t>(c), next);
    std::swap(*state_, next);
    state_->sort();
  }
  return !dead_;
}

bool JsonMatcher::complete() const { return !dead_ && Automaton(grammar_->impl(), options_).complete(*state_); }

// ---- the token constraint ----------------------------------------------------------------------------

namespace {

// The ids one automaton state allows: a list when few, else a bitset.
struct CachedMask {
  std::vector<int32_t> ids;
  std::vector<uint64_t> bits;
};

}  // namespace

// The masks of a grammar's states for one vocabulary, end ids and options, by state key (Automaton::mask_key);
// thread-safe: the constraints of concurrent requests with one schema share it.
class JsonMaskTable {
 public:
  explicit JsonMaskTable(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}

  std::shared_ptr<const CachedMask> find(const std::string& key) const {
    std::lock_guard lock(mutex_);
    auto it = masks_.find(key);
    return it == masks_.end() ? nullptr : it->second;
  }
  void add(std::string key, std::shared_ptr<const CachedMask> mask) {
    std::lock_guard lock(mutex_);
    if (masks_.size() >= kMaxStates) masks_.clear();
    masks_.emplace(std::move(key), std::move(mask));
  }

 private:
  static constexpr size_t kMaxStates = 512;
  std::shared_ptr<const TokenTrie> trie_;  // kept alive: its address is part of the table's name
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const CachedMask>> masks_;
};

namespace {

// GRAMMAR's table for the vocabulary TRIE, end ids EOS and OPTIONS.
std::shared_ptr<JsonMaskTable> mask_table(const JsonGrammar& grammar, const std::shared_ptr<const TokenTrie>& trie,
                                          const std::vector<int32_t>& eos, const JsonConstraintOptions& options) {
  std::string name = fmt::format("{} {} {} {}", static_cast<const void*>(trie.get()), fmt::join(eos, ","),
                                 options.max_whitespace, options.max_depth);
  const JsonGrammar::Impl& g = grammar.impl();
  std::lock_guard lock(g.mask_tables_mutex);
  auto& table = g.mask_tables[name];
  if (!table) table = std::make_shared<JsonMaskTable>(trie);
  return table;
}

class JsonConstraint final : public TokenConstraint {
 public:
  JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 std::vector<int32_t> eos_ids, const JsonConstraintOptions& options)
      : grammar_(std::move(grammar)), trie_(std::move(trie)), eos_ids_(std::move(eos_ids)),
        automaton_(grammar_->impl(), options), counts_(options.counts),
        masks_(mask_table(*grammar_, trie_, eos_ids_, options)) {
    automaton_.start(state_);
    scratch_.resize((trie_->vocab_size() + 63) / 64);
    walk_states_.resize(trie_->max_token_length() + 1);
  }

  void mask(std::span<uint8_t> allowed) override {
    if (ended_) {
      std::fill(allowed.begin(), allowed.end(), 0);
      for (int32_t id : eos_ids_) allow(allowed, id);
      return;
    }
    apply(*current(), allowed);
  }

  // The cached mask's words as they are, two 32-bit words of `allowed` from each 64-bit one.
  void mask_bits(std::span<uint32_t> allowed, size_t ids) override {
    auto set = [&](int32_t id) {
      if (id >= 0 && static_cast<size_t>(id) < ids) allowed[id / 32] |= uint32_t{1} << (id % 32);
    };
    if (ended_) {
      std::fill(allowed.begin(), allowed.end(), 0u);
      for (int32_t id : eos_ids_) set(id);
      return;
    }
    std::shared_ptr<const CachedMask> mask = current();  // a mask of a few ids has no words: cleared, those set
    for (size_t w = 0; w < allowed.size(); ++w)
      allowed[w] &= w / 2 < mask->bits.size() ? static_cast<uint32_t>(mask->bits[w / 2] >> (32 * (w % 2))) : 0u;
    for (int32_t id : mask->ids) set(id);
  }

  void accept(int32_t id) override {
    if (ended_) fail("JSON constraint: id {} drawn after the end of the text", id);
    if (std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end()) {
      if (!automaton_.complete(state_)) fail("JSON constraint: end-of-sequence id {} before the JSON text is complete", id);
      ended_ = true;
      return;
    }
    std::string_view bytes = trie_->bytes(id);
    if (bytes.empty()) fail("JSON constraint: id {} cannot appear in JSON text (an added or unknown token)", id);
    next_.copy_from(state_);
    for (char c : bytes) {
      if (!automaton_.step(next_, static_cast<uint8_t>(c), after_))
        fail("JSON constraint: id {} ('{}') does not continue the JSON text", id, bytes);
      std::swap(next_, after_);
    }
    std::swap(state_, next_);  // only a whole id moves the text on
    state_.sort();
  }

  bool complete() const override { return ended_ || automaton_.complete(state_); }

 private:
  void allow(std::span<uint8_t> allowed, int32_t id) const {
    if (id >= 0 && static_cast<size_t>(id) < allowed.size()) allowed[id] = 1;
  }

  // The mask of the current state, computed once per state for every constraint of the grammar (masks_).
  std::shared_ptr<const CachedMask> current() {
    // A byte is at most a character; an item ends at most once per comma, and once more.
    std::string key = automaton_.mask_key(state_, {trie_->max_token_length(), trie_->max_token_commas() + 1});
    if (auto found = masks_->find(key)) {
      if (counts_) ++counts_->cached;
      return found;
    }
    auto mask = std::make_shared<const CachedMask>(compute());
    masks_->add(std::move(key), mask);
    if (counts_) ++counts_->walked;
    return mask;
  }

  CachedMask compute() {
    std::fill(scratch_.begin(), scratch_.end(), 0);
    walk_states_[0].copy_from(state_);
    walk(0, 0);
    CachedMask mask;
    if (automaton_.complete(state_))
      for (int32_t id : eos_ids_)
        if (id >= 0 && static_cast<size_t>(id) < trie_->vocab_size()) scratch_[id / 64] |= uint64_t{1} << (id % 64);
    size_t count = 0;
    for (uint64_t word : scratch_) count += std::popcount(word);
    if (count * 32 < trie_->vocab_size()) {
      for (size_t w = 0; w < scratch_.size(); ++w)
        for (uint64_t word = scratch_[w]; word; word &= word - 1)
          mask.ids.push_back(static_cast<int32_t>(w * 64 + std::countr_zero(word)));
    } else {
      mask.bits = scratch_;
    }
    for (int32_t id : eos_ids_)  // ids past the vocabulary (some models' EOS) cannot live in the bitset
      if (id >= 0 && static_cast<size_t>(id) >= trie_->vocab_size() && automaton_.complete(state_))
        mask.ids.push_back(id);
    return mask;
  }

  // Marks the tokens under trie node NODE_INDEX that the automaton, in walk_states_[DEPTH], allows.
  void walk(uint32_t node_index, size_t depth) {
    const TokenTrie::Node& node = trie_->nodes()[node_index];
    if (depth > 0 && node.plain_string && automaton_.in_plain_string(walk_states_[depth], node.longest)) {
      mark(node.tokens_begin, node.tokens_end);
      return;
    }
    mark(node.tokens_begin, node.tokens_end_here);
    for (uint32_t e = node.edges_begin; e < node.edges_end; ++e) {
      const TokenTrie::Edge& edge = trie_->edges()[e];
      if (automaton_.step(walk_states_[depth], edge.byte, walk_states_[depth + 1])) walk(edge.child, depth + 1);
    }
  }

  void mark(uint32_t begin, uint32_t end) {
    const std::vector<int32_t>& ids = trie_->sorted_ids();
    for (uint32_t i = begin; i < end; ++i) scratch_[ids[i] / 64] |= uint64_t{1} << (ids[i] % 64);
  }

  void apply(const CachedMask& mask, std::span<uint8_t> allowed) const {
    if (mask.bits.empty()) {
      std::fill(allowed.begin(), allowed.end(), 0);
      for (int32_t id : mask.ids) allow(allowed, id);
      return;
    }
    size_t size = std::min(allowed.size(), mask.bits.size() * 64);
    for (size_t w = 0; w * 64 < size; ++w) {
      uint64_t word = mask.bits[w];
      size_t end = std::min(size, w * 64 + 64);
      if (word == ~uint64_t{0}) continue;  // entries are 1 on entry
      for (size_t i = w * 64; i < end; ++i) allowed[i] &= static_cast<uint8_t>(word >> (i % 64) & 1);
    }
    std::fill(allowed.begin() + static_cast<std::ptrdiff_t>(size), allowed.end(), 0);
    for (int32_t id : mask.ids) allow(allowed, id);
  }

  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> eos_ids_;
  Automaton automaton_;
  State state_;
  State next_, after_;  // accept()'s, as an id's bytes are fed
  bool ended_ = false;
  JsonMaskCounts* counts_;
  std::shared_ptr<JsonMaskTable> masks_;
  std::vector<uint64_t> scratch_;
  std::vector<State> walk_states_;
};

}  // namespace

std::unique_ptr<TokenConstraint> make_json_constraint(std::shared_ptr<const JsonGrammar> grammar,
                                                      std::shared_ptr<const TokenTrie> vocabulary,
                                                      std::vector<int32_t> eos_ids,
                                                      const JsonConstraintOptions& options) {
  return std::make_unique<JsonConstraint>(std::move(grammar), std::move(vocabulary), std::move(eos_ids), options);
}

}  // namespace gerbil
