// Helpers of the chat tests: loading the golden files and comparing renders with a useful diff.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "chat/chat_template.h"
#include "io/mapped_file.h"

namespace specd::chat_test {

inline std::string data_dir() { return std::string(SPECD_SOURCE_DIR) + "/tests/data/chat"; }

inline OrderedJson load(const std::string& name) {
  return OrderedJson::parse(read_text_file(data_dir() + "/" + name));
}

// "" if equal, else where and how the strings first differ.
inline std::string first_difference(const std::string& expected, const std::string& actual) {
  if (expected == actual) return "";
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  expected: " +
         OrderedJson(expected.substr(from, 120))
             .dump(-1, ' ', false, OrderedJson::error_handler_t::replace) +
         "\n  actual:   " +
         OrderedJson(actual.substr(from, 120))
             .dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

// Checks an expected error: specd raised one too, on jinja2's template line when it names one,
// and with the template's own message for raise_exception().
inline void expect_error_matches(const OrderedJson& error, const std::string& what,
                                 const std::string& label) {
  const OrderedJson& line = error.at("line");
  if (line.is_number()) {
    const std::string prefix = "chat template line " + std::to_string(line.get<int>()) + ":";
    EXPECT_EQ(what.rfind(prefix, 0), 0u)
        << label << ": expected an error at line " << line << " ("
        << error.at("message").get<std::string>() << "), got: " << what;
  }
  if (error.at("type") == "TemplateError") {
    EXPECT_NE(what.find(error.at("message").get<std::string>()), std::string::npos)
        << label << ": raise_exception message missing from: " << what;
  }
}

}  // namespace specd::chat_test
