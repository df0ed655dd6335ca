// bench_plot_svg: bar lengths proportional to tok/s, the roofline and the draft's share placed on
// the same scale, acceptance lines through their rates, escaped text, bad numbers drawn as 0.
#include "cli/bench_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

namespace specd::cli {
namespace {

using OJson = nlohmann::ordered_json;

// The values of attribute `attr` of every element that has class `cls`, in document order.
std::vector<std::string> attributes(const std::string& svg, const std::string& cls,
                                    const std::string& attr) {
  std::vector<std::string> out;
  const std::regex element("<[a-z]+ class=\"" + cls + "\"[^>]*>");
  const std::regex value(" " + attr + "=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), element);
       it != std::sregex_iterator(); ++it) {
    std::smatch m;
    const std::string tag = it->str();
    if (std::regex_search(tag, m, value)) out.push_back(m[1]);
  }
  return out;
}

std::vector<double> numbers(const std::vector<std::string>& values) {
  std::vector<double> out;
  for (const std::string& v : values) out.push_back(std::stod(v));
  return out;
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1))
    ++n;
  return n;
}

OJson mode(const std::string& name, double tok_s, double speedup, double draft_fraction,
           std::vector<double> rates, bool identical = true) {
  return {{"mode", name},
          {"decode_tok_s", tok_s},
          {"speedup", speedup},
          {"acceptance_length", 3.5},
          {"draft_fraction", draft_fraction},
          {"acceptance_rate_by_position", rates},
          {"identical_to_plain", identical}};
}

OJson sample_result() {
  return {{"device", "AMD EPYC"},
          {"backend", "cpu (AVX2, 2 threads)"},
          {"model", {{"dir", "/models/pycoder-target/"}, {"architecture", "Qwen3ForCausalLM"}}},
          {"num_prompts", 8},
          {"generated_tokens_per_prompt", 128},
          {"temperature", 0.0},
          {"decode_roofline_tok_s", 1000.0},
          {"decode_roofline_fraction", 0.5},
          {"verify5_over_decode1", 1.25},
          {"verify9_over_decode1", 1.5},
          {"modes",
           {mode("none", 500, 1, 0, {}), mode("draft@4", 800, 1.6, 0.25, {1.0, 0.75, 0.5, 0.0}),
            mode("ngram", 400, 0.8, 0.05, {0.5, 0.25})}}};
}

TEST(BenchPlot, BarsRooflineAndDraftShareShareOneScale) {
  const std::string svg = bench_plot_svg(sample_result());
  const std::vector<double> bars = numbers(attributes(svg, "bar", "width"));
  ASSERT_EQ(bars.size(), 3u);
  // The roofline (1000 tok/s) is the largest value: it spans the full 330 units.
  EXPECT_NEAR(bars[0], 165.0, 0.1);
  EXPECT_NEAR(bars[1], 264.0, 0.1);
  EXPECT_NEAR(bars[2], 132.0, 0.1);
  const std::vector<double> bar_x = numbers(attributes(svg, "bar", "x"));
  const std::vector<double> roofline_x = numbers(attributes(svg, "roofline", "x1"));
  ASSERT_EQ(roofline_x.size(), 1u);
  EXPECT_NEAR(roofline_x[0] - bar_x[0], 330.0, 0.1);
  // Plain decoding has no draft segment; the others show the draft's share of their bar.
  const std::vector<double> drafts = numbers(attributes(svg, "draft", "width"));
  ASSERT_EQ(drafts.size(), 2u);
  EXPECT_NEAR(drafts[0], 0.25 * 264.0, 0.1);
  EXPECT_NEAR(drafts[1], 0.05 * 132.0, 0.1);
  EXPECT_NE(svg.find("800.0 tok/s, 1.60x, accept 3.50"), std::string::npos);
  EXPECT_NE(svg.find("pycoder-target (Qwen3ForCausalLM) on AMD EPYC"), std::string::npos);
  EXPECT_NE(svg.find("decode at 50.0% of the roofline; verifying 5 / 9 rows costs 1.25x / 1.50x"),
            std::string::npos);
  EXPECT_EQ(svg.find("NOT IDENTICAL"), std::string::npos);
}

TEST(BenchPlot, ConcurrentRunsHaveNoRoofline) {
  OJson result = sample_result();
  result["concurrency"] = 8;
  const std::string svg = bench_plot_svg(result);
  EXPECT_TRUE(attributes(svg, "roofline", "x1").empty());
  // The longest bar (draft@4, 800 tok/s) now spans the full 330 units.
  EXPECT_NEAR(numbers(attributes(svg, "bar", "width"))[1], 330.0, 0.1);
}

TEST(BenchPlot, AcceptanceLinesPassThroughTheirRates) {
  const std::string svg = bench_plot_svg(sample_result());
  const std::vector<std::string> lines = attributes(svg, "acceptance", "points");
  ASSERT_EQ(lines.size(), 2u);
  auto ys = [](const std::string& points) {
    std::vector<double> out;
    const std::regex pair("([0-9.]+),([0-9.]+)");
    for (auto it = std::sregex_iterator(points.begin(), points.end(), pair);
         it != std::sregex_iterator(); ++it)
      out.push_back(std::stod((*it)[2]));
    return out;
  };
  const std::vector<double> draft = ys(lines[0]), ngram = ys(lines[1]);
  ASSERT_EQ(draft.size(), 4u);
  ASSERT_EQ(ngram.size(), 2u);
  const double top = draft[0], bottom = draft[3];  // rates 1.0 and 0.0
  ASSERT_GT(bottom, top);
  EXPECT_NEAR(draft[1], bottom - 0.75 * (bottom - top), 0.1);
  EXPECT_NEAR(draft[2], bottom - 0.5 * (bottom - top), 0.1);
  EXPECT_NEAR(ngram[0], bottom - 0.5 * (bottom - top), 0.1);
  EXPECT_NEAR(ngram[1], bottom - 0.25 * (bottom - top), 0.1);
}

TEST(BenchPlot, EscapesTextAndFlagsOutputThatDiffersFromPlain) {
  OJson result = sample_result();
  result["modes"].push_back(mode("a<b&\"c\"", 300, 0.6, 0.1, {0.5}, false));
  result["device"] = "GPU <0>";
  const std::string svg = bench_plot_svg(result);
  EXPECT_NE(svg.find("a&lt;b&amp;&quot;c&quot;"), std::string::npos);
  EXPECT_NE(svg.find("GPU &lt;0&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  EXPECT_NE(svg.find("NOT IDENTICAL TO PLAIN"), std::string::npos);
}

TEST(BenchPlot, MissingAndNonFiniteNumbersDrawAsZero) {
  for (const OJson& result :
       {OJson::object(), OJson::array(),
        OJson{{"decode_roofline_tok_s", std::numeric_limits<double>::quiet_NaN()},
              {"modes",
               {mode("none", std::numeric_limits<double>::infinity(), 1, 0, {}),
                mode("draft", std::numeric_limits<double>::quiet_NaN(), -1, 2.0,
                     {std::numeric_limits<double>::quiet_NaN(), 0.5})}}}}) {
    const std::string svg = bench_plot_svg(result);
    EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
    EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
    EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
    EXPECT_EQ(svg.find("nan"), std::string::npos);
    EXPECT_EQ(svg.find("inf"), std::string::npos);
    for (double w : numbers(attributes(svg, "bar", "width"))) EXPECT_EQ(w, 0.0);
  }
}

}  // namespace
}  // namespace specd::cli
