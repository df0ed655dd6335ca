// `specd plot`: draws a saved `specd bench` result (its --json or -o output) as an SVG file.
#include <cstdio>
#include <memory>
#include <string>

#include "chat/chat_template.h"  // read_ordered_json_file
#include "cli/bench_plot.h"
#include "cli/commands.h"
#include "core/error.h"
#include "io/mapped_file.h"

namespace specd::cli {

namespace {

struct PlotOptions {
  std::string input;
  std::string out;
};

// The bench result in `doc`: the document itself, or the first of its "runs" (results files
// that wrap several runs with a description).
const OrderedJson& bench_result(const OrderedJson& doc, const std::string& file) {
  auto is_result = [](const OrderedJson& j) {
    return j.is_object() && j.contains("modes") && j["modes"].is_array();
  };
  if (is_result(doc)) return doc;
  if (doc.is_object() && doc.contains("runs") && doc["runs"].is_array()) {
    for (const OrderedJson& run : doc["runs"]) {
      if (is_result(run)) return run;
    }
  }
  fail("{}: not a specd bench result (no \"modes\" array, nor \"runs\" holding one)", file);
}

void run_plot(const PlotOptions& o) {
  const OrderedJson doc = read_ordered_json_file(o.input);
  write_text_file(o.out, bench_plot_svg(bench_result(doc, o.input)));
  std::fprintf(stderr, "wrote %s\n", o.out.c_str());
}

}  // namespace

void register_plot_command(CLI::App& app) {
  auto options = std::make_shared<PlotOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plot",
      "Draw a saved `specd bench` result (--json / -o output) as SVG: each mode's tok/s against "
      "plain decoding and the roofline, and the acceptance rate by draft position");
  cmd->add_option("input", options->input, "The bench result (JSON)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", options->out, "The SVG file to write")->required();
  cmd->callback([options] { run_plot(*options); });
}

}  // namespace specd::cli
