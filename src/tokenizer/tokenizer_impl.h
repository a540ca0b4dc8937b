// The parts of a Tokenizer, shared by the loader (load.cpp) and the pipeline (tokenizer.cpp).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace gerbil {

struct Tokenizer::Impl {
  std::filesystem::path source;
  std::unique_ptr<tok::Normalizer> normalizer;  // each may be null: the stage does nothing
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::Bpe> model;
  std::unique_ptr<tok::PostProcessor> post_processor;
  std::unique_ptr<tok::Decoder> decoder;
  tok::AddedVocabulary added;

  // Per id: the string the decoder sees, and what kind of token it is.
  enum class Kind : uint8_t { None, Model, Added, Special };
  std::vector<std::string> texts;
  std::vector<Kind> kinds;
  tok::Vocab added_ids;  // content of each added token -> id

  // Fills texts/kinds from the model vocabulary and the added tokens.
  void index_tokens();
};

}  // namespace gerbil
