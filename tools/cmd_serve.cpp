// gerbil serve: the OpenAI-compatible HTTP server (src/server/server.h). SIGINT / SIGTERM stop it: new
// requests get 503 while the running ones finish, then it exits 0; a second signal cancels what still runs.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "command.h"
#include "generate/model_text.h"
#include "model/weights.h"
#include "gerbil/error.h"
#include "model_options.h"
#include "server/server.h"

namespace gerbil::cli {
namespace {

struct ServeCommand {
  ModelOptions model;
  server::ServerOptions server;
  double max_body_mb = 8;
};

// Waits for SIGINT / SIGTERM on its own thread (the signals are blocked everywhere else) and stops SERVER.
// SIGUSR1 only wakes it when the server ended by itself.
class SignalWatcher {
 public:
  explicit SignalWatcher(server::Server& server) {
    sigemptyset(&signals_);
    for (int signal : {SIGINT, SIGTERM, SIGUSR1}) sigaddset(&signals_, signal);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);  // before any thread starts, so all inherit it
    thread_ = std::thread([this, &server] {
      for (int count = 0;; ++count) {
        int signal = 0;
        sigwait(&signals_, &signal);
        if (signal == SIGUSR1) return;
        std::fprintf(stderr, count == 0 ? "stopping: finishing the running requests (again to cancel them)\n"
                                        : "stopping: cancelling the running requests\n");
        if (count == 0) std::thread([&server] { server.stop(/*finish=*/true); }).detach();
        else server.stop(/*finish=*/false);
      }
    });
  }
  ~SignalWatcher() {
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }

 private:
  sigset_t signals_;
  std::thread thread_;
};

int serve(ServeCommand& c) {
  check_model_folder(c.model.model_dir);
  if (!(c.max_body_mb > 0)) fail("--max-body-mb must be positive");
  c.server.max_body_bytes = size_t(c.max_body_mb * 1048576);
  c.server.model_name = std::filesystem::path(c.model.model_dir).lexically_normal().filename().string();
  if (c.server.model_name.empty())
    c.server.model_name = std::filesystem::path(c.model.model_dir).parent_path().filename().string();
  ModelOptions model_options = c.model;
  model_options.slots = c.server.scheduler.parallel;
  server::Server server(c.server, [model_options] {
    ModelText text = load_model_text(model_options.model_dir);
    ModelOptions sampled = model_options;
    sampled.token_count = uint32_t(text.tokenizer.vocab_size());  // padded checkpoints: never past the tokenizer
    auto loaded = std::make_shared<LoadedModel>(load_model(sampled, /*report=*/true));
    return server::ServedModel{loaded->model.get(), std::move(text.tokenizer), std::move(text.chat), loaded};
  });
  SignalWatcher watcher(server);
  return server.run();
}

GERBIL_COMMAND("serve", "Serve a model over an OpenAI-compatible HTTP API", [](CLI::App& app) {
  auto c = std::make_shared<ServeCommand>();
  c->model.add_to(app);
  app.add_option("--host", c->server.host, "Address to listen on (0.0.0.0: every interface)")->capture_default_str();
  app.add_option("--port", c->server.port, "Port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--parallel", c->server.scheduler.parallel, "Sequences decoded at once (KV-cache slots)")
      ->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--kv-tokens", c->model.kv_tokens,
                 "Tokens the KV cache holds for all sequences together, in blocks of 256 (default: --parallel x --ctx, each "
                 "sequence's rounded up to whole blocks): "
                 "short conversations leave room to long ones");
  app.add_option("--max-queue", c->server.scheduler.max_queue,
                 "Requests waiting while every slot is busy (0: none wait); more are answered 429")->check(CLI::Range(0, 4096))->capture_default_str();
  app.add_option("--api-key", c->server.api_key, "Require `Authorization: Bearer KEY` (default: $GERBIL_API_KEY)")
      ->envname("GERBIL_API_KEY");
  app.add_option("--timeout", c->server.timeout_seconds, "Seconds a request may take, queue included")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-body-mb", c->max_body_mb, "Largest request body in MiB (larger: 413)")->capture_default_str();
  app.footer(
      "Endpoints: POST /v1/chat/completions, /v1/completions (\"stream\": true for server-sent events),\n"
      "GET /v1/models, /health (200 ready, 503 loading or stopping), /metrics (Prometheus), POST /tokenize,\n"
      "/detokenize. --ctx is the context of each of the --parallel sequences. The model loads after the port\n"
      "is bound. One line per request goes to stderr. SIGINT / SIGTERM: finish what runs, then exit 0.");
  return [c] { return serve(*c); };
});

}  // namespace
}  // namespace gerbil::cli
