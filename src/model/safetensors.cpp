#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "gerbil/error.h"
#include "json/json_file.h"

namespace gerbil {

namespace fs = std::filesystem;
using nlohmann::json;

detail::FileMapping::FileMapping(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open {}: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail("cannot stat {}: {}", path.string(), std::strerror(err));
  }
  size = std::size_t(st.st_size);
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) fail("cannot memory-map {}: {}", path.string(), std::strerror(err));
    data = static_cast<const std::byte*>(p);
  } else {
    ::close(fd);
  }
}

detail::FileMapping::~FileMapping() {
  if (data) ::munmap(const_cast<std::byte*>(data), size);
}

namespace {

// The reference implementation refuses headers above 100 MB; so do we, before allocating anything.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr std::string_view kMetadataKey = "__metadata__";

uint64_t read_u64_le(const std::byte* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | uint64_t(p[i]);
  return value;
}

std::string metadata_value(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

TensorMetadata parse_metadata(const json& object, const fs::path& file, std::string_view field) {
  if (object.is_null()) return {};
  if (!object.is_object()) fail("{}: \"{}\" is not a JSON object", file.string(), field);
  TensorMetadata metadata;
  for (const auto& [key, value] : object.items()) metadata[key] = metadata_value(value);
  return metadata;
}

uint64_t json_u64(const json& value, const fs::path& file, const std::string& tensor,
                  std::string_view field) {
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
    fail("{}: tensor \"{}\": {} must hold non-negative integers, got {}", file.string(), tensor, field,
         value.dump());
  return value.get<uint64_t>();
}

// Product of SHAPE times ELEMENT_SIZE, or an error naming the tensor if the product of its non-zero
// dimensions times ELEMENT_SIZE passes 2^63 - 1: then every partial product, in any order (numel(), the
// loaders' rows times columns), fits int64_t, even where a zero dimension makes the tensor empty.
uint64_t byte_size_of(const std::vector<int64_t>& shape, std::size_t element_size, const fs::path& file,
                      const std::string& tensor) {
  constexpr uint64_t kLimit = uint64_t(std::numeric_limits<int64_t>::max());
  uint64_t bytes = element_size;
  bool empty = false;
  for (int64_t dim : shape) {
    if (dim == 0) {
      empty = true;
      continue;
    }
    if (bytes > kLimit / uint64_t(dim))
      fail("{}: tensor \"{}\": shape [{}] has more than 2^63 bytes", file.string(), tensor, fmt::join(shape, ", "));
    bytes *= uint64_t(dim);
  }
  return empty ? 0 : bytes;
}

struct Entry {
  TensorView view;
  uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& name, const json& spec, const fs::path& file, uint64_t data_size) {
  if (!spec.is_object()) fail("{}: tensor \"{}\": header entry is not a JSON object", file.string(), name);
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!spec.contains(field))
      fail("{}: tensor \"{}\": header entry has no \"{}\"", file.string(), name, field);
  Entry entry;
  entry.view.name = name;
  entry.view.file = file;
  const json& dtype = spec["dtype"];
  if (!dtype.is_string() || !parse_dtype(dtype.get<std::string>(), entry.view.dtype))
    fail("{}: tensor \"{}\": unknown dtype {}", file.string(), name, dtype.dump());
  const json& shape = spec["shape"];
  if (!shape.is_array()) fail("{}: tensor \"{}\": shape is not an array", file.string(), name);
  for (const json& dim : shape) {
    uint64_t size = json_u64(dim, file, name, "shape");
    if (size > uint64_t(std::numeric_limits<int64_t>::max()))
      fail("{}: tensor \"{}\": shape dimension {} is 2^63 or more", file.string(), name, size);
    entry.view.shape.push_back(int64_t(size));
  }
  const json& offsets = spec["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    fail("{}: tensor \"{}\": data_offsets must be [begin, end]", file.string(), name);
  entry.begin = json_u64(offsets[0], file, name, "data_offsets");
  entry.end = json_u64(offsets[1], file, name, "data_offsets");
  if (entry.begin > entry.end || entry.end > data_size)
    fail("{}: tensor \"{}\": data_offsets [{}, {}] lie outside the data section of {} bytes", file.string(),
         name, entry.begin, entry.end, data_size);
  uint64_t expected = byte_size_of(entry.view.shape, dtype_size(entry.view.dtype), file, name);
  if (entry.end - entry.begin != expected)
    fail("{}: tensor \"{}\": data_offsets span {} bytes but shape [{}] of {} needs {}", file.string(), name,
         entry.end - entry.begin, fmt::join(entry.view.shape, ", "), dtype_name(entry.view.dtype), expected);
  return entry;
}

// Tensors must tile the data section exactly: no overlap, no gap, nothing after the last one.
void check_coverage(std::vector<Entry>& entries, const fs::path& file, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const std::string* previous = nullptr;
  for (const Entry& entry : entries) {
    if (entry.begin < cursor)
      fail("{}: tensor \"{}\" (bytes {}..{}) overlaps tensor \"{}\"", file.string(), entry.view.name,
           entry.begin, entry.end, previous ? *previous : "");
    if (entry.begin > cursor)
      fail("{}: bytes {}..{} of the data section belong to no tensor (gap before tensor \"{}\")",
           file.string(), cursor, entry.begin, entry.view.name);
    cursor = entry.end;
    previous = &entry.view.name;
  }
  if (cursor != data_size)
    fail("{}: the data section has {} bytes but the tensors cover only {}", file.string(), data_size, cursor);
}

struct ParsedFile {
  std::shared_ptr<const detail::FileMapping> mapping;
  std::vector<TensorView> tensors;
  TensorMetadata metadata;
};

ParsedFile parse_file(const fs::path& file) {
  auto mapping = std::make_shared<const detail::FileMapping>(file);
  if (mapping->size < 8)
    fail("{}: file is {} bytes, too short for a safetensors header", file.string(), mapping->size);
  uint64_t header_size = read_u64_le(mapping->data);
  if (header_size > mapping->size - 8)
    fail("{}: header length {} runs past the end of the file ({} bytes)", file.string(), header_size,
         mapping->size);
  if (header_size > kMaxHeaderBytes)
    fail("{}: header length {} exceeds the {} byte limit", file.string(), header_size, kMaxHeaderBytes);
  std::string_view header(reinterpret_cast<const char*>(mapping->data + 8), header_size);
  json doc = parse_json_strict(header, file, "the header");
  if (!doc.is_object()) fail("{}: the header is not a JSON object", file.string());

  const std::byte* data = mapping->data + 8 + header_size;
  uint64_t data_size = mapping->size - 8 - header_size;
  ParsedFile parsed;
  std::vector<Entry> entries;
  for (const auto& [name, spec] : doc.items()) {
    if (name == kMetadataKey) {
      parsed.metadata = parse_metadata(spec, file, kMetadataKey);
      continue;
    }
    entries.push_back(parse_entry(name, spec, file, data_size));
  }
  check_coverage(entries, file, data_size);
  for (Entry& entry : entries) {
    entry.view.bytes = std::span<const std::byte>(data + entry.begin, entry.end - entry.begin);
    parsed.tensors.push_back(std::move(entry.view));
  }
  parsed.mapping = std::move(mapping);
  return parsed;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

std::vector<float> tensor_floats(const TensorView& view) {
  std::vector<float> values(std::size_t(view.numel()));
  if (view.block_type)
    dequantize(*view.block_type, view.bytes, values, fmt::format("{}: tensor \"{}\"", view.file.string(), view.name));
  else
    convert_to_f32(view.dtype, view.bytes, values);
  return values;
}

Safetensors Safetensors::open(const fs::path& path) {
  fs::path index, single;
  if (fs::is_directory(path)) {
    if (fs::exists(path / "model.safetensors.index.json"))
      index = path / "model.safetensors.index.json";
    else if (fs::exists(path / "model.safetensors"))
      single = path / "model.safetensors";
    else
      fail("{}: no model.safetensors or model.safetensors.index.json in this folder", path.string());
  } else if (path.string().ends_with(".index.json")) {
    index = path;
  } else {
    single = path;
  }

  Safetensors result;
  auto add = [&result](ParsedFile parsed, const fs::path& file) {
    result.mappings_.push_back(parsed.mapping);
    result.files_.push_back(file);
    for (auto& view : parsed.tensors) {
      std::string name = view.name;
      result.tensors_.emplace(std::move(name), std::move(view));
    }
    return parsed.metadata;
  };

  if (index.empty()) {
    result.metadata_ = add(parse_file(single), single);
    return result;
  }

  json doc = read_json_file(index);
  if (!doc.is_object() || !doc.contains("weight_map") || !doc["weight_map"].is_object())
    fail("{}: no \"weight_map\" object", index.string());
  result.metadata_ = parse_metadata(doc.value("metadata", json()), index, "metadata");

  std::map<std::string, std::string> shard_of;  // tensor -> shard file name
  std::set<std::string> shards;                 // sorted, so model-00001-of-... comes first
  for (const auto& [tensor, shard] : doc["weight_map"].items()) {
    if (!shard.is_string())
      fail("{}: weight_map entry for \"{}\" is not a file name", index.string(), tensor);
    shard_of[tensor] = shard.get<std::string>();
    shards.insert(shard_of[tensor]);
  }
  for (const std::string& shard : shards) {
    fs::path file = index.parent_path() / shard;
    if (!fs::exists(file))
      fail("{}: shard {} does not exist (expected at {})", index.string(), shard, file.string());
    ParsedFile parsed = parse_file(file);
    for (const TensorView& view : parsed.tensors) {
      auto it = shard_of.find(view.name);
      if (it == shard_of.end())
        fail("{}: tensor \"{}\" is not listed in {}", file.string(), view.name, index.string());
      if (it->second != shard)
        fail("{}: tensor \"{}\" is mapped to {} by {}", file.string(), view.name, it->second, index.string());
    }
    add(std::move(parsed), file);
  }
  for (const auto& [tensor, shard] : shard_of)
    if (!result.tensors_.contains(tensor))
      fail("{}: tensor \"{}\" is mapped to {} but that file has no such tensor", index.string(), tensor,
           shard);
  return result;
}

Safetensors Safetensors::from_memory(std::vector<TensorView> views, std::shared_ptr<const void> owner,
                                     const fs::path& file) {
  Safetensors result;
  result.mappings_.push_back(std::move(owner));
  result.files_.push_back(file);
  for (TensorView& view : views) {
    std::string name = view.name;
    if (result.tensors_.contains(name)) fail("{}: tensor \"{}\" given twice", file.string(), name);
    result.tensors_.emplace(std::move(name), std::move(view));
  }
  return result;
}

const TensorView* Safetensors::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorView& Safetensors::at(std::string_view name) const {
  if (const TensorView* view = find(name)) return *view;
  std::vector<std::string> files;
  for (const auto& file : files_) files.push_back(file.string());
  fail("tensor \"{}\" not found in {}", name, fmt::join(files, ", "));
}

std::vector<std::string> Safetensors::names() const {
  std::vector<std::string> result;
  for (const auto& [name, view] : tensors_) result.push_back(name);
  return result;
}

uint64_t Safetensors::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, view] : tensors_) total += view.bytes.size();
  return total;
}

// --- writing ---------------------------------------------------------------------------------------

uint64_t TensorSource::byte_size() const {
  return byte_size_of(shape, dtype_size(dtype), fs::path("<writer>"), name);
}

TensorSource tensor_from_bytes(std::string name, DType dtype, std::vector<int64_t> shape,
                               std::span<const std::byte> bytes) {
  TensorSource source{std::move(name), dtype, std::move(shape), nullptr};
  if (bytes.size() != source.byte_size())
    fail("tensor \"{}\": {} bytes given for shape [{}] of {}", source.name, bytes.size(),
         fmt::join(source.shape, ", "), dtype_name(dtype));
  std::size_t element = dtype_size(dtype);
  source.fill = [bytes, element](uint64_t first, std::span<std::byte> out) {
    std::memcpy(out.data(), bytes.data() + first * element, out.size());
  };
  return source;
}

void write_safetensors(const fs::path& path, const std::vector<TensorSource>& tensors,
                       const TensorMetadata& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  uint64_t offset = 0;
  for (const TensorSource& tensor : tensors) {
    if (tensor.name == kMetadataKey || header.contains(tensor.name))
      fail("{}: cannot write tensor \"{}\" twice", path.string(), tensor.name);
    if (!tensor.fill) fail("{}: tensor \"{}\" has no data source", path.string(), tensor.name);
    for (int64_t dim : tensor.shape)
      if (dim < 0) fail("{}: tensor \"{}\" has a negative dimension", path.string(), tensor.name);
    uint64_t size = tensor.byte_size();
    header[tensor.name] = {{"dtype", dtype_name(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // pad so the data section starts 8-byte aligned

  // Write beside the target and rename at the end, so an interrupted write leaves no valid-looking file.
  fs::path partial = path;
  partial += ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot create {}: {}", partial.string(), std::strerror(errno));
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(length), 8);
  out.write(text.data(), std::streamsize(text.size()));

  constexpr uint64_t kChunkBytes = 16ull << 20;
  std::vector<std::byte> chunk;
  for (const TensorSource& tensor : tensors) {
    uint64_t element = dtype_size(tensor.dtype);
    uint64_t count = tensor.byte_size() / element;
    uint64_t per_chunk = kChunkBytes / element;
    for (uint64_t first = 0; first < count; first += per_chunk) {
      uint64_t n = std::min(per_chunk, count - first);
      chunk.resize(n * element);
      tensor.fill(first, chunk);
      out.write(reinterpret_cast<const char*>(chunk.data()), std::streamsize(chunk.size()));
    }
  }
  out.close();
  if (!out) fail("cannot write {}: {}", partial.string(), std::strerror(errno));
  std::error_code ec;
  fs::rename(partial, path, ec);
  if (ec) fail("cannot rename {} to {}: {}", partial.string(), path.string(), ec.message());
}

}  // namespace gerbil
