// Encode throughput of each tokenizer on ~4 MB of mixed text: English-like prose, CJK, code and
// numbers, and the fixture strings (emoji, other scripts, special-token look-alikes). The text is
// generated deterministically so runs compare. Needs the tokenizer files of scripts/setup.sh.
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

const fs::path kSourceDir = GERBIL_SOURCE_DIR;

// A small deterministic generator (64-bit LCG), so every run sees the same text.
class Random {
 public:
  uint32_t next(uint32_t bound) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>((state_ >> 33) % bound);
  }

 private:
  uint64_t state_ = 42;
};

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void english_paragraph(Random& random, std::string& out) {
  static const std::vector<std::string> words = {"the",
                                                 "of",
                                                 "and",
                                                 "to",
                                                 "in",
                                                 "a",
                                                 "is",
                                                 "that",
                                                 "for",
                                                 "it",
                                                 "as",
                                                 "was",
                                                 "with",
                                                 "be",
                                                 "by",
                                                 "on",
                                                 "not",
                                                 "he",
                                                 "this",
                                                 "are",
                                                 "or",
                                                 "his",
                                                 "from",
                                                 "at",
                                                 "which",
                                                 "but",
                                                 "have",
                                                 "an",
                                                 "had",
                                                 "they",
                                                 "you",
                                                 "were",
                                                 "their",
                                                 "one",
                                                 "all",
                                                 "we",
                                                 "can",
                                                 "her",
                                                 "has",
                                                 "there",
                                                 "been",
                                                 "if",
                                                 "more",
                                                 "when",
                                                 "will",
                                                 "would",
                                                 "who",
                                                 "so",
                                                 "no",
                                                 "model",
                                                 "token",
                                                 "language",
                                                 "system",
                                                 "research",
                                                 "however",
                                                 "government",
                                                 "information",
                                                 "development",
                                                 "international",
                                                 "experience",
                                                 "understanding",
                                                 "nevertheless",
                                                 "approximately",
                                                 "characteristics",
                                                 "responsibility",
                                                 "Washington",
                                                 "London",
                                                 "Tuesday",
                                                 "September",
                                                 "GPU",
                                                 "WebGPU",
                                                 "transformer",
                                                 "attention",
                                                 "probability",
                                                 "don't",
                                                 "it's",
                                                 "we've",
                                                 "they're",
                                                 "naïve",
                                                 "café",
                                                 "résumé",
                                                 "coöperate",
                                                 "Zürich"};
  static const std::vector<std::string> marks = {",", ",", ";", ":", " -", " (see above)", "!", "?"};
  int sentences = 3 + random.next(5);
  for (int s = 0; s < sentences; ++s) {
    int length = 6 + random.next(18);
    for (int w = 0; w < length; ++w) {
      std::string word = words[random.next(words.size())];
      if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
      out += word;
      if (w + 1 < length && random.next(8) == 0) out += marks[random.next(marks.size())];
      if (random.next(40) == 0) out += " " + std::to_string(random.next(100000));
      out += w + 1 < length ? " " : ". ";
    }
  }
  out += "\n\n";
}

void cjk_paragraph(Random& random, std::string& out) {
  int length = 40 + random.next(120);
  for (int i = 0; i < length; ++i) {
    uint32_t kind = random.next(10);
    if (kind < 6)
      append_utf8(out, 0x4E00 + random.next(0x5000));  // CJK ideographs
    else if (kind < 8)
      append_utf8(out, 0x3041 + random.next(0x55));  // hiragana
    else if (kind < 9)
      append_utf8(out, 0xAC00 + random.next(0x2BA4));  // Hangul syllables
    else
      out += random.next(2) ? "，" : "。";
  }
  out += "\n";
}

void code_block(Random& random, std::string& out) {
  int lines = 4 + random.next(10);
  for (int i = 0; i < lines; ++i) {
    out += std::string(2 * random.next(4), ' ');
    out += "value_" + std::to_string(random.next(100)) + " = compute(x[" + std::to_string(random.next(64)) +
           "], 0x" + std::to_string(random.next(9999)) + ") * 3.14159;  // step " + std::to_string(i) + "\n";
  }
}

std::vector<std::string> fixture_texts() {
  std::vector<std::string> texts;
  fs::path root = kSourceDir.parent_path() / "shared" / "fixtures" / "tokenizers";
  if (!fs::exists(root)) return texts;
  for (const auto& folder : fs::directory_iterator(root)) {
    std::ifstream in(folder.path() / "tokenizer_ref.json");
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    for (const auto& entry : nlohmann::json::parse(text.str())) texts.push_back(entry["text"]);
  }
  return texts;
}

const std::string& mixed_text() {
  static const std::string text = [] {
    constexpr size_t kTargetBytes = 4 << 20;
    Random random;
    std::vector<std::string> fixtures = fixture_texts();
    std::string out;
    out.reserve(kTargetBytes + 4096);
    while (out.size() < kTargetBytes) {
      uint32_t kind = random.next(20);
      if (kind < 14)
        english_paragraph(random, out);
      else if (kind < 17)
        cjk_paragraph(random, out);
      else if (kind < 19)
        code_block(random, out);
      else if (!fixtures.empty())
        out += fixtures[random.next(fixtures.size())] + "\n";
    }
    return out;
  }();
  return text;
}

// Google Benchmark calls a benchmark function several times; load each tokenizer only once.
const gerbil::Tokenizer& load(const fs::path& dir) {
  static std::map<fs::path, gerbil::Tokenizer> loaded;
  auto it = loaded.find(dir);
  if (it == loaded.end()) it = loaded.emplace(dir, gerbil::Tokenizer::load(dir)).first;
  return it->second;
}

void BM_Encode(benchmark::State& state, const std::string& name) {
  fs::path dir = kSourceDir / ".deps" / "tokenizers" / name;
  if (!fs::exists(dir)) {
    state.SkipWithError(("missing " + dir.string() + " (run scripts/setup.sh)").c_str());
    return;
  }
  const gerbil::Tokenizer& tokenizer = load(dir);
  const std::string& text = mixed_text();
  size_t tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = tokenizer.encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(tokens);
}

BENCHMARK_CAPTURE(BM_Encode, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Encode, llama3, std::string("llama3"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Encode, llama2, std::string("llama2"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Encode, gemma3, std::string("gemma3"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Encode, gpt2, std::string("gpt2"))->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
