// Python's text formats that templates depend on: float repr, json.dumps, `%` and str.format.
#pragma once

#include <optional>
#include <string>

#include "chat/value.h"

namespace specd::chat {

// Python repr(float): shortest round-trip digits, exponent form below 1e-4 and from 1e16.
std::string float_repr(double value);

// Python json.dumps(value, ensure_ascii=..., indent=..., separators=..., sort_keys=...), which is
// what transformers' `tojson` filter calls (with ensure_ascii=False by default).
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // the indent string; nullopt: single line
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
  bool sort_keys = false;
};
std::string json_dumps(const Value& value, const JsonDumpOptions& options);

// Python `format % args` (printf-style; a tuple gives several arguments, a dict names them).
std::string percent_format(const std::string& format, const Value& args);

// Python str.format(*args, **kwargs) for `{}`, `{0}`, `{name}` fields with simple format specs.
std::string str_format(const std::string& format, const CallArgs& args);

}  // namespace specd::chat
