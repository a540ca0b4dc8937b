#include "support/paths.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gerbil::test {

std::filesystem::path project_root() { return GERBIL_SOURCE_DIR; }

// $GERBIL_FIXTURES overrides the location (e.g. on a machine where the tests run from a copied build).
std::filesystem::path fixtures_dir() {
  if (const char* override_dir = std::getenv("GERBIL_FIXTURES")) return override_dir;
  return project_root().parent_path() / "shared" / "fixtures";
}

// $GERBIL_TOKENIZERS overrides the folder holding the packages (tests of the missing-data rule use it).
std::filesystem::path tokenizer_dir(const std::string& name) {
  if (const char* override_dir = std::getenv("GERBIL_TOKENIZERS"))
    return std::filesystem::path(override_dir) / name;
  return project_root() / ".deps" / "tokenizers" / name;
}

bool missing_data_fails() {
  const char* ci = std::getenv("CI");
  if (!ci) return false;
  std::string value = ci;
  return !value.empty() && value != "false" && value != "0";
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace gerbil::test
