// A main() for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput on every file named on
// the command line, or found (recursively) in the folders named there. CTest runs it on each target's
// seeds and kept regression inputs, so every build checks that no input that once crashed crashes again.
// A folder that does not exist is skipped (a target may have no regression inputs yet).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputs_in(const fs::path& path) {
  std::vector<fs::path> files;
  if (fs::is_regular_file(path)) files.push_back(path);
  if (fs::is_directory(path))
    for (const auto& entry : fs::recursive_directory_iterator(path))
      if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());  // a stable order, so a failure reproduces the same way
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    for (const fs::path& file : inputs_in(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "cannot read %s\n", file.c_str());
        return 1;
      }
      std::fprintf(stderr, "replaying %s\n", file.c_str());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  std::printf("replayed %zu inputs without a crash\n", replayed);
  return replayed > 0 ? 0 : 1;  // no input at all means the paths are wrong, not that all is well
}
