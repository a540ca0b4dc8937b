// Helpers shared by the model tests (tests/test_model*.cpp): scratch folders, raw file writing, the
// fixture manifest, and copying a fixture model with edits to make bad inputs.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "model/dtype.h"
#include "model/safetensors.h"
#include "support/paths.h"

namespace gerbil::test {

// A fresh folder under the system temp dir, removed with everything in it when the object dies.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("gerbil-model-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline void write_json_file(const std::filesystem::path& path, const nlohmann::json& doc) {
  write_file(path, doc.dump(1));
}

// A safetensors file from a raw header text and data section, for headers the writer would refuse.
inline void write_raw_safetensors(const std::filesystem::path& path, const std::string& header,
                                  const std::string& data, uint64_t declared_length = UINT64_MAX) {
  uint64_t length = declared_length == UINT64_MAX ? header.size() : declared_length;
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[std::size_t(i)] = char((length >> (8 * i)) & 0xff);
  write_file(path, bytes + header + data);
}

inline const nlohmann::json& manifest() {
  static const nlohmann::json doc = nlohmann::json::parse(read_text(fixtures_dir() / "manifest.json"));
  return doc;
}

inline const nlohmann::json& manifest_model(const std::string& name) {
  for (const auto& model : manifest()["models"])
    if (model["name"] == name) return model;
  throw std::runtime_error("no model " + name + " in manifest.json");
}

// Copies fixture model FIXTURE into DIR: config.json (passed through EDIT_CONFIG) and model.safetensors
// (its tensors, in file order, passed through EDIT_TENSORS before writing).
inline void copy_fixture(const std::string& fixture, const std::filesystem::path& dir,
                         const std::function<void(std::vector<TensorSource>&)>& edit_tensors = {},
                         const std::function<void(nlohmann::json&)>& edit_config = {}) {
  std::filesystem::path source = fixtures_dir() / fixture;
  nlohmann::json config = nlohmann::json::parse(read_text(source / "config.json"));
  if (edit_config) edit_config(config);
  write_json_file(dir / "config.json", config);
  Safetensors tensors = Safetensors::open(source / "model.safetensors");
  std::vector<TensorSource> sources;
  for (const auto& [name, view] : tensors.tensors())
    sources.push_back(tensor_from_bytes(name, view.dtype, view.shape, view.bytes));
  if (edit_tensors) edit_tensors(sources);
  write_safetensors(dir / "model.safetensors", sources);
}

// Runs FN, which must throw gerbil::Error, and returns the message.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected gerbil::Error";
  return "";
}

// A tensor's values as f32, whatever its float dtype or ggml block type.
inline std::vector<float> floats_of(const TensorView& view) { return tensor_floats(view); }

}  // namespace gerbil::test
