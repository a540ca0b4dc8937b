// A hash map from strings to small values, for vocabularies of a few hundred thousand tokens: keys
// live back to back in one buffer and the table is open-addressed, so a lookup touches two or three
// cache lines and a load makes no allocation per token. Lookups take a string_view.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::tok {

uint64_t hash_string(std::string_view text);

template <typename Value>
class StringMap {
 public:
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  void reserve(size_t count) {
    entries_.reserve(count);
    if (table_.size() < count * 2) rehash(count * 2);
  }

  // Inserts key -> value, or overwrites the value when key is present.
  void insert_or_assign(std::string_view key, Value value) {
    if ((entries_.size() + 1) * 2 > table_.size()) rehash(std::max<size_t>(16, table_.size() * 2));
    uint64_t hash = hash_string(key);
    size_t slot = find_slot(key, hash);
    if (table_[slot] != 0) {
      entries_[table_[slot] - 1].value = value;
      return;
    }
    entries_.push_back({static_cast<uint64_t>(keys_.size()), static_cast<uint32_t>(key.size()),
                        static_cast<uint32_t>(hash), value});
    keys_.append(key);
    table_[slot] = static_cast<uint32_t>(entries_.size());
  }

  const Value* find(std::string_view key) const {
    if (table_.empty()) return nullptr;
    uint32_t index = table_[find_slot(key, hash_string(key))];
    return index ? &entries_[index - 1].value : nullptr;
  }
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // Calls fn(key, value) for every entry, in insertion order.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const Entry& entry : entries_) fn(key_of(entry), entry.value);
  }

 private:
  struct Entry {
    uint64_t offset;  // of the key in keys_
    uint32_t length;
    uint32_t hash_low;  // compared before the key itself
    Value value;
  };

  std::string_view key_of(const Entry& entry) const {
    return std::string_view(keys_).substr(entry.offset, entry.length);
  }

  // The slot holding key, or the empty slot where it would go.
  size_t find_slot(std::string_view key, uint64_t hash) const {
    size_t mask = table_.size() - 1;
    for (size_t slot = (hash >> 32) & mask;; slot = (slot + 1) & mask) {
      uint32_t index = table_[slot];
      if (index == 0) return slot;
      const Entry& entry = entries_[index - 1];
      if (entry.hash_low == static_cast<uint32_t>(hash) && key_of(entry) == key) return slot;
    }
  }

  void rehash(size_t min_slots) {
    size_t slots = 16;
    while (slots < min_slots) slots *= 2;
    table_.assign(slots, 0);
    for (size_t i = 0; i < entries_.size(); ++i) {
      uint64_t hash = hash_string(key_of(entries_[i]));
      size_t slot = (hash >> 32) & (slots - 1);
      while (table_[slot] != 0) slot = (slot + 1) & (slots - 1);
      table_[slot] = static_cast<uint32_t>(i + 1);
    }
  }

  std::string keys_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> table_;  // 1 + index into entries_, 0 for an empty slot
};

}  // namespace gerbil::tok
