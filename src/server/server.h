// gerbil serve: an OpenAI-compatible HTTP server (cpp-httplib) in front of the scheduler. It binds first,
// loads the model on a background thread (answering 503 on /health and completions until it is ready),
// then answers POST /v1/chat/completions and /v1/completions (streamed as server-sent events or not),
// GET /v1/models, /health, /metrics, POST /tokenize and /detokenize.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "generate/scheduler.h"
#include "graph/model.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace gerbil::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (see Server::port())
  SchedulerOptions scheduler;
  std::string api_key;                // empty: no authentication
  double timeout_seconds = 600;       // per request, from arrival to its last token
  size_t max_body_bytes = 8 << 20;    // larger request bodies get 413
  std::string model_name;             // the id /v1/models reports and requests may name
};

// What the server needs of a loaded model; OWNER keeps the device, files and model alive.
struct ServedModel {
  graph::Model* model = nullptr;
  Tokenizer tokenizer;
  std::optional<ChatTemplate> chat;
  std::shared_ptr<void> owner;
};
using ModelLoader = std::function<ServedModel()>;

class Server {
 public:
  Server(ServerOptions options, ModelLoader loader);
  ~Server();

  // Binds (throws gerbil::Error naming the address when it cannot), starts loading the model and serves
  // until stop(). Returns the process exit code: 0, or 1 when the model failed to load.
  int run();
  // Thread-safe. Stops taking requests (they get 503); with FINISH the running ones end as they would,
  // else they are cancelled; then the listener closes and run() returns. Before run(), run() then returns
  // without listening.
  void stop(bool finish);
  // The bound port, once run() has bound (0 before).
  int port() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gerbil::server
