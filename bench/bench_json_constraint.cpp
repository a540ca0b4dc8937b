// The per-step cost of a JSON-schema constraint's mask() over Qwen3's vocabulary (151,669 ids). A step
// that has to be fast is well under a millisecond: constrained decoding should stay within 20 % of
// unconstrained decoding at ~1,000 tokens/s on the H200.
//   Cold/<state>: a state met for the first time: the trie walk.
//   Answer: mask() + accept() over the tokens of a whole answer, per token, on a fresh constraint each time
//   (what a request pays, first-time states and cached ones together).
// Needs the tokenizer files of scripts/setup.sh.
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "generate/json_constraint.h"
#include "tokenizer/tokenizer.h"

namespace {

const gerbil::Tokenizer& qwen3() {
  static const gerbil::Tokenizer tokenizer =
      gerbil::Tokenizer::load(std::filesystem::path(GERBIL_SOURCE_DIR) / ".deps/tokenizers/qwen3");
  return tokenizer;
}

const nlohmann::json kSchema = nlohmann::json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "email": {"type": "string"},
    "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                "zip": {"type": "string"}}, "required": ["street", "city"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "score": {"type": "number"},
    "status": {"enum": ["active", "inactive", "banned"]}
  },
  "required": ["name", "age", "email", "address", "tags", "score", "status"]
})");

const std::string kAnswer =
    R"({"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "address": {"street": "12 St )"
    R"(James's Square", "city": "London"}, "tags": ["mathematics", "poetical science", "engines", "notes on )"
    R"(the analytical engine"], "score": 98.5, "status": "active"})";

int32_t eos() { return *qwen3().token_id("<|im_end|>"); }

// A fresh constraint advanced over the first tokens of the answer whose text is PREFIX.
std::unique_ptr<gerbil::TokenConstraint> at(const std::string& prefix) {
  auto constraint = gerbil::make_json_constraint(gerbil::JsonGrammar::from_schema(kSchema, "schema"),
                                                 gerbil::TokenTrie::of(qwen3()), {eos()});
  for (int32_t id : qwen3().encode(prefix)) constraint->accept(id);
  return constraint;
}

void cold(benchmark::State& state, const std::string& prefix) {
  std::vector<uint8_t> allowed(151936);  // Qwen3's logits
  for (auto _ : state) {
    state.PauseTiming();
    auto constraint = at(prefix);
    std::fill(allowed.begin(), allowed.end(), 1);
    state.ResumeTiming();
    constraint->mask(allowed);
    benchmark::DoNotOptimize(allowed.data());
  }
}
BENCHMARK_CAPTURE(cold, InString, std::string(R"({"name": "Ada)"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(cold, AfterKey, std::string(R"({"name")"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(cold, InNumber, std::string(R"({"name": "Ada", "age": 3)"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(cold, Start, std::string(""))->Unit(benchmark::kMicrosecond);

void warm_string(benchmark::State& state) {
  std::vector<uint8_t> allowed(151936);
  auto constraint = at(R"({"name": "Ada)");
  for (auto _ : state) {
    std::fill(allowed.begin(), allowed.end(), 1);
    constraint->mask(allowed);
    benchmark::DoNotOptimize(allowed.data());
  }
}
BENCHMARK(warm_string)->Unit(benchmark::kMicrosecond);

// mask() (into ALLOWED, Qwen3's logits) and accept() over IDS, as decoding takes them one by one; each must be allowed.
void feed(benchmark::State& state, gerbil::TokenConstraint& constraint, const std::vector<int32_t>& ids,
          std::vector<uint8_t>& allowed) {
  for (int32_t id : ids) {
    std::fill(allowed.begin(), allowed.end(), 1);
    constraint.mask(allowed);
    if (!allowed[id]) state.SkipWithError("a token of the text was refused");
    constraint.accept(id);
  }
}

// Counters per token of a text of TOKENS tokens fed every iteration.
void count_tokens(benchmark::State& state, size_t tokens) {
  state.counters["s_per_token"] = benchmark::Counter(
      static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["tokens"] = static_cast<double>(tokens);
}

void answer(benchmark::State& state) {
  std::vector<int32_t> ids = qwen3().encode(kAnswer);
  ids.push_back(eos());
  std::vector<uint8_t> allowed(151936);
  auto grammar = gerbil::JsonGrammar::from_schema(kSchema, "schema");
  for (auto _ : state) {
    auto constraint = gerbil::make_json_constraint(grammar, gerbil::TokenTrie::of(qwen3()), {eos()});
    feed(state, *constraint, ids, allowed);
  }
  count_tokens(state, ids.size());
}
BENCHMARK(answer)->Unit(benchmark::kMillisecond);

// tool_choice required among N tools: an anyOf of N call objects told apart by their names, whose readings are all
// followed until the name is written (src/server/answer.cpp builds it so). Per token of one call, its masks cold: each
// round compiles the schema afresh (under another path: a grammar compiled before would bring its cached masks), and
// the compilation is not timed.
void required_call(benchmark::State& state) {
  const auto tools = static_cast<int>(state.range(0));
  nlohmann::json calls = nlohmann::json::array();
  for (int i = 0; i < tools; ++i)
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", "tool_" + std::to_string(i)}}},
                                     {"arguments", {{"type", "object"},
                                                    {"properties", {{"city", {{"type", "string"}}},
                                                                    {"days", {{"type", "integer"}}}}},
                                                    {"required", {"city", "days"}}}}}},
                     {"required", {"name", "arguments"}}});
  const nlohmann::json schema = tools == 1 ? calls[0] : nlohmann::json{{"anyOf", calls}};
  std::vector<int32_t> ids = qwen3().encode(R"({"name": "tool_)" + std::to_string(tools - 1) +
                                            R"(", "arguments": {"city": "Oslo", "days": 3}})");
  ids.push_back(eos());
  std::vector<uint8_t> allowed(151936);
  int round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto constraint = gerbil::make_json_constraint(
        gerbil::JsonGrammar::from_schema(schema, "tools." + std::to_string(round++)), gerbil::TokenTrie::of(qwen3()),
        {eos()});
    state.ResumeTiming();
    feed(state, *constraint, ids, allowed);
  }
  count_tokens(state, ids.size());
}
BENCHMARK(required_call)->Arg(1)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
