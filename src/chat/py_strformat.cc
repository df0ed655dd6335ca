// Python's text formats that templates depend on. This file: `%` formatting and str.format.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/py_format.h"
#include "chat/utf8.h"

namespace specd::chat {
namespace {

// Pads `s` to `width` code points (left-aligned if `left`, else right-aligned).
std::string pad(const std::string& s, int width, bool left, char fill = ' ') {
  const size_t len = utf8_length(s);
  if (width <= 0 || len >= static_cast<size_t>(width)) return s;
  const std::string padding(static_cast<size_t>(width) - len, fill);
  return left ? s + padding : padding + s;
}

int64_t to_int_for_format(const Value& v, char conversion) {
  if (v.is_float()) return static_cast<int64_t>(std::trunc(v.as_float()));
  if (v.is_int() || v.is_bool()) return v.as_int();
  throw RuntimeError(
      fmt::format("%{} format: a real number is required, not {}", conversion, type_name(v)));
}

// Formats one number with a C printf spec built from Python's flags, width and precision.
std::string printf_number(const std::string& flags, int width, int precision, char conversion,
                          const Value& v) {
  std::string spec = "%" + flags;
  if (width > 0) spec += std::to_string(width);
  if (precision >= 0) {
    spec += '.';
    spec += std::to_string(precision);
  }
  char buf[512];
  if (conversion == 'd' || conversion == 'i' || conversion == 'u' || conversion == 'x' ||
      conversion == 'X' || conversion == 'o') {
    spec += "ll";
    spec += conversion == 'i' || conversion == 'u' ? 'd' : conversion;
    std::snprintf(buf, sizeof(buf), spec.c_str(),
                  static_cast<long long>(to_int_for_format(v, conversion)));
  } else {
    if (!v.is_number()) {
      throw RuntimeError(fmt::format("must be real number, not {}", type_name(v)));
    }
    spec += conversion;
    std::snprintf(buf, sizeof(buf), spec.c_str(), v.as_float());
  }
  return buf;
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.list().items;
  } else if (args.is_dict()) {
    mapping = &args.dict();
    positional.push_back(args);
  } else {
    positional.push_back(args);
  }
  size_t next = 0;
  const auto next_arg = [&]() -> const Value& {
    if (next >= positional.size()) throw RuntimeError("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) throw RuntimeError("incomplete format");
    const Value* keyed = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos || mapping == nullptr) {
        throw RuntimeError("format requires a mapping");
      }
      keyed = mapping->find(format.substr(i + 1, close - i - 1));
      if (keyed == nullptr)
        throw RuntimeError("KeyError in format: " + format.substr(i + 1, close - i - 1));
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string("-+ #0").find(format[i]) != std::string::npos) {
      flags += format[i++];
    }
    int width = 0, precision = -1;
    if (i < format.size() && format[i] == '*') {
      width = static_cast<int>(to_int_for_format(next_arg(), '*'));
      ++i;
    }
    while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
      width = std::min(width * 10 + (format[i++] - '0'), 10000);
    }
    if (i < format.size() && format[i] == '.') {
      precision = 0;
      ++i;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        precision = std::min(precision * 10 + (format[i++] - '0'), 400);
      }
    }
    while (i < format.size() && (format[i] == 'l' || format[i] == 'h' || format[i] == 'L')) ++i;
    if (i >= format.size()) throw RuntimeError("incomplete format");
    const char conversion = format[i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    const Value& arg = keyed != nullptr ? *keyed : next_arg();
    const bool left = flags.find('-') != std::string::npos;
    switch (conversion) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = conversion == 's' ? to_str(arg) : repr(arg);
        if (precision >= 0) {
          const auto cps = to_code_points(s);
          s = from_code_points(cps, 0, std::min(cps.size(), static_cast<size_t>(precision)));
        }
        out += pad(s, width, left);
        break;
      }
      case 'c': {
        std::string s;
        if (arg.is_string() && utf8_length(arg.str()) == 1) {
          s = arg.str();
        } else {
          append_utf8(static_cast<char32_t>(to_int_for_format(arg, 'c')), &s);
        }
        out += pad(s, width, left);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o':
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
        out += printf_number(flags, width, precision, conversion, arg);
        break;
      default:
        throw RuntimeError(fmt::format("unsupported format character '{}'", conversion));
    }
  }
  if (mapping == nullptr && next < positional.size()) {
    throw RuntimeError("not all arguments converted during string formatting");
  }
  return out;
}

namespace {

// Applies a str.format spec `[[fill]align][sign][0][width][.precision][type]`.
std::string apply_format_spec(const Value& v, const std::string& spec) {
  if (spec.empty()) return to_str(v);
  size_t i = 0;
  char fill = ' ', align = 0;
  const auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (spec.size() >= 2 && is_align(spec[1])) {
    fill = spec[0], align = spec[1], i = 2;
  } else if (is_align(spec[0])) {
    align = spec[0], i = 1;
  }
  std::string sign;
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (align == 0) fill = '0', align = '=';
    ++i;
  }
  int width = 0, precision = -1;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
    width = std::min(width * 10 + (spec[i++] - '0'), 10000);
  }
  if (i < spec.size() && spec[i] == '.') {
    precision = 0;
    ++i;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
      precision = std::min(precision * 10 + (spec[i++] - '0'), 400);
    }
  }
  const char type = i < spec.size() ? spec[i++] : 0;
  if (i != spec.size()) throw RuntimeError("unsupported format spec '" + spec + "'");
  std::string body;
  if (type == 0 && v.is_string()) {
    body = v.str();
    if (precision >= 0) {
      const auto cps = to_code_points(body);
      body = from_code_points(cps, 0, std::min(cps.size(), static_cast<size_t>(precision)));
    }
  } else if (type == 0 && precision < 0) {
    body = to_str(v);
  } else if (type == 's') {
    if (!v.is_string()) throw RuntimeError("unknown format code 's' for " + type_name(v));
    body = v.str();
  } else if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'f' ||
             type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G' ||
             type == '%') {
    if (!v.is_number() ||
        ((type == 'd' || type == 'x' || type == 'X' || type == 'o') && v.is_float())) {
      throw RuntimeError(
          fmt::format("unknown format code '{}' for object of type '{}'", type, type_name(v)));
    }
    if (type == '%') {
      body = printf_number(sign == "-" ? "" : sign, 0, precision < 0 ? 6 : precision, 'f',
                           Value(v.as_float() * 100.0)) +
             "%";
    } else {
      const char conversion = type == 0 ? 'g' : type;
      body = printf_number(sign == "-" ? "" : sign, 0,
                           (type == 'f' || type == 'F' || type == 'e' || type == 'E' ||
                            type == 'g' || type == 'G') &&
                                   precision < 0
                               ? 6
                               : precision,
                           conversion, v);
    }
  } else {
    throw RuntimeError("unsupported format spec '" + spec + "'");
  }
  const size_t len = utf8_length(body);
  if (width <= 0 || len >= static_cast<size_t>(width)) return body;
  const size_t missing = static_cast<size_t>(width) - len;
  if (align == 0) align = v.is_number() && !v.is_bool() ? '>' : '<';
  if (align == '<') return body + std::string(missing, fill);
  if (align == '>') return std::string(missing, fill) + body;
  if (align == '^') {
    return std::string(missing / 2, fill) + body + std::string(missing - missing / 2, fill);
  }
  // '=': padding after the sign.
  if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) {
    return body.substr(0, 1) + std::string(missing, fill) + body.substr(1);
  }
  return std::string(missing, fill) + body;
}

}  // namespace

std::string str_format(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw RuntimeError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) throw RuntimeError("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    std::string spec;
    const size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (field.find_first_of("!.[") != std::string::npos) {
      throw RuntimeError("unsupported format field '{" + field + "}'");
    }
    const Value* arg = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      const size_t index = field.empty() ? auto_index++ : std::stoul(field);
      if (index >= args.positional.size()) {
        throw RuntimeError(fmt::format("Replacement index {} out of range", index));
      }
      arg = &args.positional[index];
    } else {
      for (const auto& [name, value] : args.named) {
        if (name == field) arg = &value;
      }
      if (arg == nullptr) throw RuntimeError("KeyError: '" + field + "'");
    }
    out += apply_format_spec(*arg, spec);
  }
  return out;
}

}  // namespace specd::chat
