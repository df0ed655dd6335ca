// Opening single-file and sharded safetensors checkpoints.
#include "io/tensor_store.h"

#include <set>

#include "core/error.h"
#include "io/json_file.h"

namespace specd {

TensorStore TensorStore::open_dir(const std::string& dir) {
  TensorStore store;
  std::string index_path = dir + "/model.safetensors.index.json";
  std::string single_path = dir + "/model.safetensors";
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
  std::vector<std::string> shard_names;
  if (file_exists(index_path)) {
    Json index = read_json_file(index_path);
    SPECD_CHECK(index.is_object() && index.contains("weight_map") &&
                    index["weight_map"].is_object(),
                "{}: missing 'weight_map' object", index_path);
    std::set<std::string> unique;
    for (const auto& [name, file] : index["weight_map"].items()) {
      SPECD_CHECK(file.is_string(), "{}: weight_map['{}'] is not a string", index_path, name);
      std::string shard = file.get<std::string>();
      SPECD_CHECK(shard.find('/') == std::string::npos && shard.find("..") == std::string::npos,
                  "{}: shard name '{}' must be a plain file name", index_path, shard);
      weight_map[name] = shard;
      if (unique.insert(shard).second) shard_names.push_back(shard);
    }
    SPECD_CHECK(!shard_names.empty(), "{}: weight_map is empty", index_path);
  } else if (file_exists(single_path)) {
    shard_names.push_back("model.safetensors");
  } else {
    fail("{}: no model.safetensors or model.safetensors.index.json found", dir);
  }
  for (const auto& shard : shard_names) {
    store.files_.push_back(std::make_unique<SafetensorsFile>(dir + "/" + shard));
    const auto& file = *store.files_.back();
    store.mappings_.push_back(&file.mapping());
    for (const auto& [name, info] : file.tensors()) {
      if (!weight_map.empty()) {
        auto listed = weight_map.find(name);
        if (listed == weight_map.end() || listed->second != shard) continue;  // stray copy
      }
      SPECD_CHECK(store.by_name_.emplace(name, &info).second,
                  "{}: tensor '{}' appears in more than one file", dir, name);
    }
  }
  for (const auto& [name, shard] : weight_map) {
    SPECD_CHECK(store.by_name_.count(name), "{}: index lists '{}' in {} but that file lacks it",
                dir, name, shard);
  }
  return store;
}

TensorStore TensorStore::from_tensors(std::vector<TensorInfo> tensors,
                                      std::shared_ptr<const void> owner,
                                      const MappedFile* mapping) {
  TensorStore store;
  store.owner_ = std::move(owner);
  if (mapping != nullptr) store.mappings_.push_back(mapping);
  for (TensorInfo& info : tensors) {
    store.owned_.push_back(std::make_unique<TensorInfo>(std::move(info)));
    const TensorInfo* added = store.owned_.back().get();
    SPECD_CHECK(store.by_name_.emplace(added->name, added).second, "tensor '{}' appears twice",
                added->name);
  }
  return store;
}

const TensorInfo* TensorStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

uint64_t TensorStore::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, info] : by_name_) total += info->end - info->begin;
  return total;
}

void TensorStore::release_pages() const {
  for (const MappedFile* m : mappings_) m->release_pages(0, m->size());
}

void TensorStore::release_pages(const TensorInfo& info) const {
  for (const MappedFile* m : mappings_) {
    if (info.data >= m->data() && info.data < m->data() + m->size()) {
      m->release_pages(static_cast<size_t>(info.data - m->data()), info.end - info.begin);
    }
  }
}

}  // namespace specd
