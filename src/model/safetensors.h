// Reading and writing safetensors files (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
// then the tensor bytes. Files are memory-mapped; a TensorView's bytes point into the mapping, which
// lives as long as the Safetensors object that handed it out (or any copy of it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/dtype.h"
#include "model/quant.h"

namespace gerbil {

namespace detail {
// A read-only private mapping of a whole file (also used by the GGUF reader).
struct FileMapping {
  const std::byte* data = nullptr;
  std::size_t size = 0;

  explicit FileMapping(const std::filesystem::path& path);  // throws naming PATH
  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  std::span<const std::byte> bytes() const { return {data, size}; }
};
}  // namespace detail

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
  std::filesystem::path file;  // the file the bytes live in
  // Set for a GGUF tensor kept quantized: `bytes` are ggml blocks of this type, row by row, `shape` the logical
  // [rows, cols] shape, `dtype` ignored.
  std::optional<GgmlType> block_type;

  int64_t numel() const;
};

using TensorMetadata = std::map<std::string, std::string>;

// Every tensor of one model: a single model.safetensors or the shards named by
// model.safetensors.index.json. Copies share the mappings.
class Safetensors {
 public:
  // PATH is a .safetensors file, a .safetensors.index.json file, or a folder holding either
  // model.safetensors.index.json or model.safetensors. Validates every header; throws gerbil::Error
  // naming the file and tensor at fault.
  static Safetensors open(const std::filesystem::path& path);
  // Tensors whose bytes OWNER keeps alive (converted from another format); FILE is where they came from.
  static Safetensors from_memory(std::vector<TensorView> views, std::shared_ptr<const void> owner,
                                 const std::filesystem::path& file);

  const TensorView* find(std::string_view name) const;
  const TensorView& at(std::string_view name) const;  // throws naming the tensor and the files
  const std::map<std::string, TensorView, std::less<>>& tensors() const { return tensors_; }
  std::vector<std::string> names() const;
  // The files read, in order (one, or every shard).
  const std::vector<std::filesystem::path>& files() const { return files_; }
  // __metadata__ of the single file, or "metadata" of the index (stringified values).
  const TensorMetadata& metadata() const { return metadata_; }
  uint64_t total_bytes() const;

 private:
  std::vector<std::shared_ptr<const void>> mappings_;  // file mappings, or what from_memory was given
  std::vector<std::filesystem::path> files_;
  std::map<std::string, TensorView, std::less<>> tensors_;
  TensorMetadata metadata_;
};

// One tensor for write_safetensors. FILL writes the elements [first, first + out.size()/dtype_size)
// of the tensor (row-major) into OUT; the writer calls it on consecutive chunks so that tensors of
// any size stream to disk without being held in memory.
struct TensorSource {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::function<void(uint64_t first, std::span<std::byte> out)> fill;

  uint64_t byte_size() const;
};

// A TensorSource that copies BYTES (which must outlive the write).
TensorSource tensor_from_bytes(std::string name, DType dtype, std::vector<int64_t> shape,
                               std::span<const std::byte> bytes);

// Writes one safetensors file holding TENSORS in the given order, with METADATA as __metadata__.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSource>& tensors,
                       const TensorMetadata& metadata = {{"format", "pt"}});

}  // namespace gerbil
