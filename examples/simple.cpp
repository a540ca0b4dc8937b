// The smallest complete use of the library: load a model folder, ask it one question through its chat
// template, stream the answer to stdout and print the statistics.
//
//   build/examples/example_simple models/Qwen3-0.6B "Why is the sky blue?"
#include <cstdio>

#include "gerbil/gerbil.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [QUESTION]\n", argv[0]);
    return 2;
  }
  try {
    gerbil::Engine engine(argv[1]);
    const gerbil::ModelInfo& info = engine.info();
    std::fprintf(stderr, "loaded %s on %s in %.1f s\n", info.architecture.c_str(), info.adapter.c_str(),
                 info.load_seconds);

    std::string question = argc == 3 ? argv[2] : "Write a haiku about a gerbil.";
    std::string prompt =
        engine.has_chat_template() ? engine.apply_chat_template({{"user", question}}) : question;
    gerbil::CompletionOptions options;
    options.max_new_tokens = 200;
    options.sampling.temperature = 0.7f;
    gerbil::Completion answer = engine.complete(prompt, options, [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });

    const gerbil::CompletionStats& s = answer.stats;
    std::printf("\n");
    std::fprintf(stderr,
                 "%zu prompt tokens, %zu generated (%s); first token after %.0f ms; prefill %.1f tok/s, "
                 "decode %.1f tok/s\n",
                 s.prompt_tokens, s.generated_tokens,
                 std::string(gerbil::stop_reason_name(answer.stop_reason)).c_str(),
                 s.time_to_first_token * 1000, s.prefill_tokens_per_second, s.decode_tokens_per_second);
  } catch (const gerbil::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
