// Structured output: a JSON schema (or "any JSON object") compiled once per request into a pushdown
// automaton over bytes, and a TokenConstraint that steps it through the tokenizer's vocabulary.
//
//   auto grammar = JsonGrammar::from_schema(schema, "response_format.json_schema.schema");
//   auto constraint = make_json_constraint(grammar, TokenTrie::of(tokenizer), {eos_id});
//
// The vocabulary is a byte trie built once per tokenizer and shared by every request. mask() walks it
// alongside the automaton, dropping a subtree at its first byte the automaton refuses, and skipping the walk
// of subtrees whose every token is plain string text while inside a string (whose pattern, if any, takes anything
// from there on); the mask of each automaton state (a pattern's state included) is cached, so a long string or a
// repeated structure costs a copy of the mask. States that differ only in a count of characters or items that no
// token can carry to a bound share their mask, and the cache is the grammar's: the constraints of every request
// with one schema (from_schema keeps the last grammars it compiled) share their states' masks.
//
// The schema subset: "type" (object, array, string, number, integer, boolean, null, or a list of them),
// properties / required (additionalProperties false unless the object declares no properties), items,
// prefixItems (tuples: items then applies past them, false for none; without minItems the whole tuple is written),
// minItems / maxItems, minLength / maxLength (in characters: an escape or a UTF-8 character is one), pattern (on the
// decoded characters, unanchored as JSON Schema means it; regex_automaton.h lists its regular-expression subset; with
// lengths, a character is allowed only where a match of an allowed length can still follow), format on strings
// (date, time, date-time, uuid, ipv4, email, hostname as patterns of their common form, intersected with a pattern
// given beside; other formats are annotations), minimum /
// maximum / exclusiveMinimum / exclusiveMaximum on integers (within 64 bits) and numbers (then written without an
// exponent), enum, const, anyOf and lists of types (branches that begin alike, such as two objects, are followed
// side by side until the text rules all but one out; at most 256 may begin with one byte), oneOf whose branches
// cannot match one value (constants that differ as JSON values, branches that begin with different bytes, or objects
// told apart by a required property's const or enum values: a discriminator, as Pydantic writes tagged unions),
// keywords beside anyOf / oneOf (merged into each branch, as allOf merges), $ref into the same document (recursion
// included), allOf whose schemas merge into one (properties and required names together, a property both give valid
// against both, types intersected; a $ref with annotations stays a reference), and the annotations (title,
// description, default, examples, ...).
// Keywords that would change validity and are not supported (multipleOf, not, ...), and lengths, patterns or bounds
// where no "type" says which values they narrow, are errors naming their schema path. Strings must be valid UTF-8,
// \u escapes other than surrogates; runs of whitespace between tokens are limited so a model cannot loop on them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "generate/constraint.h"
#include "tokenizer/tokenizer.h"

namespace gerbil {

// The vocabulary as a trie over the bytes of its tokens (Tokenizer::token_bytes). Added and special tokens
// are left out: they never appear inside JSON.
class TokenTrie {
 public:
  explicit TokenTrie(const Tokenizer& tokenizer);
  // The trie of the tokenizer loaded from tokenizer.source(), built on first use and kept for the process.
  static std::shared_ptr<const TokenTrie> of(const Tokenizer& tokenizer);

  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  struct Node {
    uint32_t edges_begin = 0, edges_end = 0;  // into edges()
    // The tokens of the subtree, in sorted_ids(): those ending here first, then the children's.
    uint32_t tokens_begin = 0, tokens_end_here = 0, tokens_end = 0;
    // Whether every token of the subtree, from this node on, is plain string text: whole or starting UTF-8
    // characters with no '"', '\' or control byte. Inside a string with room for it (for `longest` more
    // characters), such a subtree is allowed whole.
    bool plain_string = false;
    uint32_t longest = 0;  // the most bytes a token of the subtree has past this node
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<int32_t>& sorted_ids() const { return sorted_ids_; }
  // The bytes of id; empty for ids outside the trie.
  std::string_view bytes(int32_t id) const;
  size_t vocab_size() const { return bytes_.size(); }
  size_t max_token_length() const { return max_token_length_; }
  size_t max_token_commas() const { return max_token_commas_; }  // the most ',' bytes one token holds

 private:
  uint32_t build(std::span<const int32_t> ids, size_t depth);
  std::vector<std::string> bytes_;  // per id
  std::vector<int32_t> sorted_ids_;
  std::vector<Node> nodes_;  // nodes_[0] is the root
  std::vector<Edge> edges_;
  size_t max_token_length_ = 0;
  size_t max_token_commas_ = 0;
};

// How a constraint's masks were made: by walking the vocabulary, or taken from the cache of its states' masks.
struct JsonMaskCounts {
  size_t walked = 0, cached = 0;
};

struct JsonConstraintOptions {
  uint32_t max_whitespace = 16;  // the longest run of whitespace between two tokens of the JSON text
  uint32_t max_depth = 32;       // nesting of objects and arrays (bounds free-form and recursive schemas)
  JsonMaskCounts* counts = nullptr;  // where given, counts the masks the constraint makes (tests, benchmarks)
};

// A compiled schema. Immutable: one may serve many constraints at once.
class JsonGrammar {
 public:
  // Throws gerbil::Error naming the offending keyword as PATH.keyword... (e.g.
  // "response_format.json_schema.schema.properties.age.type"). The same schema and path again give the same
  // grammar while it is among the last 16 compiled.
  static std::shared_ptr<const JsonGrammar> from_schema(const nlohmann::json& schema, const std::string& path);
  // {"type": "json_object"}: any JSON object.
  static std::shared_ptr<const JsonGrammar> any_object();

  struct Impl;
  explicit JsonGrammar(std::unique_ptr<Impl> impl);
  ~JsonGrammar();
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// SCHEMA made a document of its own (given an "$id" where it has none), to be placed inside another schema: its
// "#..." references keep pointing into it (a tool's parameters inside the schema of a whole call).
nlohmann::json embeddable_schema(nlohmann::json schema);

// Steps the grammar's automaton over bytes: for tests and tools that check text against a grammar.
class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> grammar, const JsonConstraintOptions& options = {});
  ~JsonMatcher();
  JsonMatcher(const JsonMatcher& other);
  JsonMatcher(JsonMatcher&&) noexcept;
  // Whether BYTES continue a valid prefix; on false the matcher is dead (every later feed fails).
  bool feed(std::string_view bytes);
  // Whether the bytes so far are a whole value (trailing whitespace allowed).
  bool complete() const;

  struct State;

 private:
  std::shared_ptr<const JsonGrammar> grammar_;
  JsonConstraintOptions options_;
  std::unique_ptr<State> state_;
  bool dead_ = false;
};

// The constraint of one request: the JSON text must match GRAMMAR; the ids in EOS are allowed once the text
// is complete (and then only they and a limited run of whitespace).
std::unique_ptr<TokenConstraint> make_json_constraint(std::shared_ptr<const JsonGrammar> grammar,
                                                      std::shared_ptr<const TokenTrie> vocabulary,
                                                      std::vector<int32_t> eos_ids,
                                                      const JsonConstraintOptions& options = {});

}  // namespace gerbil
