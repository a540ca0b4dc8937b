// How the library's public options (include/gerbil/gerbil.h) map onto the internal ones. gerbil::Engine
// uses these, and so do the CLI's checking commands (logits, graph, generate, bench model), which drive the
// model on the GPU directly but take the same options, so each option is translated in one place.
#pragma once

#include "generate/generator.h"
#include "gerbil/gerbil.h"
#include "gpu/device.h"
#include "graph/model.h"

namespace gerbil {

gpu::DeviceOptions device_options(const EngineOptions& options);
// Fails on values no model can use (a prefill chunk of 0 tokens).
graph::ModelOptions model_options(const EngineOptions& options);
GenerateOptions generate_options(const CompletionOptions& options);
// The sampling a model's generation_config.json recommends (its temperature, top_k, top_p and
// repetition_penalty, as vLLM applies them) over SamplingOptions' defaults; a value no sampler takes is left out.
SamplingOptions recommended_sampling(const GenerationDefaults& defaults);
Completion to_completion(Generation generation);

}  // namespace gerbil
