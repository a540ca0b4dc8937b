// Reading GGUF files (llama.cpp's single-file model format, versions 2 and 3, little-endian): the magic
// "GGUF", a version, the tensor and metadata counts, the metadata (typed key/value pairs, arrays
// nestable), the tensor infos (name, dims fastest-first, ggml type, offset), then the tensor data from
// an offset rounded up to `general.alignment` (32 by default). The file is memory-mapped; strings,
// arrays and tensor bytes point into the mapping, which lives as long as the Gguf object (or a copy).
// Every count, length and offset is checked against the bytes there are before it is used, so a
// truncated or lying file gives an error naming the key or tensor, never a crash or a huge allocation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "model/quant.h"

namespace gerbil {

namespace detail {
struct FileMapping;
}

enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

std::string_view gguf_value_type_name(GgufValueType type);

struct GgufValue;

// An array value. Elements of a fixed-size type stay packed in the file (`packed`, count * size bytes);
// strings and nested arrays are parsed into `items`.
struct GgufArray {
  GgufValueType element_type = GgufValueType::U8;
  uint64_t count = 0;
  std::span<const std::byte> packed;
  std::vector<GgufValue> items;
};

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  // Unsigned integers as uint64_t, signed as int64_t, floats as double, then bool, string, array.
  std::variant<uint64_t, int64_t, double, bool, std::string_view, GgufArray> value;
};

struct GgufTensor {
  std::string_view name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> dims;  // as stored: dims[0] is the row length (fastest-varying)
  uint64_t offset = 0;        // from the start of the data section
  std::span<const std::byte> bytes;

  uint64_t numel() const;
  // Row-major shape, slowest first (the reverse of dims): what safetensors and PyTorch would call it.
  std::vector<int64_t> shape() const;
};

class Gguf {
 public:
  // Maps and parses PATH; throws gerbil::Error naming the file and the key or tensor at fault.
  static Gguf open(const std::filesystem::path& path);
  // Parses BYTES, which must outlive the result; NAME stands for the file in errors (fuzzing, tests).
  static Gguf parse(std::span<const std::byte> bytes, const std::string& name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts in the file

  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  // Typed reads of metadata: throw naming the key when it is absent (the non-optional forms) or holds
  // another type. Integer reads accept any integer type whose value fits; float reads any number.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string_view> get_string(std::string_view key) const;
  int64_t require_int(std::string_view key) const;
  double require_float(std::string_view key) const;
  std::string_view require_string(std::string_view key) const;
  // Arrays: empty optional when absent; throws when the key holds something else or an element does.
  std::optional<std::vector<std::string_view>> get_strings(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_ints(std::string_view key) const;
  std::optional<std::vector<double>> get_floats(std::string_view key) const;

  // Tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

 private:
  std::shared_ptr<const detail::FileMapping> mapping_;  // null when parsed from caller's bytes
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;  // GGUF's default when "general.alignment" is absent
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string_view, std::size_t, std::less<>> tensor_index_;

  friend class GgufParser;
};

}  // namespace gerbil
