#include "support/paths.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gerbil::test {

std::filesystem::path project_root() { return GERBIL_SOURCE_DIR; }

std::filesystem::path fixtures_dir() { return project_root().parent_path() / "shared" / "fixtures"; }

std::filesystem::path tokenizer_dir(const std::string& name) {
  return project_root() / ".deps" / "tokenizers" / name;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace gerbil::test
