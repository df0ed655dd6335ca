// Runs bench prompts through the batch engine, all submitted at once (see bench_concurrent.h).
#include "cli/bench_concurrent.h"

#include <condition_variable>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "core/timer.h"
#include "engine/batch_engine.h"

namespace specd::cli {

ConcurrentRun run_concurrent(LoadedModel& target, const BatchSpeculation& speculation,
                             const SpecOptions& spec, int concurrency,
                             const std::vector<std::vector<int32_t>>& prompts, int gen_len,
                             SamplingParams params) {
  BatchEngine engine(*target.model, *target.kv, speculation.engine_options(spec, concurrency),
                     [&speculation] { return speculation.make_drafter(); });
  ConcurrentRun run;
  run.results.resize(prompts.size());
  std::mutex mutex;
  std::condition_variable all_done;
  size_t done = 0;
  std::vector<std::shared_ptr<BatchRequest>> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto request = std::make_shared<BatchRequest>();
    request->generate = GenerateRequest{prompts[i], gen_len, params, {}};
    request->generate.sampling.seed = params.seed + i;
    request->on_done = [&, i](const GenerationResult& result) {
      std::lock_guard<std::mutex> lock(mutex);
      run.results[i] = result;
      ++done;
      all_done.notify_one();
    };
    requests.push_back(std::move(request));
  }
  engine.warm_up();
  const double start = now_seconds();
  for (auto& request : requests) engine.submit(request);
  engine.start();
  {
    std::unique_lock<std::mutex> lock(mutex);
    all_done.wait(lock, [&] { return done == prompts.size(); });
  }
  run.seconds = now_seconds() - start;
  engine.stop();
  for (const GenerationResult& r : run.results) {
    SPECD_CHECK(r.finish_reason == "length" || r.finish_reason == "stop",
                "a benchmark request ended with '{}'", r.finish_reason);
  }
  return run;
}

}  // namespace specd::cli
