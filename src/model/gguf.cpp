#include "model/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "gerbil/error.h"
#include "model/safetensors.h"

namespace gerbil {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kMaxDims = 4;            // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;           // nesting beyond this is refused (a stack-depth guard)
constexpr uint64_t kMinKeyValueBytes = 13;  // key length (8) + type (4) + a one-byte value
constexpr uint64_t kMinTensorInfoBytes = 24;  // name length (8) + n_dims (4) + type (4) + offset (8)

// Bytes one element of a fixed-size value type takes; 0 for strings and arrays.
uint64_t fixed_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::Bool: return 1;
    case GgufValueType::U16:
    case GgufValueType::I16: return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32: return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64: return 8;
    case GgufValueType::String:
    case GgufValueType::Array: return 0;
  }
  return 0;
}

// The fewest bytes one array element of TYPE can take in the file.
uint64_t min_element_bytes(GgufValueType type) {
  if (type == GgufValueType::String) return 8;
  if (type == GgufValueType::Array) return 12;
  return fixed_size(type);
}

// Decodes one packed fixed-size element at P.
GgufValue decode_fixed(GgufValueType type, const std::byte* p) {
  auto load = [p]<typename T>(T) {
    T value;
    std::memcpy(&value, p, sizeof(T));
    return value;
  };
  GgufValue out{type, {}};
  switch (type) {
    case GgufValueType::U8: out.value = uint64_t(load(uint8_t{})); break;
    case GgufValueType::I8: out.value = int64_t(load(int8_t{})); break;
    case GgufValueType::U16: out.value = uint64_t(load(uint16_t{})); break;
    case GgufValueType::I16: out.value = int64_t(load(int16_t{})); break;
    case GgufValueType::U32: out.value = uint64_t(load(uint32_t{})); break;
    case GgufValueType::I32: out.value = int64_t(load(int32_t{})); break;
    case GgufValueType::U64: out.value = load(uint64_t{}); break;
    case GgufValueType::I64: out.value = load(int64_t{}); break;
    case GgufValueType::F32: out.value = double(load(float{})); break;
    case GgufValueType::F64: out.value = load(double{}); break;
    case GgufValueType::Bool: out.value = load(uint8_t{}) != 0; break;
    case GgufValueType::String:
    case GgufValueType::Array: break;
  }
  return out;
}

// VALUE as an int64, or nullopt when it is not an integer or does not fit.
std::optional<int64_t> as_int(const GgufValue& value) {
  if (const auto* u = std::get_if<uint64_t>(&value.value)) {
    if (*u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return int64_t(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&value.value)) return *i;
  return std::nullopt;
}

std::optional<double> as_float(const GgufValue& value) {
  if (const auto* d = std::get_if<double>(&value.value)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&value.value)) return double(*u);
  if (const auto* i = std::get_if<int64_t>(&value.value)) return double(*i);
  return std::nullopt;
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::U8: return "uint8";
    case GgufValueType::I8: return "int8";
    case GgufValueType::U16: return "uint16";
    case GgufValueType::I16: return "int16";
    case GgufValueType::U32: return "uint32";
    case GgufValueType::I32: return "int32";
    case GgufValueType::F32: return "float32";
    case GgufValueType::Bool: return "bool";
    case GgufValueType::String: return "string";
    case GgufValueType::Array: return "array";
    case GgufValueType::U64: return "uint64";
    case GgufValueType::I64: return "int64";
    case GgufValueType::F64: return "float64";
  }
  return "?";
}

// Reads the file front to back with a cursor; every read checks the bytes left first.
class GgufParser {
 public:
  GgufParser(std::span<const std::byte> bytes, Gguf& out) : bytes_(bytes), out_(out) {}

  void run() {
    read_header();
    for (uint64_t i = 0; i < n_kv_; ++i) read_key_value(i);
    read_alignment();
    for (uint64_t i = 0; i < n_tensors_; ++i) read_tensor_info(i);
    place_tensor_data();
  }

 private:
  std::span<const std::byte> bytes_;
  Gguf& out_;
  uint64_t pos_ = 0;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
  std::vector<uint64_t> sizes_;  // byte size of each tensor, in file order

  const std::string& file() const { return out_.name_; }
  uint64_t left() const { return bytes_.size() - pos_; }

  void need(uint64_t n, std::string_view what) const {
    if (n > left())
      fail("{}: {} at byte {} needs {} bytes but the file ends {} bytes later", file(), what, pos_, n, left());
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string_view read_string(std::string_view what) {
    uint64_t length = read<uint64_t>(what);
    if (length > left())
      fail("{}: {}: string length {} at byte {} runs past the end of the file ({} bytes left)", file(), what,
           length, pos_ - 8, left());
    std::string_view text(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return text;
  }

  GgufValueType read_value_type(std::string_view what) {
    uint32_t id = read<uint32_t>(what);
    if (id > uint32_t(GgufValueType::F64))
      fail("{}: {}: unknown value type id {} at byte {}", file(), what, id, pos_ - 4);
    return GgufValueType(id);
  }

  GgufValue read_value(GgufValueType type, const std::string& what, int depth) {
    if (type == GgufValueType::String) return {type, read_string(what)};
    if (type == GgufValueType::Array) return {type, read_array(what, depth)};
    uint64_t size = fixed_size(type);
    need(size, what);
    GgufValue value = decode_fixed(type, bytes_.data() + pos_);
    pos_ += size;
    return value;
  }

  GgufArray read_array(const std::string& what, int depth) {
    if (depth >= kMaxArrayDepth)
      fail("{}: {}: arrays nested more than {} deep at byte {}", file(), what, kMaxArrayDepth, pos_);
    GgufArray array;
    array.element_type = read_value_type(what + " (array element type)");
    array.count = read<uint64_t>(what + " (array length)");
    uint64_t min_bytes = min_element_bytes(array.element_type);
    // Checked before any allocation: a lying count cannot make us reserve or loop for long.
    if (array.count > left() / min_bytes)
      fail("{}: {}: array of {} {} elements at byte {} needs at least {} bytes per element but only {} bytes "
           "are left",
           file(), what, array.count, gguf_value_type_name(array.element_type), pos_ - 12, min_bytes, left());
    if (uint64_t size = fixed_size(array.element_type)) {
      array.packed = bytes_.subspan(pos_, array.count * size);
      pos_ += array.count * size;
      return array;
    }
    array.items.reserve(array.count);
    for (uint64_t i = 0; i < array.count; ++i)
      array.items.push_back(read_value(array.element_type, what + fmt::format("[{}]", i), depth + 1));
    return array;
  }

  void read_header() {
    uint32_t magic = read<uint32_t>("the GGUF magic");
    if (magic != kMagic) fail("{}: not a GGUF file (the first 4 bytes are not \"GGUF\")", file());
    uint32_t version = read<uint32_t>("the GGUF version");
    if (version != 2 && version != 3) {
      if (version != 0 && (version & 0xffff) == 0)
        fail("{}: GGUF version field {:#x} looks byte-swapped: big-endian GGUF files are not supported", file(),
             version);
      fail("{}: GGUF version {} is not supported (versions 2 and 3 are)", file(), version);
    }
    out_.version_ = version;
    n_tensors_ = read<uint64_t>("the tensor count");
    n_kv_ = read<uint64_t>("the metadata count");
    if (n_kv_ > left() / kMinKeyValueBytes)
      fail("{}: the header claims {} metadata entries but only {} bytes follow (each takes at least {})", file(),
           n_kv_, left(), kMinKeyValueBytes);
    if (n_tensors_ > left() / kMinTensorInfoBytes)
      fail("{}: the header claims {} tensors but only {} bytes follow (each tensor info takes at least {})",
           file(), n_tensors_, left(), kMinTensorInfoBytes);
  }

  void read_key_value(uint64_t index) {
    std::string key(read_string(fmt::format("metadata entry {}'s key", index)));
    std::string what = fmt::format("metadata \"{}\"", key);
    if (out_.metadata_.contains(key)) fail("{}: {} appears twice", file(), what);
    GgufValueType type = read_value_type(what);
    out_.metadata_.emplace(key, read_value(type, what, 0));
  }

  void read_alignment() {
    const GgufValue* value = out_.find("general.alignment");
    if (!value) return;
    std::optional<int64_t> alignment = as_int(*value);
    if (!alignment || *alignment <= 0 || !std::has_single_bit(uint64_t(*alignment)) || *alignment > (1 << 30))
      fail("{}: metadata \"general.alignment\" must be a power of two up to 2^30, got {} {}", file(),
           gguf_value_type_name(value->type), alignment ? std::to_string(*alignment) : "(not an integer)");
    out_.alignment_ = uint64_t(*alignment);
  }

  void read_tensor_info(uint64_t index) {
    GgufTensor tensor;
    tensor.name = read_string(fmt::format("tensor info {}'s name", index));
    std::string what = fmt::format("tensor \"{}\"", tensor.name);
    if (out_.tensor_index_.contains(tensor.name)) fail("{}: {} appears twice", file(), what);
    uint32_t n_dims = read<uint32_t>(what + " (dimension count)");
    if (n_dims > kMaxDims) fail("{}: {} has {} dimensions; GGUF allows at most {}", file(), what, n_dims, kMaxDims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = read<uint64_t>(what + " (dimensions)");
      if (dim > uint64_t(std::numeric_limits<int64_t>::max()))
        fail("{}: {}: dimension {} is {}, beyond int64", file(), what, d, dim);
      if (dim != 0 && numel > uint64_t(std::numeric_limits<int64_t>::max()) / dim)
        fail("{}: {}: the element count of dimensions [{}...] overflows int64", file(), what,
             fmt::join(tensor.dims, ", "));
      numel *= dim;
      tensor.dims.push_back(int64_t(dim));
    }
    uint32_t type_id = read<uint32_t>(what + " (type)");
    const GgmlTypeInfo* type = find_ggml_type(type_id);
    if (!type) fail("{}: {} has unknown ggml type id {}", file(), what, type_id);
    tensor.type = type->type;
    uint64_t row_length = n_dims > 0 ? uint64_t(tensor.dims[0]) : 1;  // a scalar is one row of one
    if (row_length % type->block_size != 0)
      fail("{}: {}: row length {} is not a multiple of {}'s block size {}", file(), what, row_length, type->name,
           type->block_size);
    if (numel / type->block_size > std::numeric_limits<uint64_t>::max() / type->block_bytes)
      fail("{}: {}: the byte size of {} elements of {} overflows", file(), what, numel, type->name);
    tensor.offset = read<uint64_t>(what + " (data offset)");
    if (tensor.offset % out_.alignment_ != 0)
      fail("{}: {}: data offset {} is not a multiple of the alignment {}", file(), what, tensor.offset,
           out_.alignment_);
    sizes_.push_back(numel / type->block_size * type->block_bytes);
    out_.tensor_index_.emplace(tensor.name, out_.tensors_.size());
    out_.tensors_.push_back(std::move(tensor));
  }

  // The data section starts at the first multiple of the alignment after the tensor infos. Every
  // tensor must lie inside it, and no two may share bytes.
  void place_tensor_data() {
    uint64_t start = (pos_ + out_.alignment_ - 1) / out_.alignment_ * out_.alignment_;
    out_.data_offset_ = start;
    uint64_t data_size = start < bytes_.size() ? bytes_.size() - start : 0;
    std::vector<const GgufTensor*> by_offset;
    for (std::size_t i = 0; i < out_.tensors_.size(); ++i) {
      GgufTensor& tensor = out_.tensors_[i];
      uint64_t size = sizes_[i];
      if (tensor.offset > data_size || size > data_size - tensor.offset)
        fail("{}: tensor \"{}\": data bytes [{}, {}) of the data section run past the end of the file (the data "
             "section, from byte {}, holds {} bytes)",
             file(), tensor.name, tensor.offset, tensor.offset + size, start, data_size);
      // An empty tensor views nothing: its start may lie past the file's end (the data section's start rounded up).
      tensor.bytes = size == 0 ? std::span<const std::byte>() : bytes_.subspan(start + tensor.offset, size);
      if (size > 0) by_offset.push_back(&tensor);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensor& before = *by_offset[i - 1];
      const GgufTensor& after = *by_offset[i];
      if (after.offset < before.offset + before.bytes.size())
        fail("{}: tensor \"{}\" (data bytes [{}, {})) overlaps tensor \"{}\" (data bytes [{}, {}))", file(),
             after.name, after.offset, after.offset + after.bytes.size(), before.name, before.offset,
             before.offset + before.bytes.size());
    }
  }
};

uint64_t GgufTensor::numel() const {
  uint64_t n = 1;
  for (int64_t dim : dims) n *= uint64_t(dim);
  return n;
}

std::vector<int64_t> GgufTensor::shape() const { return {dims.rbegin(), dims.rend()}; }

Gguf Gguf::parse(std::span<const std::byte> bytes, const std::string& name) {
  Gguf gguf;
  gguf.name_ = name;
  GgufParser(bytes, gguf).run();
  return gguf;
}

Gguf Gguf::open(const std::filesystem::path& path) {
  auto mapping = std::make_shared<const detail::FileMapping>(path);
  Gguf gguf = parse(mapping->bytes(), path.string());
  gguf.mapping_ = std::move(mapping);
  return gguf;
}

const GgufValue* Gguf::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* Gguf::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void wrong_type(const std::string& file, std::string_view key, const GgufValue& value,
                             std::string_view wanted) {
  fail("{}: metadata \"{}\" holds a {}, expected {}", file, key, gguf_value_type_name(value.type), wanted);
}

// The elements of ARRAY as values, decoding packed ones.
std::vector<GgufValue> elements(const GgufArray& array) {
  if (array.items.size() == array.count) return array.items;
  std::vector<GgufValue> out;
  uint64_t size = fixed_size(array.element_type);
  out.reserve(array.count);
  for (uint64_t i = 0; i < array.count; ++i) out.push_back(decode_fixed(array.element_type, &array.packed[i * size]));
  return out;
}

}  // namespace

std::optional<int64_t> Gguf::get_int(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  std::optional<int64_t> result = as_int(*value);
  if (!result) wrong_type(name_, key, *value, "an integer (that fits int64)");
  return result;
}

std::optional<double> Gguf::get_float(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  std::optional<double> result = as_float(*value);
  if (!result) wrong_type(name_, key, *value, "a number");
  return result;
}

std::optional<bool> Gguf::get_bool(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (const bool* b = std::get_if<bool>(&value->value)) return *b;
  wrong_type(name_, key, *value, "a bool");
}

std::optional<std::string_view> Gguf::get_string(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (const auto* s = std::get_if<std::string_view>(&value->value)) return *s;
  wrong_type(name_, key, *value, "a string");
}

int64_t Gguf::require_int(std::string_view key) const {
  if (auto value = get_int(key)) return *value;
  fail("{}: metadata \"{}\" is missing", name_, key);
}

double Gguf::require_float(std::string_view key) const {
  if (auto value = get_float(key)) return *value;
  fail("{}: metadata \"{}\" is missing", name_, key);
}

std::string_view Gguf::require_string(std::string_view key) const {
  if (auto value = get_string(key)) return *value;
  fail("{}: metadata \"{}\" is missing", name_, key);
}

namespace {

template <typename T, typename Convert>
std::optional<std::vector<T>> array_of(const Gguf& gguf, std::string_view key, std::string_view wanted,
                                       Convert convert) {
  const GgufValue* value = gguf.find(key);
  if (!value) return std::nullopt;
  const auto* array = std::get_if<GgufArray>(&value->value);
  if (!array) wrong_type(gguf.name(), key, *value, fmt::format("an array of {}", wanted));
  std::vector<T> out;
  out.reserve(array->count);
  uint64_t index = 0;
  for (const GgufValue& element : elements(*array)) {
    std::optional<T> converted = convert(element);
    if (!converted)
      fail("{}: metadata \"{}\"[{}] holds a {}, expected {}", gguf.name(), key, index,
           gguf_value_type_name(element.type), wanted);
    out.push_back(*converted);
    ++index;
  }
  return out;
}

}  // namespace

std::optional<std::vector<std::string_view>> Gguf::get_strings(std::string_view key) const {
  return array_of<std::string_view>(*this, key, "strings", [](const GgufValue& v) -> std::optional<std::string_view> {
    if (const auto* s = std::get_if<std::string_view>(&v.value)) return *s;
    return std::nullopt;
  });
}

std::optional<std::vector<int64_t>> Gguf::get_ints(std::string_view key) const {
  return array_of<int64_t>(*this, key, "integers", as_int);
}

std::optional<std::vector<double>> Gguf::get_floats(std::string_view key) const {
  return array_of<double>(*this, key, "numbers", as_float);
}

}  // namespace gerbil
