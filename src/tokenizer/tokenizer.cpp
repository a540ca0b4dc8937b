// The encode and decode pipelines of HF tokenizers:
//   encode: added tokens -> normalizer -> added tokens (normalized form) -> pre-tokenizer -> BPE
//           -> post-processor (only with add_special_tokens)
//   decode: ids -> vocabulary strings -> decoder chain
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "gerbil/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace gerbil {

void Tokenizer::Impl::index_tokens() {
  size_t size = 0;
  model->vocab().for_each(
      [&](std::string_view, int32_t id) { size = std::max(size, static_cast<size_t>(id) + 1); });
  for (const tok::AddedToken& token : added.tokens())
    size = std::max(size, static_cast<size_t>(token.id) + 1);
  texts.assign(size, {});
  kinds.assign(size, Kind::None);
  model->vocab().for_each([&](std::string_view token, int32_t id) {
    texts[id] = token;
    kinds[id] = Kind::Model;
  });
  for (size_t i = 0; i < added.tokens().size(); ++i) {
    const tok::AddedToken& token = added.tokens()[i];
    texts[token.id] = added.decode_text(i);
    kinds[token.id] = token.special ? Kind::Special : Kind::Added;
    added_ids.insert_or_assign(token.content, token.id);
  }
}

namespace {

// Tokenizes one stretch of text between raw-matched added tokens.
void encode_segment(const Tokenizer::Impl& impl, std::string_view raw, bool at_start,
                    std::vector<int32_t>& ids, tok::BpeState& state) {
  std::string normalized(raw);
  if (impl.normalizer) impl.normalizer->normalize(normalized);
  std::vector<tok::Segment> parts;
  impl.added.split_normalized(normalized, parts);
  tok::PreTokens tokens;
  for (const tok::Segment& part : parts) {
    if (part.id >= 0) {
      ids.push_back(part.id);
      continue;
    }
    tokens.text.assign(normalized, part.begin, part.end - part.begin);
    tokens.pieces.assign(1, {0, static_cast<uint32_t>(tokens.text.size()), at_start && part.begin == 0});
    if (impl.pre_tokenizer) impl.pre_tokenizer->pre_tokenize(tokens);
    for (const tok::PreTokens::Piece& piece : tokens.pieces)
      impl.model->tokenize(tokens.view(piece), ids, state);
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  tok::check_utf8(text, "text to encode");
  // Pieces hold 32-bit offsets into the text, which normalizing and byte-level mapping can grow.
  constexpr size_t kMaxBytes = size_t{1} << 30;
  if (text.size() > kMaxBytes)
    fail("text to encode is too long: {} bytes (at most {})", text.size(), kMaxBytes);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  tok::BpeState state;
  std::vector<tok::Segment> segments;
  impl_->added.split_raw(text, segments);
  for (const tok::Segment& segment : segments) {
    if (segment.id >= 0)
      ids.push_back(segment.id);
    else
      encode_segment(*impl_, text.substr(segment.begin, segment.end - segment.begin), segment.begin == 0, ids,
                     state);
  }
  if (add_special_tokens && impl_->post_processor) impl_->post_processor->process(ids);
  return ids;
}

namespace {

bool has_token(const Tokenizer::Impl& impl, int32_t id) {
  return id >= 0 && static_cast<size_t>(id) < impl.kinds.size() && impl.kinds[id] != Tokenizer::Impl::Kind::None;
}

// transformers' ids are unsigned (the tokenizers library takes u32; a negative id fails its conversion).
void check_not_negative(int32_t id, size_t position) {
  if (id < 0) fail("cannot decode token id {} at position {}: token ids are not negative", id, position);
}

}  // namespace

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    check_not_negative(id, i);
    // Like the tokenizers library behind transformers: an id without a token (a padded vocabulary's tail, a
    // hole in the ids) decodes to nothing.
    if (!has_token(*impl_, id)) continue;
    if (skip_special_tokens && impl_->kinds[id] == Impl::Kind::Special) continue;
    tokens.push_back(impl_->texts[id]);
  }
  std::string text;
  if (impl_->decoder) {
    impl_->decoder->decode_chain(tokens);
    for (const std::string& token : tokens) text += token;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  }
  return text;
}

size_t Tokenizer::vocab_size() const { return impl_->kinds.size(); }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (const int32_t* id = impl_->added_ids.find(token)) return *id;
  if (const int32_t* id = impl_->model->vocab().find(token)) return *id;
  return std::nullopt;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (!has_token(*impl_, id))
    fail("token id {} is not in the vocabulary of {} (size {})", id, impl_->source.string(), vocab_size());
  return impl_->texts[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->kinds.size() && impl_->kinds[id] == Impl::Kind::Special;
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->kinds.size() &&
         (impl_->kinds[id] == Impl::Kind::Added || impl_->kinds[id] == Impl::Kind::Special);
}

std::string Tokenizer::token_bytes(int32_t id) const {
  std::string bytes(token_text(id));
  if (is_added(id)) return decode(std::span(&id, 1));
  if (impl_->decoder) impl_->decoder->token_bytes(bytes);
  return bytes;
}

const std::filesystem::path& Tokenizer::source() const { return impl_->source; }

// ---- StreamDecoder ---------------------------------------------------------------------------

StreamDecoder::StreamDecoder(Tokenizer tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {}

std::string StreamDecoder::decode_window() const { return tokenizer_.decode(window_, skip_special_tokens_); }

std::string StreamDecoder::step(int32_t id) {
  check_not_negative(id, window_.size());
  if (!has_token(*tokenizer_.impl_, id)) return {};  // decodes to nothing, as in decode()
  window_.push_back(id);
  std::string text = decode_window();
  // Hold back while the text ends inside a character (decoders show that as U+FFFD) or inside a
  // run of byte-fallback tokens, which ByteFallback decodes as a whole.
  if (text.size() <= emitted_.size() || text.ends_with(tok::kReplacementChar)) return {};
  if (tokenizer_.impl_->decoder && tokenizer_.impl_->decoder->joins_byte_tokens()) {
    auto visible = std::find_if(window_.rbegin(), window_.rend(), [&](int32_t i) {
      return !skip_special_tokens_ || !tokenizer_.is_special(i);
    });
    if (visible != window_.rend() && tok::byte_token_value(tokenizer_.token_text(*visible)) >= 0) return {};
  }
  if (!text.starts_with(emitted_))
    fail("stream decode: token id {} changed text that was already returned ('{}' became '{}')", id, emitted_,
         text);
  std::string fresh = text.substr(emitted_.size());
  // The ids just emitted become the context of the next step.
  window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(context_));
  context_ = window_.size();
  emitted_ = decode_window();
  return fresh;
}

std::string StreamDecoder::finish() {
  std::string text = decode_window();
  std::string rest = text.size() > emitted_.size() ? text.substr(emitted_.size()) : std::string();
  window_.clear();
  context_ = 0;
  emitted_.clear();
  return rest;
}

}  // namespace gerbil
