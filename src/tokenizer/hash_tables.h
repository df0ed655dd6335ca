// Open-addressing hash tables for vocabularies (string -> id) and merges (id pair -> rank).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specd::tok {

// A fast 64-bit hash of a byte string (multiply-xorshift over 8-byte words).
inline uint64_t hash_bytes(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (s.size() * kMul);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    h = (h ^ word) * kMul;
    h ^= h >> 29;
  }
  if (i < s.size()) {
    uint64_t word = 0;
    std::memcpy(&word, s.data() + i, s.size() - i);
    h = (h ^ word) * kMul;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

// Maps strings to int32 values; insertion overwrites (the last duplicate wins, like a JSON
// object read into a hash map). Strings are owned by the table.
class StringTable {
 public:
  void reserve(size_t n);
  // Inserts or overwrites; returns the index of the entry.
  size_t insert(std::string key, int32_t value);
  // Inserts many entries (later duplicates overwrite earlier values), prefetching slots ahead.
  void insert_many(std::vector<std::pair<std::string, int32_t>> items);
  std::optional<int32_t> find(std::string_view key) const;
  // Looks up `count` keys at once, prefetching their slots and entries first so that the
  // cache misses overlap (used when loading large merge lists). Missing keys give -1.
  void find_many(const std::string_view* keys, size_t count, int32_t* values) const;
  size_t size() const { return entries_.size(); }
  const std::string& key(size_t index) const { return entries_[index].key; }
  int32_t value(size_t index) const { return entries_[index].value; }

 private:
  struct Entry {
    std::string key;
    uint64_t hash;
    int32_t value;
  };
  void grow();
  // Slot = (high 32 bits of the hash << 32) | (entry index + 1); 0 = empty. The stored hash
  // bits reject most mismatches without touching the entry (one cache miss instead of two).
  static uint64_t slot_of(uint64_t hash, size_t index) {
    return (hash & ~0xFFFFFFFFull) | (index + 1);
  }
  static size_t index_of(uint64_t slot) { return static_cast<size_t>(slot & 0xFFFFFFFFull) - 1; }
  std::vector<Entry> entries_;
  std::vector<uint64_t> slots_;
  uint64_t mask_ = 0;
};

// Maps (left id, right id) pairs to (rank, merged id).
class PairTable {
 public:
  struct Value {
    uint32_t rank;
    int32_t merged;
  };
  void reserve(size_t n);
  void insert(int32_t left, int32_t right, Value value);  // overwrites
  // Hints that (left, right) will be inserted or looked up soon.
  void prefetch(int32_t left, int32_t right) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[mix(pack(left, right)) & mask_]);
  }
  const Value* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    uint64_t key = pack(left, right);
    for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return &slot.value;
      if (slot.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key;
    Value value;
  };
  static uint64_t pack(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return x;
  }
  void grow();
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace specd::tok
