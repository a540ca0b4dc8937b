// gerbil: run large language models on the GPU through WebGPU. See README.md.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "command.h"
#include "gerbil/error.h"

namespace gerbil::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace gerbil::cli

int main(int argc, char** argv) {
  using namespace gerbil::cli;
  CLI::App app{"gerbil: large language models on any GPU through WebGPU", "gerbil"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gerbil 0.1.0"));
  auto& commands = registry();
  std::sort(commands.begin(), commands.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::function<int()> action;
  for (auto& command : commands) {
    CLI::App* parent = &app;
    std::string name = command.name;
    if (auto space = name.find(' '); space != std::string::npos) {
      std::string group = name.substr(0, space);
      name = name.substr(space + 1);
      auto groups = app.get_subcommands([&](CLI::App* sub) { return sub->get_name() == group; });
      if (!groups.empty()) {
        parent = groups.front();
      } else {
        parent = app.add_subcommand(group, group + " commands");
        parent->require_subcommand(1);
      }
    }
    CLI::App* sub = parent->add_subcommand(name, command.help);
    auto run = command.setup(*sub);
    sub->callback([&action, run] { action = run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action();
  } catch (const gerbil::Error& e) {
    std::fprintf(stderr, "gerbil: error: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {  // a path that cannot be looked at: its text names it
    std::fprintf(stderr, "gerbil: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gerbil: internal error: %s\n", e.what());
    return 2;
  }
}
