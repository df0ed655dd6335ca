// mmap-based file mapping and small-file reading.
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace specd {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  SPECD_CHECK(fd >= 0, "cannot open {}: {}", path, std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail("{} is not a regular file", path);
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ == 0) {
    ::close(fd);
    fail("{} is empty", path);
  }
  void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  SPECD_CHECK(mapping != MAP_FAILED, "cannot map {}: {}", path, std::strerror(errno));
  data_ = static_cast<const uint8_t*>(mapping);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::advise_willneed(size_t offset, size_t length) const {
  size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t begin = offset / page * page;
  if (begin >= size_) return;
  length = std::min(length + (offset - begin), size_ - begin);
  ::madvise(const_cast<uint8_t*>(data_) + begin, length, MADV_WILLNEED);
}

void MappedFile::release_pages(size_t offset, size_t length) const {
  if (offset >= size_) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t begin = (offset + page - 1) / page * page;
  const size_t end = (offset + std::min(length, size_ - offset)) / page * page;
  if (begin >= end) return;
  ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SPECD_CHECK(in.good(), "cannot open {}", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  SPECD_CHECK(!in.bad(), "cannot read {}", path);
  return buffer.str();
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  SPECD_CHECK(out.good(), "cannot write {}", path);
  out << text;
  out.close();
  SPECD_CHECK(out.good(), "cannot write {}", path);
}

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace specd
