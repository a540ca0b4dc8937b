// --toggle / --disable-toggle: Dawn device toggles, for every command that creates a device.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace gerbil::cli {

void add_toggle_options(CLI::App& app, std::vector<std::string>& enable, std::vector<std::string>& disable);

}  // namespace gerbil::cli
