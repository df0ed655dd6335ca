// Python's text formats that templates depend on. This file: float repr and json.dumps.
#include "chat/py_format.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/utf8.h"

namespace specd::chat {

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  const std::string sci(buf, result.ptr);  // e.g. "-1.2345e+02", shortest round-trip digits
  const size_t e_pos = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const size_t int_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_digits) {
      out += digits + std::string(int_digits - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
    }
  }
  return out;
}

namespace {

void dump_string(const std::string& s, bool ensure_ascii, std::string* out) {
  *out += '"';
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t cp = decode_utf8(s, &pos);
    switch (cp) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (cp < 0x20) {
          *out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
        } else if (ensure_ascii && cp > 0x7E) {
          if (cp >= 0x10000) {
            const uint32_t v = static_cast<uint32_t>(cp) - 0x10000;
            *out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            *out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
          }
        } else {
          out->append(s, start, pos - start);
        }
    }
  }
  *out += '"';
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return float_repr(f);
}

struct Dumper {
  const JsonDumpOptions& options;
  std::string item_sep, key_sep;
  std::string* out;

  void newline(int level) {
    if (!options.indent) return;
    *out += '\n';
    for (int i = 0; i < level; ++i) *out += *options.indent;
  }

  std::string key_string(const Value& key) {
    switch (key.kind()) {
      case Value::Kind::kString:
        return key.str();
      case Value::Kind::kBool:
        return key.as_bool() ? "true" : "false";
      case Value::Kind::kNone:
        return "null";
      case Value::Kind::kInt:
        return std::to_string(key.as_int());
      case Value::Kind::kFloat:
        return json_float(key.as_float());
      default:
        throw RuntimeError(
            fmt::format("keys must be str, int, float, bool or None, not {}", type_name(key)));
    }
  }

  void dump(const Value& v, int level) {
    if (level > 512) throw RuntimeError("tojson: nesting too deep");
    switch (v.kind()) {
      case Value::Kind::kNone:
        *out += "null";
        return;
      case Value::Kind::kBool:
        *out += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        *out += std::to_string(v.as_int());
        return;
      case Value::Kind::kFloat:
        *out += json_float(v.as_float());
        return;
      case Value::Kind::kString:
        dump_string(v.str(), options.ensure_ascii, out);
        return;
      case Value::Kind::kList: {
        if (v.is_iterator()) {
          throw RuntimeError(
              fmt::format("Object of type {} is not JSON serializable", type_name(v)));
        }
        const auto& items = v.list().items;
        if (items.empty()) {
          *out += "[]";
          return;
        }
        *out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) *out += item_sep;
          newline(level + 1);
          dump(items[i], level + 1);
        }
        newline(level);
        *out += ']';
        return;
      }
      case Value::Kind::kDict: {
        std::vector<const std::pair<Value, Value>*> items;
        for (const auto& item : v.dict().items) items.push_back(&item);
        if (items.empty()) {
          *out += "{}";
          return;
        }
        if (options.sort_keys) {
          std::stable_sort(items.begin(), items.end(), [](const auto* a, const auto* b) {
            return compare(a->first, b->first) < 0;
          });
        }
        *out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) *out += item_sep;
          newline(level + 1);
          dump_string(key_string(items[i]->first), options.ensure_ascii, out);
          *out += key_sep;
          dump(items[i]->second, level + 1);
        }
        newline(level);
        *out += '}';
        return;
      }
      default:
        throw RuntimeError(fmt::format("Object of type {} is not JSON serializable", type_name(v)));
    }
  }
};

}  // namespace

std::string json_dumps(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  Dumper dumper{options, options.indent ? "," : ", ", ": ", &out};
  if (options.separators) {
    dumper.item_sep = options.separators->first;
    dumper.key_sep = options.separators->second;
  }
  dumper.dump(value, 0);
  return out;
}

}  // namespace specd::chat
