// SVG charts of a `specd bench` run (see bench_plot.h), written as plain SVG text.
#include "cli/bench_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace specd::cli {

namespace {

using OJson = nlohmann::ordered_json;

constexpr double kWidth = 760;
constexpr double kBarLeft = 150;  // bars start here; mode names to the left
constexpr double kBarSpan = 330;  // the longest bar (or the roofline)
constexpr double kBarHeight = 18;
constexpr double kRowHeight = 26;
constexpr const char* kPalette[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                    "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

double number(const OJson& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  const double v = j[key].get<double>();
  return std::isfinite(v) ? v : 0;
}

std::string text_of(const OJson& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "";
  if (j[key].is_string()) return j[key].get<std::string>();
  return j[key].is_number() ? j[key].dump() : "";
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    const char* entity = c == '&'   ? "&amp;"
                         : c == '<' ? "&lt;"
                         : c == '>' ? "&gt;"
                         : c == '"' ? "&quot;"
                                    : nullptr;
    out += entity != nullptr ? std::string(entity) : std::string(1, c);
  }
  return out;
}

std::string text(double x, double y, const std::string& s, const char* extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\"{}>{}</text>\n", x, y, extra, escape(s));
}

std::string rect(double x, double y, double w, double h, const char* fill, const char* cls = "") {
  return fmt::format(
      "<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
      "fill=\"{}\"/>\n",
      cls, x, y, std::max(0.0, w), h, fill);
}

// Decode speed of every mode as bars (the draft's share of the time in orange), the roofline of
// one sequence's decoding as a dashed line. Returns the SVG and advances *y past it.
std::string speed_chart(const OJson& result, const OJson& modes, double* y) {
  // Concurrent runs report aggregate tok/s, which one sequence's roofline does not bound.
  const double roofline =
      number(result, "concurrency") > 0 ? 0 : number(result, "decode_roofline_tok_s");
  double top = roofline;
  for (const OJson& m : modes) top = std::max(top, number(m, "decode_tok_s"));
  const double scale = top > 0 ? kBarSpan / top : 0;
  std::string svg = text(10, *y, "Decode speed (tokens/s)", " class=\"heading\"");
  *y += 12;
  const double chart_top = *y;
  for (const OJson& m : modes) {
    const std::string name = text_of(m, "mode");
    const double tok_s = number(m, "decode_tok_s"), w = tok_s * scale;
    const bool plain = name == "none";
    svg += text(kBarLeft - 8, *y + 13, plain ? "plain" : name, " text-anchor=\"end\"");
    svg += rect(kBarLeft, *y, w, kBarHeight, plain ? "#999999" : "#1f77b4", "bar");
    if (!plain) {
      const double draft = std::clamp(number(m, "draft_fraction"), 0.0, 1.0) * w;
      svg += rect(kBarLeft, *y, draft, kBarHeight, "#ff7f0e", "draft");
    }
    std::string label = fmt::format("{:.1f} tok/s", tok_s);
    if (!plain) {
      label += fmt::format(", {:.2f}x, accept {:.2f}", number(m, "speedup"),
                           number(m, "acceptance_length"));
      if (m.contains("identical_to_plain") && m["identical_to_plain"] == false)
        label += ", NOT IDENTICAL TO PLAIN";
    }
    svg += text(kBarLeft + w + 6, *y + 13, label);
    *y += kRowHeight;
  }
  if (roofline > 0) {
    const double x = kBarLeft + roofline * scale;
    svg += fmt::format(
        "<line class=\"roofline\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
        "stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>\n",
        x, chart_top - 4, x, *y - 4);
    svg += text(x, *y + 8, fmt::format("plain-decode roofline {:.1f}", roofline),
                " text-anchor=\"middle\" fill=\"#d62728\"");
    *y += 14;
  }
  svg += rect(kBarLeft, *y, 10, 10, "#ff7f0e") + text(kBarLeft + 14, *y + 9, "drafting") +
         rect(kBarLeft + 90, *y, 10, 10, "#1f77b4") +
         text(kBarLeft + 104, *y + 9, "verifying and the rest");
  *y += 30;
  return svg;
}

// Acceptance rate by draft position, one line per speculative mode; empty without drafts.
std::string acceptance_chart(const OJson& modes, double* y) {
  size_t positions = 0;
  for (const OJson& m : modes) {
    if (m.contains("acceptance_rate_by_position") && m["acceptance_rate_by_position"].is_array())
      positions = std::max(positions, m["acceptance_rate_by_position"].size());
  }
  if (positions == 0) return "";
  constexpr double kLeft = 60, kPlotWidth = 420, kPlotHeight = 160;
  std::string svg = text(10, *y, "Acceptance rate by draft position", " class=\"heading\"");
  *y += 14;
  const double top = *y, bottom = top + kPlotHeight;
  const double step = positions > 1 ? kPlotWidth / static_cast<double>(positions - 1) : 0;
  auto px = [&](size_t i) { return kLeft + step * static_cast<double>(i); };
  auto py = [&](double rate) { return bottom - std::clamp(rate, 0.0, 1.0) * kPlotHeight; };
  for (double r : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#dddddd\"/>\n",
        kLeft, py(r), kLeft + kPlotWidth, py(r));
    svg += text(kLeft - 6, py(r) + 4, fmt::format("{:.2f}", r), " text-anchor=\"end\"");
  }
  for (size_t i = 0; i < positions; ++i)
    svg += text(px(i), bottom + 14, std::to_string(i + 1), " text-anchor=\"middle\"");
  svg += text(kLeft + kPlotWidth / 2, bottom + 28, "draft position", " text-anchor=\"middle\"");
  size_t series = 0;
  double legend_y = top + 10;
  for (const OJson& m : modes) {
    if (!m.contains("acceptance_rate_by_position")) continue;
    const OJson& rates = m["acceptance_rate_by_position"];
    if (!rates.is_array() || rates.empty()) continue;
    const char* color = kPalette[series++ % std::size(kPalette)];
    std::string points;
    std::string dots;
    for (size_t i = 0; i < rates.size(); ++i) {
      const double rate = rates[i].is_number() && std::isfinite(rates[i].get<double>())
                              ? rates[i].get<double>()
                              : 0;
      points += fmt::format("{:.1f},{:.1f} ", px(i), py(rate));
      dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(i),
                          py(rate), color);
    }
    svg += fmt::format(
        "<polyline class=\"acceptance\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"2\"/>\n",
        points, color);
    svg += dots;
    svg += rect(kLeft + kPlotWidth + 20, legend_y - 9, 10, 10, color) +
           text(kLeft + kPlotWidth + 34, legend_y, text_of(m, "mode"));
    legend_y += 16;
  }
  *y = bottom + 44;
  return svg;
}

}  // namespace

std::string bench_plot_svg(const OJson& result) {
  const OJson modes = result.is_object() && result.contains("modes") && result["modes"].is_array()
                          ? result["modes"]
                          : OJson::array();
  double y = 24;
  std::string body;
  const OJson model = result.is_object() && result.contains("model") ? result["model"] : OJson{};
  std::string name = text_of(model, "dir");
  while (!name.empty() && name.back() == '/') name.pop_back();
  name = name.substr(name.find_last_of('/') + 1);  // the model folder's name
  body += text(10, y,
               fmt::format("specd bench: {} ({}) on {}", name, text_of(model, "architecture"),
                           text_of(result, "device")),
               " class=\"title\"");
  y += 18;
  body +=
      text(10, y,
           fmt::format(
               "{}, {} prompts x {} tokens, T={:.2f}, {}, commit {}", text_of(result, "backend"),
               text_of(result, "num_prompts"), text_of(result, "generated_tokens_per_prompt"),
               number(result, "temperature"), text_of(result, "date"), text_of(result, "commit")));
  y += 16;
  body += text(
      10, y,
      fmt::format("decode at {:.1f}% of the roofline; verifying 5 / 9 rows costs "
                  "{:.2f}x / {:.2f}x a decode step",
                  100 * number(result, "decode_roofline_fraction"),
                  number(result, "verify5_over_decode1"), number(result, "verify9_over_decode1")));
  y += 30;
  body += speed_chart(result, modes, &y);
  body += acceptance_chart(modes, &y);
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<style>.title{{font-size:15px;font-weight:bold}} .heading{{font-weight:bold}}</style>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{}</svg>\n",
      kWidth, y, kWidth, y, body);
}

}  // namespace specd::cli
