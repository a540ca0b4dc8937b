#include "fuzz_support.h"

#include <fstream>
#include <string>
#include <system_error>

#include <unistd.h>

namespace gerbil::fuzz {

namespace fs = std::filesystem;

TwoParts split_parts(std::string_view input) {
  size_t at = input.find(kPartSeparator);
  if (at == std::string_view::npos) return {input, {}};
  return {input.substr(0, at), input.substr(at + kPartSeparator.size())};
}

namespace {

// One folder per process, so that parallel fuzzers (libFuzzer -jobs) and tests do not share files.
struct TempFolder {
  fs::path path;
  TempFolder() {
    fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    path = base / ("gerbil-fuzz-" + std::to_string(getpid()));
    fs::create_directories(path);
  }
  ~TempFolder() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

}  // namespace

fs::path write_temp_file(std::string_view name, std::string_view bytes) {
  static TempFolder folder;
  fs::path file = folder.path / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("fuzz: cannot write " + file.string());
  return file;
}

}  // namespace gerbil::fuzz
