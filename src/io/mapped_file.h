// Read-only memory mapping of a whole file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace specd {

class MappedFile {
 public:
  // Maps `path` read-only; throws specd::Error if it cannot be opened or is empty.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Asks the kernel to read [offset, offset + length) ahead of use.
  void advise_willneed(size_t offset, size_t length) const;
  // Drops the pages that lie wholly inside [offset, offset + length) from this process's memory;
  // later reads fault them back in.
  void release_pages(size_t offset, size_t length) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) file into a string; throws specd::Error if it cannot be read.
std::string read_text_file(const std::string& path);
// Writes `text` as the whole file at `path`; throws specd::Error if it cannot be written.
void write_text_file(const std::string& path, const std::string& text);
bool file_exists(const std::string& path);

}  // namespace specd
