// The CLI is one CLI11 app; each subcommand lives in its own tools/cmd_<name>.cpp and registers itself
// with a static GERBIL_COMMAND(...) so adding a command touches no other file.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace gerbil::cli {

// A subcommand: `name` may have two words ("bench kernels", "bench model") to nest it under a shared parent
// command. `setup` adds its options to the CLI11 subcommand and returns the action to run
// when the subcommand is chosen. The action returns the process exit code.
struct Command {
  std::string name;
  std::string help;
  std::function<std::function<int()>(CLI::App&)> setup;
};

std::vector<Command>& registry();

struct Registrar {
  explicit Registrar(Command command) { registry().push_back(std::move(command)); }
};

}  // namespace gerbil::cli

#define GERBIL_CONCAT_INNER(a, b) a##b
#define GERBIL_CONCAT(a, b) GERBIL_CONCAT_INNER(a, b)
#define GERBIL_COMMAND(name, help, ...) \
  static ::gerbil::cli::Registrar GERBIL_CONCAT(gerbil_command_, __LINE__)({name, help, __VA_ARGS__})
