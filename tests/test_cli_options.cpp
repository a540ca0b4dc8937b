// The CLI's option checks, run as a user would: a bad value is refused before anything loads, with a message
// naming the option, the value and the choices.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "support/paths.h"

namespace {

struct Outcome {
  int status;
  std::string output;  // stdout and stderr together
};

Outcome run_gerbil(const std::string& arguments) {
  std::string command = std::string(GERBIL_BINARY_DIR) + "/gerbil " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string output;
  std::array<char, 256> chunk;
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), pipe)) output.append(chunk.data(), n);
  return {pclose(pipe), output};
}

TEST(CliOptions, PreparedNormsTakesOnlyItsThreeValues) {
  for (const char* command : {"generate --model /nonexistent", "bench model --preset qwen2.5-0.5b"}) {
    Outcome bad = run_gerbil(std::string(command) + " --prepared-norms sometimes");
    EXPECT_NE(bad.status, 0) << command;
    EXPECT_THAT(bad.output, testing::HasSubstr("--prepared-norms: sometimes not in {auto,always,never}")) << command;
  }
  // A good value gets past the option check to the next problem: the missing model folder.
  Outcome good = run_gerbil("generate --model /nonexistent --prepared-norms never --tokens 1,2");
  EXPECT_NE(good.status, 0);
  EXPECT_THAT(good.output, testing::Not(testing::HasSubstr("--prepared-norms")));
  EXPECT_THAT(good.output, testing::HasSubstr("/nonexistent: no such model folder"));
}

// A choice option refuses `bad`, naming its choices, and takes `good` (the command then fails on the model only).
void expect_choice(const std::string& option, const std::string& bad, const std::string& good,
                   const std::string& choices) {
  Outcome refused = run_gerbil("generate --model /nonexistent " + option + " " + bad);
  EXPECT_NE(refused.status, 0);
  EXPECT_THAT(refused.output, testing::HasSubstr(option + ": " + bad + " not in " + choices));
  Outcome taken = run_gerbil("generate --model /nonexistent " + option + " " + good + " --tokens 1,2");
  EXPECT_NE(taken.status, 0);
  EXPECT_THAT(taken.output, testing::Not(testing::HasSubstr(option)));
  EXPECT_THAT(taken.output, testing::HasSubstr("/nonexistent: no such model folder"));
}

TEST(CliOptions, ArithmeticTakesF32OrF16) { expect_choice("--arithmetic", "half", "f16", "{f32,f16}"); }

TEST(CliOptions, KvCacheTakesAutoF32F16OrQ8) { expect_choice("--kv-cache", "q4", "q8", "{auto,f32,f16,q8}"); }

// --gpu-memory takes a size with a unit of 1,024 and reaches the device: a model that does not fit it is refused,
// naming the limit in bytes.
TEST(CliOptions, GpuMemoryTakesASizeTheDeviceKeepsTo) {
  Outcome refused = run_gerbil("generate --model /nonexistent --gpu-memory lots --tokens 1,2");
  EXPECT_NE(refused.status, 0);
  EXPECT_THAT(refused.output, testing::HasSubstr("--gpu-memory: lots unit not recognized"));
  GERBIL_REQUIRE_FIXTURES();
  std::string model = (gerbil::test::fixtures_dir() / "llama-tiny").string();
  Outcome small = run_gerbil("generate --model " + model + " --gpu-memory 2KiB --tokens 1,2");
  EXPECT_NE(small.status, 0);
  EXPECT_THAT(small.output, testing::HasSubstr("more than the memory limit of 2048 bytes"));
  Outcome enough = run_gerbil("generate --model " + model + " --gpu-memory 64MiB --tokens 1,2 -n 2");
  EXPECT_EQ(enough.status, 0) << enough.output;
}

// bench model's numbers that would measure nothing are refused naming the option, before a preset is written or
// a device created.
TEST(CliOptions, BenchModelRefusesCountsThatMeasureNothing) {
  for (auto [option, message] : {std::pair{"-r 0", "-r/--repeats must be at least 1"},
                                 std::pair{"--repeats 0", "-r/--repeats must be at least 1"},
                                 std::pair{"-p 0", "-p/--prompt-tokens must be at least 1"},
                                 std::pair{"-g 0", "-g/--generated-tokens must be at least 1"}}) {
    Outcome bad = run_gerbil(std::string("bench model --model /nonexistent ") + option);
    EXPECT_NE(bad.status, 0) << option;
    EXPECT_THAT(bad.output, testing::HasSubstr(message)) << option;
    EXPECT_THAT(bad.output, testing::Not(testing::HasSubstr("no config.json"))) << option;
  }
}

// Generation values that cannot work are refused before a model loads (the missing folder is never reached):
// they were taken as greedy (a negative temperature), a fixed seed (-2 as 2^64 - 2), nothing to generate, or
// failed after the first token (an infinite penalty) or after loading (an empty stop string).
TEST(CliOptions, GenerationValuesAreCheckedBeforeAModelLoads) {
  for (auto [arguments, message] :
       {std::pair{"-n 0", "--max-new-tokens must be at least 1"},
        std::pair{"--temperature -1", "temperature must be 0 (greedy) or in [0.0001, 100], got -1"},
        std::pair{"--repeat-penalty inf", "repetition_penalty must be a finite number > 0, got inf"},
        std::pair{"--seed -2", "--seed: Value -2 not in range"},
        std::pair{"--gpu-memory -5", "--gpu-memory: must not be negative"},
        std::pair{"--stop ''", "--stop: a stop string must not be empty"},
        std::pair{"--raw --system hello", "--system and --thinking need the chat template, and --raw skips it"}}) {
    Outcome bad = run_gerbil(std::string("run --model /nonexistent ") + arguments + " hi");
    EXPECT_NE(bad.status, 0) << arguments;
    EXPECT_THAT(bad.output, testing::HasSubstr(message)) << arguments;
    EXPECT_THAT(bad.output, testing::Not(testing::HasSubstr("no such model folder"))) << arguments;
  }
  Outcome fresh = run_gerbil("run --model /nonexistent --seed -1 hi");  // llama.cpp's "a fresh seed"
  EXPECT_THAT(fresh.output, testing::HasSubstr("no such model folder"));
  // generate works on ids: it offers no stop strings (they always failed: "stop strings need a tokenizer").
  EXPECT_THAT(run_gerbil("generate --model /nonexistent --tokens 1 --stop x").output,
              testing::HasSubstr("The following arguments were not expected"));
}

// Paths that cannot be read are errors naming them (exit 1), not internal errors (exit 2) or empty answers.
TEST(CliOptions, UnreadablePathsAreNamed) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("gerbil-cli-paths-" + std::to_string(getpid()));
  struct Removed {
    std::filesystem::path dir;
    ~Removed() { std::filesystem::remove_all(dir); }
  } removed{dir};
  std::filesystem::create_directories(dir / "model" / "config.json");
  std::filesystem::create_symlink(dir / "loop", dir / "loop");
  auto expect_error = [](const std::string& arguments, const std::string& message) {
    Outcome outcome = run_gerbil(arguments);
    EXPECT_EQ(WEXITSTATUS(outcome.status), 1) << arguments << ": " << outcome.output;
    EXPECT_THAT(outcome.output, testing::HasSubstr(message)) << arguments;
  };
  expect_error("run --model " + (dir / "loop").string() + " hi", (dir / "loop").string() + ": Too many levels of symbolic links");
  expect_error("generate --tokens 1 --model " + (dir / "model").string(), "config.json: is a folder, not a file");
  expect_error("info --model /nonexistent.gguf", "info --model: /nonexistent.gguf does not exist");
  GERBIL_REQUIRE_PATH(gerbil::test::tokenizer_dir("qwen3"), "run scripts/setup.sh to fetch the tokenizer files");
  expect_error("tokenize --tokenizer " + gerbil::test::tokenizer_dir("qwen3").string() + " --text-file " + dir.string(),
               dir.string() + ": is a folder, not a file");  // it printed [] for the folder's text
}

}  // namespace
