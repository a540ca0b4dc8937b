#include "tokenizer/decoder.h"

#include <algorithm>

#include "gerbil/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_field.h"
#include "tokenizer/pattern.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace gerbil::tok {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string join(const std::vector<std::string>& tokens) {
  std::string out;
  for (const std::string& token : tokens) out += token;
  return out;
}

// Code points of a UTF-8 string.
std::u32string code_points(std::string_view text) {
  std::u32string out;
  size_t pos = 0;
  while (pos < text.size()) out.push_back(next_code_point(text, pos));
  return out;
}

// Maps every token back from the byte-level alphabet (a token with a character outside it keeps
// its own bytes) and fuses everything into one string, invalid UTF-8 shown as U+FFFD.
class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) bytes += decode_bytes(token);
    tokens.assign(1, utf8_lossy(bytes));
  }
  void token_bytes(std::string& token) const override { token = decode_bytes(token); }

 private:
  // The bytes of one token's alphabet characters, or the token itself when a character is outside it.
  static std::string decode_bytes(const std::string& token) {
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    std::string bytes;
    size_t pos = 0;
    while (pos < token.size()) {
      int byte = alphabet.decode(next_code_point(token, pos));
      if (byte < 0) return token;
      bytes.push_back(static_cast<char>(byte));
    }
    return bytes;
  }
};

class Replace final : public Decoder {
 public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = pattern_.replace(token, content_);
  }
  void token_bytes(std::string& token) const override { token = pattern_.replace(token, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

// Turns each run of <0xNN> tokens into its bytes when they are valid UTF-8, else into one U+FFFD
// per byte.
class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    size_t run_length = 0;
    auto flush = [&] {
      if (run_length == 0) return;
      if (find_invalid_utf8(run) == npos) {
        out.push_back(run);
      } else {
        for (size_t i = 0; i < run_length; ++i) out.emplace_back(kReplacementChar);
      }
      run.clear();
      run_length = 0;
    };
    for (std::string& token : tokens) {
      int byte = byte_token_value(token);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        ++run_length;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }
  bool joins_byte_tokens() const override { return true; }
  void token_bytes(std::string& token) const override {
    int byte = byte_token_value(token);
    if (byte >= 0) token.assign(1, static_cast<char>(byte));
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override { tokens.assign(1, join(tokens)); }
};

// Removes up to `start` leading and `stop` trailing `content` characters from every token. Every
// tokenizer.json seen puts it after Fuse, where it trims the text's ends only: token_bytes() leaves it out.
class Strip final : public Decoder {
 public:
  Strip(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::u32string chars = code_points(token);
      size_t begin = 0, end = chars.size();
      while (begin < std::min(start_, chars.size()) && chars[begin] == content_) ++begin;
      while (chars.size() - end < stop_ && end > begin && chars[end - 1] == content_) --end;
      std::string stripped;
      for (size_t i = begin; i < end; ++i) append_utf8(stripped, chars[i]);
      token = std::move(stripped);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

// SentencePiece's '▁' back to spaces; in the first token (unless nothing was prepended) '▁' is
// dropped instead, as HF does.
class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool prepended)
      : replacement_(std::move(replacement)), prepended_(prepended) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      std::string_view token = tokens[i];
      for (size_t pos = 0; pos < token.size();) {
        if (token.substr(pos).starts_with(replacement_)) {
          if (i != 0 || !prepended_) out += ' ';
          pos += replacement_.size();
        } else {
          out += token[pos++];
        }
      }
      tokens[i] = std::move(out);
    }
  }
  void token_bytes(std::string& token) const override {  // past the first token '▁' is always a space
    std::string out;
    for (size_t pos = 0; pos < token.size();) {
      bool space = std::string_view(token).substr(pos).starts_with(replacement_);
      out += space ? ' ' : token[pos];
      pos += space ? replacement_.size() : 1;
    }
    token = std::move(out);
  }

 private:
  std::string replacement_;
  bool prepended_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }
  bool joins_byte_tokens() const override {
    return std::any_of(steps_.begin(), steps_.end(),
                       [](const auto& step) { return step->joins_byte_tokens(); });
  }
  void token_bytes(std::string& token) const override {
    for (const auto& step : steps_) step->token_bytes(token);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// A string field that must hold exactly one character.
char32_t single_char(const JsonField& field) {
  std::string text = field.string();
  if (text.empty() || utf8_sequence(text, 0) != text.size()) field.fail("expected a single character");
  size_t pos = 0;
  return next_code_point(text, pos);
}

size_t count(const JsonField& field) {
  int64_t value = field.integer();
  if (value < 0) field.fail("expected a count >= 0");
  return static_cast<size_t>(value);
}

}  // namespace

int byte_token_value(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return -1;
  int high = hex_digit(token[3]), low = hex_digit(token[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

std::unique_ptr<Decoder> make_byte_level_decoder() { return std::make_unique<ByteLevel>(); }

std::unique_ptr<Decoder> make_decoder(const JsonField& field) {
  if (field.is_null()) return nullptr;
  std::string type = field.type();
  if (type == "ByteLevel") return make_byte_level_decoder();
  if (type == "Replace")
    return std::make_unique<Replace>(Pattern::from_json(field["pattern"]), field["content"].string());
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip")
    return std::make_unique<Strip>(single_char(field["content"]), count(field["start"]),
                                   count(field["stop"]));
  if (type == "Metaspace") {
    MetaspaceOptions options = parse_metaspace(field);
    return std::make_unique<Metaspace>(options.replacement,
                                       options.prepend != MetaspaceOptions::Prepend::Never);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const JsonField& step : field["decoders"].elements())
      if (auto decoder = make_decoder(step)) steps.push_back(std::move(decoder));
    return std::make_unique<Sequence>(std::move(steps));
  }
  field["type"].fail(fmt::format("unsupported decoder type '{}'", type));
}

}  // namespace gerbil::tok
