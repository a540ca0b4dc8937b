// gerbil synth: write a Hugging Face model folder with seeded random weights (see src/model/synth.h), and
// with --tokenizer a real tokenizer and chat template beside them, so the folder runs with `gerbil run`.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "command.h"
#include "gerbil/error.h"
#include "json/json_file.h"
#include "model/synth.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace gerbil::cli {
namespace {

namespace fs = std::filesystem;

DType parse_weight_dtype(const std::string& name) {
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  fail("--dtype must be f32, f16 or bf16, got \"{}\"", name);
}

// Where scripts/setup.sh puts the tokenizer packages: $GERBIL_TOKENIZERS, else .deps/tokenizers of the
// checkout this binary was built from.
fs::path tokenizer_packages() {
  if (const char* dir = std::getenv("GERBIL_TOKENIZERS"); dir && *dir) return dir;
  return GERBIL_TOKENIZER_PACKAGES;
}

// NAME is a tokenizer package (qwen3, llama3, ...) or a folder holding a tokenizer.
fs::path tokenizer_folder(const std::string& name) {
  if (fs::is_directory(name)) return name;
  fs::path packages = tokenizer_packages();
  if (fs::is_directory(packages / name)) return packages / name;
  std::vector<std::string> known;
  if (fs::is_directory(packages))
    for (const auto& entry : fs::directory_iterator(packages))
      if (entry.is_directory()) known.push_back(entry.path().filename().string());
  std::sort(known.begin(), known.end());
  fail("--tokenizer {}: no such folder, and no tokenizer package of that name in {} (it has: {}; "
       "scripts/setup.sh fetches them)",
       name, packages.string(), known.empty() ? "nothing" : fmt::format("{}", fmt::join(known, ", ")));
}

// The ids of the tokenizer's BOS and EOS tokens as tokenizer_config.json names them (a GPT-2 pair of
// files has no such config: its one special token, <|endoftext|>, is both, as in GPT-2's config).
SynthOptions::Tokens special_tokens(const fs::path& folder, const Tokenizer& tokenizer) {
  fs::path config_path = folder / "tokenizer_config.json";
  if (!fs::exists(config_path)) {
    std::optional<int32_t> end = tokenizer.token_id("<|endoftext|>");
    return {end, end};
  }
  auto config = read_json_file<nlohmann::ordered_json>(config_path);
  auto id_of = [&](const char* field) -> std::optional<int64_t> {
    std::optional<std::string> token = tokenizer_config_token(config, field, config_path);
    if (!token) return std::nullopt;
    std::optional<int32_t> id = tokenizer.token_id(*token);
    if (!id) fail("{}: {} '{}' is not a token of the tokenizer", config_path.string(), field, *token);
    return *id;
  };
  return {id_of("bos_token"), id_of("eos_token")};
}

// Fits OPTIONS to the tokenizer in FOLDER: a vocabulary that covers every token id (a larger --vocab
// stays, as in checkpoints whose embedding is padded) and its special tokens.
void fit_to_tokenizer(const std::string& name, const fs::path& folder, SynthOptions& options) {
  Tokenizer tokenizer = Tokenizer::load(folder);
  int64_t tokens = int64_t(tokenizer.vocab_size());
  if (options.vocab && *options.vocab < tokens)
    fail("--vocab {} is smaller than the {} ids of tokenizer {}", *options.vocab, tokens, name);
  if (!options.vocab) options.vocab = tokens;
  options.special_tokens = special_tokens(folder, tokenizer);
}

void copy_files(const fs::path& from, const fs::path& to) {
  for (const auto& entry : fs::directory_iterator(from))
    if (entry.is_regular_file())
      fs::copy_file(entry.path(), to / entry.path().filename(), fs::copy_options::overwrite_existing);
}

std::function<int()> setup(CLI::App& app) {
  struct Args {
    SynthOptions options;
    std::string dtype = "f32";
    std::string out;
    std::string tokenizer;
    int64_t vocab = 0;
    int64_t intermediate = 0;
    double max_shard_gb = 4.0;
  };
  auto args = std::make_shared<Args>();
  app.add_option("--preset", args->options.preset,
                 fmt::format("model shape: {}", fmt::join(synth_presets(), ", ")))
      ->required();
  app.add_option("--dtype", args->dtype, "weight type: f32, f16 or bf16")->capture_default_str();
  app.add_option("--seed", args->options.seed, "random seed")->capture_default_str();
  app.add_option("--out", args->out, "output folder")->required();
  app.add_option("--tokenizer", args->tokenizer,
                 "put this tokenizer (and its chat template) beside the weights: a package scripts/setup.sh "
                 "fetched (qwen3, llama3, llama2, gemma3, gpt2) or a folder; the vocabulary and special tokens "
                 "follow it");
  app.add_option("--vocab", args->vocab, "vocabulary size (default: the preset's, or the tokenizer's)");
  app.add_option("--intermediate", args->intermediate, "MLP width, intermediate_size (default: the preset's)");
  app.add_option("--max-shard-gb", args->max_shard_gb, "split weights into files of at most this many GB")
      ->capture_default_str();
  return [args] {
    SynthOptions options = args->options;
    options.dtype = parse_weight_dtype(args->dtype);
    if (args->vocab != 0) options.vocab = args->vocab;
    if (args->intermediate != 0) options.intermediate = args->intermediate;
    if (!(args->max_shard_gb >= 1e-6 && args->max_shard_gb <= 1e6))
      fail("--max-shard-gb must be between 1e-6 (a kB) and 1e6, got {}", args->max_shard_gb);
    options.max_shard_bytes = uint64_t(args->max_shard_gb * 1e9);
    fs::path tokenizer = args->tokenizer.empty() ? fs::path() : tokenizer_folder(args->tokenizer);
    if (!tokenizer.empty()) fit_to_tokenizer(args->tokenizer, tokenizer, options);
    SynthResult result = synth_model(args->out, options);
    if (!tokenizer.empty()) copy_files(tokenizer, args->out);
    std::printf("wrote %s: %s, %llu parameters, %.3f GB in %zu file(s)%s\n", args->out.c_str(),
                options.preset.c_str(), static_cast<unsigned long long>(result.parameters),
                double(result.bytes) / 1e9, result.files.size(),
                args->tokenizer.empty() ? "" : fmt::format(", tokenizer {}", args->tokenizer).c_str());
    return 0;
  };
}

GERBIL_COMMAND("synth", "write a model folder with seeded random weights", setup);

}  // namespace
}  // namespace gerbil::cli
