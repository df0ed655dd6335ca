#!/usr/bin/env bash
# Loopback benchmarks of `specd serve` with the demo pair. Starts the server, runs
# bench/server_load.py, stops the server with SIGTERM and writes the results with machine, date
# and commit to $OUT_DIR (default bench/results):
#
#   bash bench/server_load.sh [SPEC=none|ngram|draft|ngram+draft] [CONCURRENCY=64] [SECONDS=60]
#     C concurrent streams for S seconds -> server_load_<spec>[_<device>]_c<C>.json
#   MODE=latency bash bench/server_load.sh [SPEC]
#     10 requests one at a time, beside 10 runs of `specd generate` on the same prompt: decode
#     tok/s and time to first token against generate's prefill time
#     -> server_latency_<spec>[_<device>].json
#
# Environment: SPECD (binary, default build/src/cli/specd), DEVICE (cpu), PARALLEL (16),
# MAX_TOKENS (64 for load, 128 for latency), TEMPERATURE (0), THREADS (0 = all cores), OUT_DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spec=${1:-ngram+draft}
concurrency=${2:-64}
seconds=${3:-60}
mode=${MODE:-load}
device=${DEVICE:-cpu}
specd=${SPECD:-$root/build/src/cli/specd}
out_dir=${OUT_DIR:-$root/bench/results}
prompt=$'def fibonacci(n):\n'
log=$(mktemp)
model_args=(--model "$root/models/pycoder-target" --device "$device" --threads "${THREADS:-0}")
spec_args=(--spec "$spec")
[[ $spec == *draft* ]] && spec_args+=(--draft "$root/models/pycoder-draft" --draft-device "$device")
"$specd" serve "${model_args[@]}" "${spec_args[@]}" --host 127.0.0.1 --port 0 \
  --parallel "${PARALLEL:-16}" --ctx-size 1024 2> "$log" &
pid=$!
trap 'kill $pid 2> /dev/null || true; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$log" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; exit 1; }
url="http://127.0.0.1:$port/v1"
suffix=${spec/+/_}
[ "$device" = cpu ] || suffix="${suffix}_${device/:/}"

if [ "$mode" = latency ]; then
  max_tokens=${MAX_TOKENS:-128}
  result=$(python3 "$root/bench/server_load.py" latency --url "$url" --model pycoder-target \
    --prompt "$prompt" --max-tokens "$max_tokens" --requests 10)
  generate_runs=$(for _ in $(seq 1 10); do
    "$specd" generate "${model_args[@]}" "${spec_args[@]}" -p "$prompt" \
      -n "$max_tokens" --json 2> /dev/null | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["stats"]))'
  done)
  out="$out_dir/server_latency_${suffix}.json"
else
  result=$(python3 "$root/bench/server_load.py" load --url "$url" --model pycoder-target \
    --pid "$pid" --concurrency "$concurrency" --seconds "$seconds" \
    --max-tokens "${MAX_TOKENS:-64}" --temperature "${TEMPERATURE:-0}")
  generate_runs=""
  out="$out_dir/server_load_${suffix}_c${concurrency}.json"
fi
metrics=$(curl -s "http://127.0.0.1:$port/metrics" | grep -E '^specd_(acceptance_length|requests_total)' || true)
kill -TERM "$pid"
wait "$pid"
trap 'rm -f "$log"' EXIT
python3 - "$result" "$generate_runs" "$spec" "$device" "${PARALLEL:-16}" "$metrics" "$out" \
  "$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)" <<'PY'
import datetime, json, os, statistics, sys
result, generate_runs, spec, device, parallel, metrics, out, commit = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
doc = {"benchmark": "server_" + ("latency" if generate_runs else "load"),
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "commit": commit, "cpu": cpu, "cores": os.cpu_count(), "device": device,
       "model": "pycoder-target", "spec": spec, "parallel": int(parallel),
       "server_metrics": [m for m in metrics.split("\n") if m], **json.loads(result)}
if generate_runs:
    runs = [json.loads(line) for line in generate_runs.split("\n") if line]
    gen_decode = statistics.median(r["decode_tok_s"] for r in runs)
    gen_prefill = statistics.median(r["prefill_seconds"] for r in runs)
    doc["generate"] = {"runs": len(runs), "generated_tokens": [r["generated_tokens"] for r in runs],
                       "decode_tok_s_median": gen_decode, "prefill_seconds_median": gen_prefill}
    doc["server_decode_over_generate"] = doc["decode_tok_s_median"] / gen_decode
    doc["ttft_minus_generate_prefill_s"] = doc["ttft_median_s"] - gen_prefill
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
summary = {k: doc[k] for k in ("spec", "device", "tokens_per_second", "errors",
                               "decode_tok_s_median", "server_decode_over_generate",
                               "ttft_median_s", "ttft_minus_generate_prefill_s") if k in doc}
print(json.dumps(summary))
PY
