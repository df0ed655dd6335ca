// The weights of a Hugging Face model directory: one or several mapped safetensors files.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace specd {

class TensorStore {
 public:
  // Opens `dir`/model.safetensors, or the shards named by `dir`/model.safetensors.index.json.
  // Throws specd::Error if files are missing, malformed, or disagree with the index.
  static TensorStore open_dir(const std::string& dir);

  // A store over tensors whose memory `owner` keeps alive (e.g. a mapped GGUF file and copies
  // re-laid-out at load). Throws specd::Error on duplicate names.
  // `mapping` (kept alive by `owner`, or null) is the file whose pages release_pages drops.
  static TensorStore from_tensors(std::vector<TensorInfo> tensors,
                                  std::shared_ptr<const void> owner,
                                  const MappedFile* mapping = nullptr);

  // nullptr if absent.
  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, const TensorInfo*>& tensors() const { return by_name_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  uint64_t total_bytes() const;
  // Drops the mapped files' pages (or those wholly inside one tensor's bytes) from the process's
  // memory once the tensors have been copied; reads still work (they fault the pages back in).
  void release_pages() const;
  void release_pages(const TensorInfo& info) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> by_name_;
  std::vector<std::unique_ptr<TensorInfo>> owned_;  // from_tensors
  std::shared_ptr<const void> owner_;
  std::vector<const MappedFile*> mappings_;  // the files the tensors were mapped from
};

}  // namespace specd
