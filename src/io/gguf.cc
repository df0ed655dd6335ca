// GGUF parsing: a bounds-checked cursor over the file, then layout validation of the tensors.
#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "core/error.h"

namespace specd {

namespace {

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};

// Reads little-endian values from [pos, end) with every length checked before use.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& what)
      : data_(data), size_(size), what_(what) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(uint64_t bytes, const char* field) {
    SPECD_CHECK(bytes <= remaining(),
                "{}: {} at byte {} needs {} bytes but only {} remain; the file is truncated or "
                "corrupt",
                what_, field, pos_, bytes, remaining());
  }
  template <typename T>
  T read(const char* field) {
    need(sizeof(T), field);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));  // GGUF is little-endian, as are our targets
    pos_ += sizeof(T);
    return value;
  }
  const uint8_t* take(uint64_t bytes, const char* field) {
    need(bytes, field);
    const uint8_t* p = data_ + pos_;
    pos_ += bytes;
    return p;
  }
  std::string read_string(const char* field) {
    uint64_t length = read<uint64_t>(field);
    need(length, field);
    std::string out(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& what_;
};

// Smallest encoded size of one value of `type` (to bound counts before allocating).
uint64_t min_encoded_size(GgufType type) {
  if (type == GgufType::kString) return 8;
  if (type == GgufType::kArray) return 12;
  return gguf_scalar_size(type);
}

GgufType read_type(Cursor& in, const std::string& what, const std::string& key) {
  uint32_t code = in.read<uint32_t>("value type");
  SPECD_CHECK(is_gguf_type(code), "{}: metadata '{}' has unknown value type {}", what, key, code);
  return static_cast<GgufType>(code);
}

GgufValue read_value(Cursor& in, GgufType type, int depth, const std::string& what,
                     const std::string& key) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::kU8: v.u = in.read<uint8_t>("u8"); break;
    case GgufType::kI8: v.i = in.read<int8_t>("i8"); break;
    case GgufType::kU16: v.u = in.read<uint16_t>("u16"); break;
    case GgufType::kI16: v.i = in.read<int16_t>("i16"); break;
    case GgufType::kU32: v.u = in.read<uint32_t>("u32"); break;
    case GgufType::kI32: v.i = in.read<int32_t>("i32"); break;
    case GgufType::kU64: v.u = in.read<uint64_t>("u64"); break;
    case GgufType::kI64: v.i = in.read<int64_t>("i64"); break;
    case GgufType::kF32: v.f = in.read<float>("f32"); break;
    case GgufType::kF64: v.f = in.read<double>("f64"); break;
    case GgufType::kBool: {
      uint8_t b = in.read<uint8_t>("bool");
      SPECD_CHECK(b <= 1, "{}: metadata '{}' has a bool of value {}", what, key, b);
      v.u = b;
      break;
    }
    case GgufType::kString: v.str = in.read_string("string"); break;
    case GgufType::kArray: {
      SPECD_CHECK(depth < kGgufMaxArrayDepth, "{}: metadata '{}' nests arrays deeper than {}",
                  what, key, kGgufMaxArrayDepth);
      v.array_type = read_type(in, what, key);
      uint64_t count = in.read<uint64_t>("array length");
      uint64_t min_size = min_encoded_size(v.array_type);
      SPECD_CHECK(count <= in.remaining() / min_size,
                  "{}: metadata '{}' claims {} elements of type {}, more than the {} bytes left "
                  "can hold",
                  what, key, count, gguf_type_name(v.array_type), in.remaining());
      if (v.array_type == GgufType::kString) {
        v.strings.reserve(count);
        for (uint64_t j = 0; j < count; ++j) v.strings.push_back(in.read_string("string"));
      } else if (v.array_type == GgufType::kArray) {
        v.arrays.reserve(count);
        for (uint64_t j = 0; j < count; ++j) {
          v.arrays.push_back(read_value(in, GgufType::kArray, depth + 1, what, key));
        }
      } else {
        const uint64_t bytes = count * min_size;
        const uint8_t* p = in.take(bytes, "array");
        v.raw.assign(p, p + bytes);
        if (v.array_type == GgufType::kBool) {
          for (uint8_t b : v.raw) {
            SPECD_CHECK(b <= 1, "{}: metadata '{}' has a bool of value {}", what, key, b);
          }
        }
      }
      break;
    }
  }
  return v;
}

void read_tensor_info(Cursor& in, GgufTensorInfo& t, const std::string& what) {
  t.name = in.read_string("tensor name");
  SPECD_CHECK(!t.name.empty(), "{}: a tensor has an empty name", what);
  uint32_t n_dims = in.read<uint32_t>("tensor dimension count");
  SPECD_CHECK(n_dims >= 1 && n_dims <= kGgufMaxDims,
              "{}: tensor '{}' has {} dimensions (expected 1 to {})", what, t.name, n_dims,
              kGgufMaxDims);
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t dim = in.read<uint64_t>("tensor dimension");
    SPECD_CHECK(dim >= 1 && dim <= (uint64_t{1} << 40) && numel <= (uint64_t{1} << 42) / dim,
                "{}: tensor '{}' has an invalid or too large dimension {}", what, t.name, dim);
    numel *= dim;
    t.dims.push_back(dim);
  }
  t.ggml_type = in.read<uint32_t>("tensor type");
  auto info = ggml_type_info(t.ggml_type);
  SPECD_CHECK(info.has_value(), "{}: tensor '{}' has unknown ggml type {}", what, t.name,
              t.ggml_type);
  SPECD_CHECK(t.dims[0] % static_cast<uint64_t>(info->block_elems) == 0,
              "{}: tensor '{}' of type {} has rows of {} elements, not a multiple of its block "
              "size {}",
              what, t.name, info->name, t.dims[0], info->block_elems);
  t.bytes = numel / static_cast<uint64_t>(info->block_elems) *
            static_cast<uint64_t>(info->block_bytes);
  t.offset = in.read<uint64_t>("tensor offset");
}

}  // namespace

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16:
    case GgufType::kU32: case GgufType::kI32: case GgufType::kU64: case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

int64_t GgufValue::as_int(const std::string& key) const {
  SPECD_CHECK(is_integer(), "GGUF metadata '{}' is {}, expected an integer", key,
              gguf_type_name(type));
  bool is_unsigned = type == GgufType::kU8 || type == GgufType::kU16 || type == GgufType::kU32 ||
                     type == GgufType::kU64;
  if (!is_unsigned) return i;
  SPECD_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
              "GGUF metadata '{}' value {} is too large", key, u);
  return static_cast<int64_t>(u);
}

double GgufValue::as_double(const std::string& key) const {
  if (type == GgufType::kF32 || type == GgufType::kF64) return f;
  return static_cast<double>(as_int(key));
}

bool GgufValue::as_bool(const std::string& key) const {
  SPECD_CHECK(type == GgufType::kBool, "GGUF metadata '{}' is {}, expected a bool", key,
              gguf_type_name(type));
  return u != 0;
}

const std::string& GgufValue::as_string(const std::string& key) const {
  SPECD_CHECK(type == GgufType::kString, "GGUF metadata '{}' is {}, expected a string", key,
              gguf_type_name(type));
  return str;
}

size_t GgufValue::size() const {
  if (type != GgufType::kArray) return 0;
  if (array_type == GgufType::kString) return strings.size();
  if (array_type == GgufType::kArray) return arrays.size();
  return raw.size() / gguf_scalar_size(array_type);
}

GgufValue GgufValue::element(size_t j) const {
  SPECD_CHECK(type == GgufType::kArray && array_type != GgufType::kString &&
                  array_type != GgufType::kArray && j < size(),
              "GGUF: element {} of a value that is not an array of scalars of that size", j);
  const size_t width = gguf_scalar_size(array_type);
  const uint8_t* p = raw.data() + j * width;
  GgufValue v;
  v.type = array_type;
  auto load = [&](auto sample) {
    decltype(sample) x;
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (array_type) {
    case GgufType::kU8: v.u = load(uint8_t{}); break;
    case GgufType::kBool: v.u = load(uint8_t{}); break;
    case GgufType::kI8: v.i = load(int8_t{}); break;
    case GgufType::kU16: v.u = load(uint16_t{}); break;
    case GgufType::kI16: v.i = load(int16_t{}); break;
    case GgufType::kU32: v.u = load(uint32_t{}); break;
    case GgufType::kI32: v.i = load(int32_t{}); break;
    case GgufType::kU64: v.u = load(uint64_t{}); break;
    case GgufType::kI64: v.i = load(int64_t{}); break;
    case GgufType::kF32: v.f = load(float{}); break;
    case GgufType::kF64: v.f = load(double{}); break;
    default: break;
  }
  return v;
}

const std::vector<std::string>& GgufValue::as_strings(const std::string& key) const {
  SPECD_CHECK(type == GgufType::kArray && array_type == GgufType::kString,
              "GGUF metadata '{}' is not an array of strings", key);
  return strings;
}

std::vector<int64_t> GgufValue::as_ints(const std::string& key) const {
  GgufValue probe;
  probe.type = array_type;
  SPECD_CHECK(type == GgufType::kArray && probe.is_integer(),
              "GGUF metadata '{}' is not an array of integers", key);
  std::vector<int64_t> out(size());
  for (size_t j = 0; j < out.size(); ++j) out[j] = element(j).as_int(key);
  return out;
}

std::vector<float> GgufValue::as_floats(const std::string& key) const {
  SPECD_CHECK(type == GgufType::kArray &&
                  (array_type == GgufType::kF32 || array_type == GgufType::kF64),
              "GGUF metadata '{}' is not an array of floats", key);
  std::vector<float> out(size());
  for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(element(j).f);
  return out;
}

uint64_t GgufTensorInfo::numel() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

const GgufValue* GgufHeader::find(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufHeader::find_tensor(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

GgufHeader parse_gguf(const uint8_t* bytes, size_t size, const std::string& what) {
  Cursor in(bytes, size, what);
  in.need(4, "magic");
  SPECD_CHECK(std::memcmp(bytes, kMagic, 4) == 0, "{}: not a GGUF file (bad magic)", what);
  in.read<uint32_t>("magic");
  GgufHeader h;
  h.version = in.read<uint32_t>("version");
  SPECD_CHECK(h.version == 2 || h.version == 3,
              "{}: GGUF version {} is not supported (expected 2 or 3)", what, h.version);
  uint64_t n_tensors = in.read<uint64_t>("tensor count");
  uint64_t n_kv = in.read<uint64_t>("metadata count");
  // Each entry takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least
  // 8 (name length) + 1 + 4 (dims) + 8 (one dim) + 4 (type) + 8 (offset).
  SPECD_CHECK(n_kv <= in.remaining() / 13, "{}: metadata count {} is impossible for the file size",
              what, n_kv);
  for (uint64_t j = 0; j < n_kv; ++j) {
    std::string key = in.read_string("metadata key");
    SPECD_CHECK(!key.empty(), "{}: metadata entry {} has an empty key", what, j);
    GgufType type = read_type(in, what, key);
    GgufValue value = read_value(in, type, 0, what, key);
    SPECD_CHECK(h.metadata.emplace(key, std::move(value)).second,
                "{}: metadata key '{}' appears twice", what, key);
  }
  if (const GgufValue* align = h.find("general.alignment")) {
    SPECD_CHECK(align->type == GgufType::kU32, "{}: general.alignment must be a u32", what);
    SPECD_CHECK(align->u != 0 && (align->u & (align->u - 1)) == 0 && align->u <= (1u << 20),
                "{}: general.alignment {} is not a power of two up to 1 MiB", what, align->u);
    h.alignment = align->u;
  }
  SPECD_CHECK(n_tensors <= in.remaining() / 33,
              "{}: tensor count {} is impossible for the file size", what, n_tensors);
  h.tensors.resize(n_tensors);
  std::set<std::string> names;
  for (GgufTensorInfo& t : h.tensors) {
    read_tensor_info(in, t, what);
    SPECD_CHECK(names.insert(t.name).second, "{}: tensor '{}' appears twice", what, t.name);
  }
  // The data section starts at the next multiple of the alignment.
  uint64_t pos = in.pos();
  h.data_offset = (pos + h.alignment - 1) / h.alignment * h.alignment;
  const uint64_t data_size = h.data_offset <= size ? size - h.data_offset : 0;
  SPECD_CHECK(n_tensors == 0 || h.data_offset <= size,
              "{}: the data section would start at byte {}, past the end of the file ({} bytes)",
              what, h.data_offset, size);
  std::vector<const GgufTensorInfo*> by_offset;
  for (GgufTensorInfo& t : h.tensors) {
    SPECD_CHECK(t.offset % h.alignment == 0,
                "{}: tensor '{}' offset {} is not a multiple of the alignment {}", what, t.name,
                t.offset, h.alignment);
    SPECD_CHECK(t.offset <= data_size && t.bytes <= data_size - t.offset,
                "{}: tensor '{}' bytes [{}, {}) run past the end of the data ({} bytes); the file "
                "may be truncated",
                what, t.name, t.offset, t.offset + t.bytes, data_size);
    t.data = bytes + h.data_offset + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t j = 1; j < by_offset.size(); ++j) {
    const GgufTensorInfo* prev = by_offset[j - 1];
    SPECD_CHECK(prev->offset + prev->bytes <= by_offset[j]->offset,
                "{}: tensors '{}' and '{}' overlap", what, prev->name, by_offset[j]->name);
  }
  return h;
}

GgufFile::GgufFile(const std::string& path) : file_(path) {
  header_ = parse_gguf(file_.data(), file_.size(), path);
}

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, kMagic, 4) == 0;
}

}  // namespace specd
