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

  // nullptr if absent.
  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, const TensorInfo*>& tensors() const { return by_name_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  uint64_t total_bytes() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> by_name_;
};

}  // namespace specd
