// Growth and insertion for the open-addressing tables.
#include "tokenizer/hash_tables.h"

#include <algorithm>
#include <bit>

namespace specd::tok {

void StringTable::reserve(size_t n) {
  entries_.reserve(n);
  size_t want = std::bit_ceil(std::max<size_t>(16, n * 2));
  if (want > slots_.size()) {
    slots_.assign(want, 0);
    mask_ = want - 1;
    for (size_t i = 0; i < entries_.size(); ++i) {
      uint64_t s = entries_[i].hash & mask_;
      while (slots_[s] != 0) s = (s + 1) & mask_;
      slots_[s] = slot_of(entries_[i].hash, i);
    }
  }
}

void StringTable::grow() { reserve(std::max<size_t>(16, entries_.size() * 2)); }

size_t StringTable::insert(std::string key, int32_t value) {
  if ((entries_.size() + 1) * 2 > slots_.size()) grow();
  uint64_t hash = hash_bytes(key);
  uint64_t s = hash & mask_;
  const uint64_t tag = hash & ~0xFFFFFFFFull;
  while (slots_[s] != 0) {
    if ((slots_[s] & ~0xFFFFFFFFull) == tag) {
      Entry& entry = entries_[index_of(slots_[s])];
      if (entry.hash == hash && entry.key == key) {
        entry.value = value;
        return index_of(slots_[s]);
      }
    }
    s = (s + 1) & mask_;
  }
  entries_.push_back({std::move(key), hash, value});
  slots_[s] = slot_of(hash, entries_.size() - 1);
  return entries_.size() - 1;
}

void StringTable::insert_many(std::vector<std::pair<std::string, int32_t>> items) {
  reserve(entries_.size() + items.size());
  constexpr size_t kAhead = 16;
  std::vector<uint64_t> hashes(items.size());
  for (size_t i = 0; i < items.size(); ++i) hashes[i] = hash_bytes(items[i].first);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i + kAhead < items.size()) __builtin_prefetch(&slots_[hashes[i + kAhead] & mask_]);
    const uint64_t hash = hashes[i], tag = hash & ~0xFFFFFFFFull;
    uint64_t s = hash & mask_;
    bool found = false;
    for (; slots_[s] != 0; s = (s + 1) & mask_) {
      if ((slots_[s] & ~0xFFFFFFFFull) != tag) continue;
      Entry& entry = entries_[index_of(slots_[s])];
      if (entry.hash == hash && entry.key == items[i].first) {
        entry.value = items[i].second;
        found = true;
        break;
      }
    }
    if (found) continue;
    entries_.push_back({std::move(items[i].first), hash, items[i].second});
    slots_[s] = slot_of(hash, entries_.size() - 1);
  }
}

std::optional<int32_t> StringTable::find(std::string_view key) const {
  if (slots_.empty()) return std::nullopt;
  uint64_t hash = hash_bytes(key);
  const uint64_t tag = hash & ~0xFFFFFFFFull;
  for (uint64_t s = hash & mask_;; s = (s + 1) & mask_) {
    uint64_t slot = slots_[s];
    if (slot == 0) return std::nullopt;
    if ((slot & ~0xFFFFFFFFull) != tag) continue;
    const Entry& entry = entries_[index_of(slot)];
    if (entry.hash == hash && entry.key == key) return entry.value;
  }
}

void StringTable::find_many(const std::string_view* keys, size_t count, int32_t* values) const {
  constexpr size_t kBatch = 64;
  uint64_t hashes[kBatch];
  for (size_t base = 0; base < count; base += kBatch) {
    const size_t n = std::min(kBatch, count - base);
    if (slots_.empty()) {
      std::fill(values + base, values + base + n, -1);
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      hashes[i] = hash_bytes(keys[base + i]);
      __builtin_prefetch(&slots_[hashes[i] & mask_]);
    }
    for (size_t i = 0; i < n; ++i) {
      uint64_t slot = slots_[hashes[i] & mask_];
      if (slot != 0) __builtin_prefetch(&entries_[index_of(slot)]);
    }
    for (size_t i = 0; i < n; ++i) {
      const uint64_t hash = hashes[i], tag = hash & ~0xFFFFFFFFull;
      values[base + i] = -1;
      for (uint64_t s = hash & mask_;; s = (s + 1) & mask_) {
        uint64_t slot = slots_[s];
        if (slot == 0) break;
        if ((slot & ~0xFFFFFFFFull) != tag) continue;
        const Entry& entry = entries_[index_of(slot)];
        if (entry.hash == hash && entry.key == keys[base + i]) {
          values[base + i] = entry.value;
          break;
        }
      }
    }
  }
}

void PairTable::reserve(size_t n) {
  // Up to 3/4 full: a smaller table keeps more of it in cache during merges.
  size_t want = std::bit_ceil(std::max<size_t>(16, n + n / 3 + 1));
  if (want <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(want, Slot{kEmpty, {0, 0}});
  mask_ = want - 1;
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.key != kEmpty) {
      insert(static_cast<int32_t>(slot.key >> 32), static_cast<int32_t>(slot.key & 0xFFFFFFFF),
             slot.value);
    }
  }
}

void PairTable::grow() { reserve(std::max<size_t>(16, size_ * 2)); }

void PairTable::insert(int32_t left, int32_t right, Value value) {
  if ((size_ + 1) * 4 > slots_.size() * 3) grow();
  uint64_t key = pack(left, right);
  for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.key == key) {
      slot.value = value;
      return;
    }
    if (slot.key == kEmpty) {
      slot = {key, value};
      ++size_;
      return;
    }
  }
}

}  // namespace specd::tok
