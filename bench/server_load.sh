#!/usr/bin/env bash
# Load test of `specd serve` on loopback: starts the server with the demo pair, runs
# bench/server_load.cjs (C concurrent streams for S seconds), stops the server with SIGTERM and
# writes the results with machine, date and commit to
# bench/results/server_load_<spec>_c<concurrency>.json.
#
#   bash bench/server_load.sh [SPEC=none|ngram|draft|ngram+draft] [CONCURRENCY=64] [SECONDS=60]
# Environment: SPECD (binary, default build/src/cli/specd), PARALLEL (default 16), MAX_TOKENS
# (64), TEMPERATURE (0), THREADS (0 = all cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spec=${1:-ngram+draft}
concurrency=${2:-64}
seconds=${3:-60}
specd=${SPECD:-$root/build/src/cli/specd}
log=$(mktemp)
draft_args=()
[[ $spec == *draft* ]] && draft_args=(--draft "$root/models/pycoder-draft")
"$specd" serve --model "$root/models/pycoder-target" "${draft_args[@]}" --spec "$spec" \
  --host 127.0.0.1 --port 0 --parallel "${PARALLEL:-16}" --threads "${THREADS:-0}" \
  --ctx-size 1024 2> "$log" &
pid=$!
trap 'kill $pid 2> /dev/null || true; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$log" | head -n 1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; exit 1; }
result=$(node "$root/bench/server_load.cjs" --url "http://127.0.0.1:$port/v1" \
  --model pycoder-target --pid "$pid" --concurrency "$concurrency" --seconds "$seconds" \
  --max-tokens "${MAX_TOKENS:-64}" --temperature "${TEMPERATURE:-0}")
metrics=$(curl -s "http://127.0.0.1:$port/metrics" | grep -E '^specd_(acceptance_length|requests_total)' || true)
kill -TERM "$pid"
wait "$pid"
out="$root/bench/results/server_load_${spec/+/_}_c${concurrency}.json"
node -e '
  const [result, spec, parallel, metrics, out, cpu, commit] = process.argv.slice(1);
  const r = JSON.parse(result);
  const doc = { benchmark: "server_load", date: new Date().toISOString(), commit, cpu,
                cores: require("os").cpus().length, model: "pycoder-target", spec,
                parallel: Number(parallel), server_metrics: metrics.split("\n").filter(Boolean), ...r };
  require("fs").writeFileSync(out, JSON.stringify(doc, null, 2) + "\n");
  console.log(JSON.stringify(doc, null, 2));
' "$result" "$spec" "${PARALLEL:-16}" "$metrics" "$out" \
  "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)" \
  "$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)"
