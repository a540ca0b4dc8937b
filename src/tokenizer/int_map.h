// An open-addressing hash map from 64-bit keys to small values (BPE merges by id pair, character
// bigrams): one flat array, Fibonacci hashing, linear probing. The key ~0 is reserved.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace gerbil::tok {

template <typename Value>
class IntMap {
 public:
  static constexpr uint64_t kEmpty = ~0ull;

  size_t size() const { return size_; }

  void reserve(size_t count) {
    if (keys_.size() < count * 2) rehash(count * 2);
  }

  // Inserts key -> value, or overwrites the value when key is present.
  void insert_or_assign(uint64_t key, Value value) {
    if ((size_ + 1) * 2 > keys_.size()) rehash(keys_.empty() ? 16 : keys_.size() * 2);
    size_t i = slot(key);
    if (keys_[i] == kEmpty) ++size_;
    keys_[i] = key;
    values_[i] = value;
  }

  const Value* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    size_t i = slot(key);
    return keys_[i] == key ? &values_[i] : nullptr;
  }
  bool contains(uint64_t key) const { return find(key) != nullptr; }

 private:
  size_t slot(uint64_t key) const {
    size_t i = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    while (keys_[i] != key && keys_[i] != kEmpty) i = (i + 1) & (keys_.size() - 1);
    return i;
  }

  void rehash(size_t min_slots) {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<Value> values = std::move(values_);
    size_t slots = std::bit_ceil(std::max<size_t>(min_slots, 16));
    keys_.assign(slots, kEmpty);
    values_.assign(slots, Value{});
    shift_ = 64 - std::countr_zero(slots);
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != kEmpty) insert_or_assign(keys[i], values[i]);
  }

  std::vector<uint64_t> keys_;
  std::vector<Value> values_;
  size_t size_ = 0;
  int shift_ = 64;
};

}  // namespace gerbil::tok
