// Registries of jinja2's builtin filters (`x | name`) and tests (`x is name`), with transformers'
// `tojson` in place of jinja2's.
#pragma once

#include <string>

#include "chat/interpreter.h"
#include "chat/value.h"

namespace specd::chat {

using FilterFn = Value (*)(Interpreter& interp, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter& interp, const Value& input, CallArgs& args);

// nullptr if there is no such filter / test.
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);
inline bool is_known_filter(const std::string& name) { return find_filter(name) != nullptr; }
inline bool is_known_test(const std::string& name) { return find_test(name) != nullptr; }

// Sequence filters (filters_seq.cc), looked up by find_filter.
FilterFn find_sequence_filter(const std::string& name);

// jinja2's attribute lookup for filters taking `attribute=`: "a.b.0" follows the dots, each step
// an item lookup falling back to an attribute; an int attribute is an index.
Value lookup_attribute(Interpreter& interp, const Value& item, const Value& attribute);

}  // namespace specd::chat
