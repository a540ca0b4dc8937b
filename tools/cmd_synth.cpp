// gerbil synth: write a Hugging Face model folder with seeded random weights (see src/model/synth.h).
#include <fmt/format.h>

#include <cstdio>

#include "command.h"
#include "gerbil/error.h"
#include "model/synth.h"

namespace gerbil::cli {
namespace {

DType parse_weight_dtype(const std::string& name) {
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  fail("--dtype must be f32, f16 or bf16, got \"{}\"", name);
}

std::function<int()> setup(CLI::App& app) {
  struct Args {
    SynthOptions options;
    std::string dtype = "f32";
    std::string out;
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
  app.add_option("--vocab", args->vocab, "vocabulary size (default: the preset's)");
  app.add_option("--intermediate", args->intermediate, "MLP width, intermediate_size (default: the preset's)");
  app.add_option("--max-shard-gb", args->max_shard_gb, "split weights into files of at most this many GB")
      ->capture_default_str();
  return [args] {
    SynthOptions options = args->options;
    options.dtype = parse_weight_dtype(args->dtype);
    if (args->vocab != 0) options.vocab = args->vocab;
    if (args->intermediate != 0) options.intermediate = args->intermediate;
    if (!(args->max_shard_gb > 0)) fail("--max-shard-gb must be positive");
    options.max_shard_bytes = uint64_t(args->max_shard_gb * 1e9);
    SynthResult result = synth_model(args->out, options);
    std::printf("wrote %s: %s, %llu parameters, %.3f GB in %zu file(s)\n", args->out.c_str(),
                options.preset.c_str(), static_cast<unsigned long long>(result.parameters),
                double(result.bytes) / 1e9, result.files.size());
    return 0;
  };
}

GERBIL_COMMAND("synth", "write a model folder with seeded random weights", setup);

}  // namespace
}  // namespace gerbil::cli
