#include "support/gguf_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace gerbil::test {

namespace {

template <typename T>
void append(std::string& out, T value) {
  char buffer[sizeof(T)];
  std::memcpy(buffer, &value, sizeof(T));
  out.append(buffer, sizeof(T));
}

// Tensors placed beyond this (tests of lying offsets) are written without their data.
constexpr uint64_t kMaxDataBytes = 1ull << 30;

uint64_t padded(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

GgufBytes& GgufBytes::u8(uint8_t v) { return append(data, v), *this; }
GgufBytes& GgufBytes::u32(uint32_t v) { return append(data, v), *this; }
GgufBytes& GgufBytes::u64(uint64_t v) { return append(data, v), *this; }
GgufBytes& GgufBytes::f32(float v) { return append(data, v), *this; }
GgufBytes& GgufBytes::f64(double v) { return append(data, v), *this; }
GgufBytes& GgufBytes::str(std::string_view s) {
  u64(s.size());
  data.append(s);
  return *this;
}
GgufBytes& GgufBytes::raw(std::string_view bytes) {
  data.append(bytes);
  return *this;
}

void GgufWriter::add_raw(std::string key, uint32_t type, std::string value) {
  metadata_.push_back(GgufBytes().str(key).u32(type).raw(value).data);
}
void GgufWriter::add_u32(std::string key, uint32_t v) { add_raw(std::move(key), kU32, GgufBytes().u32(v).data); }
void GgufWriter::add_i32(std::string key, int32_t v) { add_raw(std::move(key), kI32, GgufBytes().u32(uint32_t(v)).data); }
void GgufWriter::add_u64(std::string key, uint64_t v) { add_raw(std::move(key), kU64, GgufBytes().u64(v).data); }
void GgufWriter::add_f32(std::string key, float v) { add_raw(std::move(key), kF32, GgufBytes().f32(v).data); }
void GgufWriter::add_bool(std::string key, bool v) { add_raw(std::move(key), kBool, GgufBytes().u8(v).data); }
void GgufWriter::add_string(std::string key, std::string_view v) {
  add_raw(std::move(key), kString, GgufBytes().str(v).data);
}
void GgufWriter::add_strings(std::string key, const std::vector<std::string>& v) {
  GgufBytes value;
  value.u32(kString).u64(v.size());
  for (const std::string& s : v) value.str(s);
  add_raw(std::move(key), kArray, value.data);
}
void GgufWriter::add_f32s(std::string key, const std::vector<float>& v) {
  GgufBytes value;
  value.u32(kF32).u64(v.size());
  for (float x : v) value.f32(x);
  add_raw(std::move(key), kArray, value.data);
}
void GgufWriter::add_i32s(std::string key, const std::vector<int32_t>& v) {
  GgufBytes value;
  value.u32(kI32).u64(v.size());
  for (int32_t x : v) value.u32(uint32_t(x));
  add_raw(std::move(key), kArray, value.data);
}

void GgufWriter::add_tensor(std::string name, uint32_t type, std::vector<uint64_t> dims, std::string bytes,
                            uint64_t offset) {
  tensors_.push_back({std::move(name), type, std::move(dims), std::move(bytes), offset});
}

std::string GgufWriter::bytes() const {
  GgufBytes out;
  out.raw("GGUF").u32(version).u64(tensors_.size()).u64(metadata_.size());
  for (const std::string& kv : metadata_) out.raw(kv);
  // Offsets: given ones as they are, the rest packed one after another.
  std::vector<uint64_t> offsets;
  uint64_t next = 0;
  for (const Tensor& t : tensors_) {
    uint64_t offset = t.offset == UINT64_MAX ? next : t.offset;
    offsets.push_back(offset);
    next = padded(std::max(next, offset + t.bytes.size()), alignment);
  }
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    out.str(t.name).u32(uint32_t(t.dims.size()));
    for (uint64_t d : t.dims) out.u64(d);
    out.u32(t.type).u64(offsets[i]);
  }
  std::string file = out.data;
  file.resize(padded(file.size(), alignment), '\0');
  std::string data;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const std::string& b = tensors_[i].bytes;
    if (offsets[i] > kMaxDataBytes) continue;  // a lying offset: its data goes nowhere
    if (offsets[i] + b.size() > data.size()) data.resize(padded(offsets[i] + b.size(), alignment), '\0');
    data.replace(offsets[i], b.size(), b);
  }
  return file + data;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string b = bytes();
  out.write(b.data(), std::streamsize(b.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string bytes_of(std::span<const float> values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)};
}

}  // namespace gerbil::test
