#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "gerbil/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_field.h"
#include "tokenizer/pattern.h"
#include "tokenizer/utf8.h"

namespace gerbil::tok {

namespace {

using Piece = PreTokens::Piece;

// What Split does with the pattern's matches (HF's SplitDelimiterBehavior).
enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const JsonField& field) {
  std::string name = field.string();
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  field.fail(fmt::format("unknown split behavior '{}'", name));
}

// Groups the pieces of the cut `parent` as `behavior` says and appends the non-empty groups to `out`.
// Only a group that starts where the parent starts keeps its at_start.
void apply_behavior(std::vector<PatternPiece>& cut, Behavior behavior, const Piece& parent,
                    std::vector<Piece>& out) {
  std::vector<PatternPiece> grouped;
  grouped.reserve(cut.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::Removed:
      for (const PatternPiece& p : cut)
        if (!p.is_match) grouped.push_back(p);
      break;
    case Behavior::Isolated:
      grouped = cut;
      break;
    case Behavior::Contiguous:
      for (const PatternPiece& p : cut) {
        if (p.is_match == previous_match && !grouped.empty())
          grouped.back().end = p.end;
        else
          grouped.push_back(p);
        previous_match = p.is_match;
      }
      break;
    case Behavior::MergedWithPrevious:
      for (const PatternPiece& p : cut) {
        if (p.is_match && !previous_match && !grouped.empty())
          grouped.back().end = p.end;
        else
          grouped.push_back(p);
        previous_match = p.is_match;
      }
      break;
    case Behavior::MergedWithNext:
      for (auto it = cut.rbegin(); it != cut.rend(); ++it) {
        if (it->is_match && !previous_match && !grouped.empty())
          grouped.back().begin = it->begin;
        else
          grouped.push_back(*it);
        previous_match = it->is_match;
      }
      std::reverse(grouped.begin(), grouped.end());
      break;
  }
  for (const PatternPiece& p : grouped)
    if (p.end > p.begin)
      out.push_back({static_cast<uint32_t>(parent.begin + p.begin),
                     static_cast<uint32_t>(parent.begin + p.end), parent.at_start && p.begin == 0});
}

// Cuts every piece with `pattern` (matches and gaps swapped when `invert`), in place.
void split_pieces(PreTokens& tokens, const Pattern& pattern, Behavior behavior, bool invert) {
  std::vector<Piece> out;
  out.reserve(tokens.pieces.size() * 2);
  std::vector<PatternPiece> cut;
  for (const Piece& piece : tokens.pieces) {
    pattern.cut(tokens.view(piece), cut);
    if (invert)
      for (PatternPiece& p : cut) p.is_match = !p.is_match;
    apply_behavior(cut, behavior, piece, out);
  }
  tokens.pieces = std::move(out);
}

class Split final : public PreTokenizer {
 public:
  Split(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(PreTokens& tokens) const override { split_pieces(tokens, pattern_, behavior_, invert_); }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

// Rewrites every piece into a new text: `rewrite(piece_text, piece, out)` appends its new form to out.
template <typename Rewrite>
void rewrite_pieces(PreTokens& tokens, Rewrite&& rewrite) {
  std::string text;
  text.reserve(tokens.text.size() * 2);
  for (Piece& piece : tokens.pieces) {
    uint32_t begin = static_cast<uint32_t>(text.size());
    rewrite(tokens.view(piece), piece, text);
    piece.begin = begin;
    piece.end = static_cast<uint32_t>(text.size());
  }
  tokens.text = std::move(text);
}

const Pattern& gpt2_pattern() {
  static const Pattern pattern =
      Pattern::regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  return pattern;
}

// GPT-2's byte-level pre-tokenizer: optionally a leading space, optionally GPT-2's split regex, and
// then every byte shown in the byte-level alphabet.
class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}

  void pre_tokenize(PreTokens& tokens) const override {
    if (add_prefix_space_)
      rewrite_pieces(tokens, [](std::string_view piece, const Piece&, std::string& out) {
        if (piece.empty() || piece[0] != ' ') out += ' ';
        out += piece;
      });
    if (use_regex_) split_pieces(tokens, gpt2_pattern(), Behavior::Isolated, false);
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    rewrite_pieces(
        tokens, [&](std::string_view piece, const Piece&, std::string& out) { alphabet.encode(piece, out); });
  }

 private:
  bool add_prefix_space_, use_regex_;
};

// SentencePiece-style: spaces become the replacement ('▁'), one is prepended as the scheme says,
// and the text is cut before every replacement character.
class Metaspace final : public PreTokenizer {
 public:
  explicit Metaspace(MetaspaceOptions options)
      : options_(std::move(options)), split_pattern_(Pattern::literal(options_.replacement)) {}

  void pre_tokenize(PreTokens& tokens) const override {
    using Prepend = MetaspaceOptions::Prepend;
    const std::string& replacement = options_.replacement;
    rewrite_pieces(tokens, [&](std::string_view piece, const Piece& info, std::string& out) {
      bool starts_with_replacement = piece.starts_with(' ') || piece.starts_with(replacement);
      bool prepend =
          options_.prepend == Prepend::Always || (options_.prepend == Prepend::First && info.at_start);
      if (prepend && !starts_with_replacement) out += replacement;
      for (char c : piece)
        if (c == ' ')
          out += replacement;
        else
          out += c;
    });
    if (options_.split) split_pieces(tokens, split_pattern_, Behavior::MergedWithNext, false);
  }

 private:
  MetaspaceOptions options_;
  Pattern split_pattern_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(PreTokens& tokens) const override {
    for (const auto& step : steps_) step->pre_tokenize(tokens);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

MetaspaceOptions parse_metaspace(const JsonField& field) {
  using Prepend = MetaspaceOptions::Prepend;
  MetaspaceOptions options;
  options.replacement = field["replacement"].string();
  if (options.replacement.empty() || utf8_sequence(options.replacement, 0) != options.replacement.size())
    field["replacement"].fail("expected a single character");
  if (auto scheme = field.find("prepend_scheme")) {
    std::string name = scheme->string();
    if (name == "always")
      options.prepend = Prepend::Always;
    else if (name == "first")
      options.prepend = Prepend::First;
    else if (name == "never")
      options.prepend = Prepend::Never;
    else
      scheme->fail(fmt::format("unknown prepend_scheme '{}'", name));
  } else if (!field.boolean_or("add_prefix_space", true)) {
    options.prepend = Prepend::Never;  // the legacy spelling of prepend_scheme "never"
  }
  options.split = field.boolean_or("split", true);
  return options;
}

std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevel>(add_prefix_space, use_regex);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonField& field) {
  if (field.is_null()) return nullptr;
  std::string type = field.type();
  if (type == "Split")
    return std::make_unique<Split>(Pattern::from_json(field["pattern"]), parse_behavior(field["behavior"]),
                                   field.boolean_or("invert", false));
  if (type == "ByteLevel")
    return make_byte_level_pre_tokenizer(field.boolean_or("add_prefix_space", true),
                                         field.boolean_or("use_regex", true));
  if (type == "Metaspace") return std::make_unique<Metaspace>(parse_metaspace(field));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const JsonField& step : field["pretokenizers"].elements())
      if (auto pre_tokenizer = make_pre_tokenizer(step)) steps.push_back(std::move(pre_tokenizer));
    return std::make_unique<Sequence>(std::move(steps));
  }
  field["type"].fail(fmt::format("unsupported pre_tokenizer type '{}'", type));
}

}  // namespace gerbil::tok
