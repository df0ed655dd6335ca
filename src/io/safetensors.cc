// safetensors: 8-byte little-endian header length, JSON header, then the raw tensor data.
#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "io/json_file.h"

namespace specd {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // as the reference implementation

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

TensorInfo parse_entry(const std::string& name, const Json& entry, uint64_t data_size,
                       const std::string& what) {
  SPECD_CHECK(entry.is_object(), "{}: tensor '{}': entry is not an object", what, name);
  TensorInfo info;
  info.name = name;
  auto dtype = entry.find("dtype");
  SPECD_CHECK(dtype != entry.end() && dtype->is_string(), "{}: tensor '{}': missing dtype", what,
              name);
  std::string dtype_text = dtype->get<std::string>();
  SPECD_CHECK(parse_safetensors_dtype(dtype_text, &info.dtype),
              "{}: tensor '{}': unsupported dtype '{}' (supported: F32, F16, BF16, I32)", what,
              name, dtype_text);
  auto shape = entry.find("shape");
  SPECD_CHECK(shape != entry.end() && shape->is_array() && shape->size() <= 8,
              "{}: tensor '{}': missing or invalid shape", what, name);
  uint64_t numel = 1;
  for (const auto& dim : *shape) {
    SPECD_CHECK(dim.is_number_unsigned() || (dim.is_number_integer() && dim.get<int64_t>() >= 0),
                "{}: tensor '{}': shape entries must be non-negative integers", what, name);
    uint64_t d = dim.get<uint64_t>();
    SPECD_CHECK(d == 0 || numel <= std::numeric_limits<uint64_t>::max() / d / 8,
                "{}: tensor '{}': shape overflows", what, name);
    numel *= d;
    info.shape.push_back(static_cast<int64_t>(d));
  }
  auto offsets = entry.find("data_offsets");
  SPECD_CHECK(offsets != entry.end() && offsets->is_array() && offsets->size() == 2 &&
                  (*offsets)[0].is_number_unsigned() && (*offsets)[1].is_number_unsigned(),
              "{}: tensor '{}': data_offsets must be two non-negative integers", what, name);
  info.begin = (*offsets)[0].get<uint64_t>();
  info.end = (*offsets)[1].get<uint64_t>();
  SPECD_CHECK(info.begin <= info.end, "{}: tensor '{}': data_offsets are reversed", what, name);
  SPECD_CHECK(info.end <= data_size,
              "{}: tensor '{}': data_offsets [{}, {}) run past the end of the data ({} bytes); "
              "the file may be truncated",
              what, name, info.begin, info.end, data_size);
  SPECD_CHECK(info.end - info.begin == numel * dtype_size(info.dtype),
              "{}: tensor '{}': {} bytes of data for a {} tensor of {} elements", what, name,
              info.end - info.begin, dtype_name(info.dtype), numel);
  return info;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t available,
                                           uint64_t file_size, const std::string& what) {
  SPECD_CHECK(file_size >= 8 && available >= 8,
              "{}: too small to be a safetensors file ({} bytes)", what, file_size);
  uint64_t header_len = read_u64_le(bytes);
  SPECD_CHECK(header_len <= kMaxHeaderBytes, "{}: header length {} exceeds the 100 MiB limit",
              what, header_len);
  SPECD_CHECK(header_len <= file_size - 8 && header_len <= available - 8,
              "{}: header length {} runs past the end of the file ({} bytes); truncated file?",
              what, header_len, file_size);
  SafetensorsHeader header;
  header.data_offset = 8 + header_len;
  uint64_t data_size = file_size - header.data_offset;
  std::string text(reinterpret_cast<const char*>(bytes + 8), header_len);
  Json json = parse_json(text, what + " header");
  SPECD_CHECK(json.is_object(), "{}: header is not a JSON object", what);
  for (const auto& [name, entry] : json.items()) {
    if (name == "__metadata__") {
      SPECD_CHECK(entry.is_object(), "{}: __metadata__ is not an object", what);
      for (const auto& [key, value] : entry.items()) {
        SPECD_CHECK(value.is_string(), "{}: __metadata__ value '{}' is not a string", what, key);
        header.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    header.tensors.emplace(name, parse_entry(name, entry, data_size, what));
  }
  std::vector<const TensorInfo*> order;
  for (const auto& [name, info] : header.tensors) order.push_back(&info);
  std::sort(order.begin(), order.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i) {
    SPECD_CHECK(order[i]->begin >= order[i - 1]->end,
                "{}: tensors '{}' and '{}' overlap in the data section", what, order[i - 1]->name,
                order[i]->name);
  }
  return header;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  header_ = parse_safetensors_header(file_.data(), file_.size(), file_.size(), path);
  for (auto& [name, info] : header_.tensors) {
    info.data = file_.data() + header_.data_offset + info.begin;
    info.file = path;
  }
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  static const char* kNames[] = {"F32", "F16", "BF16", "I32"};
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    uint64_t bytes = numel * dtype_size(t.dtype);
    header[t.name] = {{"dtype", kNames[static_cast<int>(t.dtype)]},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  SPECD_CHECK(out.good(), "cannot open {} for writing", path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(text.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    out.write(static_cast<const char*>(t.data),
              static_cast<std::streamsize>(numel * dtype_size(t.dtype)));
  }
  SPECD_CHECK(out.good(), "failed writing {}", path);
}

}  // namespace specd
