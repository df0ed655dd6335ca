// NumPy .npy v1.0 format: magic, header length, a Python-dict header, then raw data.
#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace specd {

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i ? ", " : "") + std::to_string(shape[i]);
    count *= shape[i];
  }
  if (shape.size() == 1) dims += ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  SPECD_CHECK(out.good(), "cannot open {} for writing", path);
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(magic, 8);
  uint16_t header_len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&header_len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * 4));
  SPECD_CHECK(out.good(), "failed writing {}", path);
}

NpyArray read_npy_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SPECD_CHECK(in.good(), "cannot open {}", path);
  char magic[8];
  in.read(magic, 8);
  SPECD_CHECK(in.good() && std::memcmp(magic, "\x93NUMPY", 6) == 0, "{}: not a .npy file", path);
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t len16 = 0;
    in.read(reinterpret_cast<char*>(&len16), 2);
    header_len = len16;
  } else {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  }
  SPECD_CHECK(in.good() && header_len < (1u << 20), "{}: bad .npy header", path);
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  SPECD_CHECK(header.find("'<f4'") != std::string::npos, "{}: only little-endian f32 supported",
              path);
  SPECD_CHECK(header.find("'fortran_order': False") != std::string::npos,
              "{}: only C-order arrays supported", path);
  size_t open = header.find('('), close = header.find(')');
  SPECD_CHECK(open != std::string::npos && close != std::string::npos, "{}: no shape", path);
  NpyArray array;
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  std::string item;
  int64_t count = 1;
  while (std::getline(dims, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    array.shape.push_back(std::stoll(item));
    count *= array.shape.back();
  }
  array.data.resize(static_cast<size_t>(count));
  in.read(reinterpret_cast<char*>(array.data.data()), count * 4);
  SPECD_CHECK(in.gcount() == count * 4, "{}: truncated data", path);
  return array;
}

}  // namespace specd
