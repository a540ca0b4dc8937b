// Server::run() and Server::stop() in any order: a stop before the listener starts still ends run() (httplib's own
// stop does nothing before its listener runs: run() listened for good), and a model that fails to load ends run()
// with 1, also when it fails at once (its stop may then come before the listener runs).
#include <chrono>
#include <future>
#include <memory>
#include <tuple>

#include <gtest/gtest.h>

#include "graph/model.h"
#include "model/weights.h"
#include "server/server.h"
#include "support/device.h"
#include "support/paths.h"

namespace gerbil::server {
namespace {

using namespace std::chrono_literals;

ServerOptions any_port() {
  ServerOptions options;
  options.port = 0;
  options.model_name = "qwen2-tiny";
  return options;
}

// The qwen2-tiny fixture (which has no tokenizer of its own) with Qwen3's tokenizer, as `gerbil serve` holds a model.
ServedModel fixture_model() {
  auto files = std::make_shared<ModelFiles>(ModelFiles::open(test::fixtures_dir() / "qwen2-tiny"));
  auto model = std::make_shared<graph::Model>(test::device(), *files, graph::ModelOptions{.context = 64});
  graph::Model* served = model.get();
  return {served, Tokenizer::load(test::tokenizer_dir("qwen3")), std::nullopt, std::make_shared<std::tuple<std::shared_ptr<ModelFiles>,
                                                                                  std::shared_ptr<graph::Model>>>(files, model)};
}

// run()'s exit code, or a failure (and a stop that ends it) when it is still running after a minute.
int run_with_watchdog(Server& server) {
  auto running = std::async(std::launch::async, [&] { return server.run(); });
  if (running.wait_for(60s) != std::future_status::ready) {
    ADD_FAILURE() << "run() was still listening a minute later";
    server.stop(/*finish=*/false);
  }
  return running.get();
}

TEST(ServerLifecycle, AStopBeforeRunEndsIt) {
  GERBIL_REQUIRE_FIXTURES();
  GERBIL_REQUIRE_PATH(test::tokenizer_dir("qwen3"), "run scripts/setup.sh to fetch the tokenizer files");
  Server server(any_port(), fixture_model);
  server.stop(/*finish=*/true);
  EXPECT_EQ(run_with_watchdog(server), 0);
}

TEST(ServerLifecycle, AModelThatFailsAtOnceEndsRunWithOne) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    SCOPED_TRACE(testing::Message() << "attempt " << attempt);
    Server server(any_port(), []() -> ServedModel { throw Error("no such model"); });
    EXPECT_EQ(run_with_watchdog(server), 1);
  }
}

}  // namespace
}  // namespace gerbil::server
