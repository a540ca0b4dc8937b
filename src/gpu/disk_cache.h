// gerbil's folder of things worth keeping between runs (compiled pipelines, per-adapter tuning), and a
// key-value store of files in it that Dawn's blob cache writes compiled shaders and pipelines to.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gerbil::gpu {

// $GERBIL_CACHE_DIR (tests point it at a temporary folder), else $XDG_CACHE_HOME/gerbil, else
// ~/.cache/gerbil. Empty where none is set, or where GERBIL_CACHE_DIR is set to "off": nothing is cached.
std::filesystem::path cache_dir();

// Blobs by key, one file each under `folder` (named by the key's hash; the file also holds the key, so a
// hash collision reads as a miss). Best effort: a folder that cannot be written, or a short or foreign file,
// is a miss, never an error: a cache only saves time. Safe to call from several threads at once (Dawn stores
// from its compile threads): a blob is written to a file of its own and renamed into place.
class DiskCache {
 public:
  explicit DiskCache(std::filesystem::path folder);
  const std::filesystem::path& folder() const { return folder_; }
  std::optional<std::vector<std::byte>> load(std::span<const std::byte> key) const;
  void store(std::span<const std::byte> key, std::span<const std::byte> value) const;

 private:
  std::filesystem::path file_of(std::span<const std::byte> key) const;
  std::filesystem::path folder_;
};

}  // namespace gerbil::gpu
