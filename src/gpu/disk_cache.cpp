#include "gpu/disk_cache.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace gerbil::gpu {
namespace {

// A blob file: the key's size (8 bytes, little-endian as written on this machine), the key, then the value.
constexpr size_t kHeaderBytes = sizeof(uint64_t);

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::filesystem::path cache_dir() {
  if (std::string own = env("GERBIL_CACHE_DIR"); !own.empty()) return own == "off" ? "" : own;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return std::filesystem::path(xdg) / "gerbil";
  if (std::string home = env("HOME"); !home.empty()) return std::filesystem::path(home) / ".cache" / "gerbil";
  return {};
}

DiskCache::DiskCache(std::filesystem::path folder) : folder_(std::move(folder)) {}

std::filesystem::path DiskCache::file_of(std::span<const std::byte> key) const {
  XXH128_hash_t hash = XXH3_128bits(key.data(), key.size());
  return folder_ / fmt::format("{:016x}{:016x}.blob", hash.high64, hash.low64);
}

std::optional<std::vector<std::byte>> DiskCache::load(std::span<const std::byte> key) const {
  std::ifstream in(file_of(key), std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t key_size = 0;
  if (bytes.size() < kHeaderBytes) return std::nullopt;
  std::memcpy(&key_size, bytes.data(), kHeaderBytes);
  if (key_size != key.size() || bytes.size() < kHeaderBytes + key_size ||
      std::memcmp(bytes.data() + kHeaderBytes, key.data(), key.size()) != 0)
    return std::nullopt;
  auto value = std::as_bytes(std::span(bytes)).subspan(kHeaderBytes + key_size);
  return std::vector<std::byte>(value.begin(), value.end());
}

void DiskCache::store(std::span<const std::byte> key, std::span<const std::byte> value) const {
  static std::atomic<uint64_t> writes{0};
  std::error_code error;
  std::filesystem::create_directories(folder_, error);
  if (error) return;
  std::filesystem::path target = file_of(key);
  std::filesystem::path temporary =
      target.string() + fmt::format(".{}-{}.tmp", std::hash<std::thread::id>{}(std::this_thread::get_id()), writes++);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    uint64_t key_size = key.size();
    out.write(reinterpret_cast<const char*>(&key_size), kHeaderBytes);
    out.write(reinterpret_cast<const char*>(key.data()), std::streamsize(key.size()));
    out.write(reinterpret_cast<const char*>(value.data()), std::streamsize(value.size()));
    if (!out) {
      out.close();
      std::filesystem::remove(temporary, error);
      return;
    }
  }
  std::filesystem::rename(temporary, target, error);
  if (error) std::filesystem::remove(temporary, error);
}

}  // namespace gerbil::gpu
