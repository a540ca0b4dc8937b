#include "toggle_options.h"

namespace gerbil::cli {

void add_toggle_options(CLI::App& app, std::vector<std::string>& enable, std::vector<std::string>& disable) {
  // Dawn exposes no list of its toggles through the C API and ignores names it does not know, so the names
  // are passed as given; the help says so rather than pretending to check them.
  app.add_option("--toggle", enable,
                 "Enable a Dawn device toggle (repeatable), e.g. disable_robustness (turns off bounds checks on "
                 "buffer access: only with trusted models and inputs); Dawn ignores names it does not know");
  app.add_option("--disable-toggle", disable, "Disable a Dawn device toggle (repeatable)");
}

}  // namespace gerbil::cli
