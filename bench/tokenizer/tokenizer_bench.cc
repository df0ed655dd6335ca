// Tokenizer benchmark: load time and single-threaded encode/decode throughput; prints JSON.
//
//   tokenizer_bench --model DIR [--input FILE]... [--repeat N] [--device NAME]
//
// Without --input, the text is every *.cc, *.h and *.md file under the specd source tree
// (mixed English and code). Load time is the median of 5 loads; encode throughput the median
// of --repeat passes (the word cache is warm after the first pass, as in a long-running server),
// and separately the first pass on a fresh tokenizer. Times are wall clock, and also this
// thread's CPU time, which other processes on a busy machine do not inflate.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "io/json_file.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU time of this thread: robust against other processes sharing the cores.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, device = "cpu";
  std::vector<std::string> inputs;
  int repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--model") model_dir = argv[i + 1];
    if (flag == "--input") inputs.push_back(argv[i + 1]);
    if (flag == "--repeat") repeat = std::max(1, std::stoi(argv[i + 1]));
    if (flag == "--device") device = argv[i + 1];
  }
  if (model_dir.empty()) {
    std::cerr << "usage: tokenizer_bench --model DIR [--input FILE]... [--repeat N]\n";
    return 2;
  }
  std::vector<std::string> texts;
  if (inputs.empty()) {
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(std::string(SPECD_SOURCE_DIR) + "/src")) {
      auto ext = entry.path().extension();
      if (ext == ".cc" || ext == ".h") texts.push_back(read_file(entry.path()));
    }
    for (const char* dir : {"/docs", "/tools"}) {
      std::filesystem::path root = std::string(SPECD_SOURCE_DIR) + dir;
      if (!std::filesystem::exists(root)) continue;
      for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
        auto ext = entry.path().extension();
        if (ext == ".md" || ext == ".py" || ext == ".sh") texts.push_back(read_file(entry.path()));
      }
    }
  } else {
    for (const auto& path : inputs) texts.push_back(read_file(path));
  }
  size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();

  std::vector<double> load_times, load_cpu_times;
  for (int i = 0; i < 5; ++i) {
    auto start = Clock::now();
    double cpu_start = thread_cpu_seconds();
    specd::Tokenizer t = specd::Tokenizer::load(model_dir);
    load_cpu_times.push_back(thread_cpu_seconds() - cpu_start);
    load_times.push_back(seconds_since(start));
  }
  specd::Tokenizer tokenizer = specd::Tokenizer::load(model_dir);

  size_t tokens = 0;
  std::vector<std::vector<int32_t>> encoded(texts.size());
  auto cold_start = Clock::now();
  double cold_cpu_start = thread_cpu_seconds();
  for (size_t i = 0; i < texts.size(); ++i) encoded[i] = tokenizer.encode(texts[i], false);
  double cold_cpu = thread_cpu_seconds() - cold_cpu_start;
  double cold = seconds_since(cold_start);
  for (const auto& ids : encoded) tokens += ids.size();
  std::vector<double> encode_times, encode_cpu_times, decode_times;
  for (int r = 0; r < repeat; ++r) {
    auto start = Clock::now();
    double cpu_start = thread_cpu_seconds();
    for (const auto& t : texts) encoded[0] = tokenizer.encode(t, false);
    encode_cpu_times.push_back(thread_cpu_seconds() - cpu_start);
    encode_times.push_back(seconds_since(start));
  }
  for (size_t i = 0; i < texts.size(); ++i) encoded[i] = tokenizer.encode(texts[i], false);
  for (int r = 0; r < repeat; ++r) {
    auto start = Clock::now();
    size_t out = 0;
    for (const auto& ids : encoded) out += tokenizer.decode(ids).size();
    decode_times.push_back(seconds_since(start));
    if (out == 0) std::cerr << "empty decode\n";
  }
  specd::Json result = {
      {"benchmark", "tokenizer"},
      {"device", device},
      {"model_dir", model_dir},
      {"input_bytes", bytes},
      {"input_files", texts.size()},
      {"tokens", tokens},
      {"load_ms_median", median(load_times) * 1e3},
      {"load_ms_thread_cpu_time", median(load_cpu_times) * 1e3},
      {"encode_mb_per_s_first_pass", bytes / cold / 1e6},
      {"encode_mb_per_s_first_pass_thread_cpu_time", bytes / cold_cpu / 1e6},
      {"encode_mb_per_s", bytes / median(encode_times) / 1e6},
      {"encode_mb_per_s_thread_cpu_time", bytes / median(encode_cpu_times) / 1e6},
      {"encode_tokens_per_s", tokens / median(encode_times)},
      {"decode_mb_per_s", bytes / median(decode_times) / 1e6},
  };
  std::cout << result.dump(2) << "\n";
  return 0;
}
