// A small GGUF writer for tests: builds files from fixture weights (so tests need no download) and, through
// GgufBytes, byte-level pieces for malformed files the writer itself would never produce.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::test {

// Little-endian GGUF primitives appended to a byte string.
struct GgufBytes {
  std::string data;

  GgufBytes& u8(uint8_t v);
  GgufBytes& u32(uint32_t v);
  GgufBytes& u64(uint64_t v);
  GgufBytes& f32(float v);
  GgufBytes& f64(double v);
  GgufBytes& str(std::string_view s);  // u64 length + bytes
  GgufBytes& raw(std::string_view bytes);
};

// GGUF metadata value type ids (gguf_metadata_value_type).
enum GgufTypeId : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9,
  kU64 = 10, kI64 = 11, kF64 = 12,
};

class GgufWriter {
 public:
  // Metadata, written in the order added. VALUE is the encoded value (without its type id).
  void add_raw(std::string key, uint32_t type, std::string value);
  void add_u32(std::string key, uint32_t v);
  void add_i32(std::string key, int32_t v);
  void add_u64(std::string key, uint64_t v);
  void add_f32(std::string key, float v);
  void add_bool(std::string key, bool v);
  void add_string(std::string key, std::string_view v);
  void add_strings(std::string key, const std::vector<std::string>& v);
  void add_f32s(std::string key, const std::vector<float>& v);
  void add_i32s(std::string key, const std::vector<int32_t>& v);

  // A tensor of ggml type TYPE with DIMS fastest-first (dims[0] is the row length) and its encoded BYTES.
  // OFFSET overrides where its data goes (from the data section's start); by default tensors follow one
  // another, each padded to the alignment.
  void add_tensor(std::string name, uint32_t type, std::vector<uint64_t> dims, std::string bytes,
                  uint64_t offset = UINT64_MAX);

  uint64_t alignment = 32;  // padding used for the data section; set general.alignment to match
  uint32_t version = 3;

  std::string bytes() const;
  void write(const std::filesystem::path& path) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> dims;
    std::string bytes;
    uint64_t offset;
  };
  std::vector<std::string> metadata_;  // encoded key + type + value
  std::vector<Tensor> tensors_;
};

std::string bytes_of(std::span<const float> values);

}  // namespace gerbil::test
