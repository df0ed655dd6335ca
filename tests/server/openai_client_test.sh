#!/usr/bin/env bash
# Runs tests/server/openai_client_test.cjs (the official OpenAI Node client) against
# `specd serve` on 127.0.0.1, once without speculation and once with n-gram + draft model
# (--parallel 16); the greedy texts of both must be equal. Then checks SIGTERM draining: a
# stream in flight finishes with [DONE] and the server exits 0. Exits 77 (skipped) without node
# or the client (tests/server/fetch_openai_client.sh fetches it).
#
# --speculative-only (passed by CMake in sanitizer builds, SPECD_SANITIZE=ON): runs the client
# once, against the n-gram + draft server only, then the SIGTERM drain check; the comparison
# with a plain server is left to the Release suite, which runs everything. Under ASan + UBSan the
# small-M matmul kernels run about 25x slower than in Release, so each client run takes about
# 170 s (plain) and 215 s (speculative) alone on a 2-core machine; the speculative server covers
# the plain server's HTTP and decoding paths and adds drafting and verification. Each client run
# is bounded at 480 s.
#
#   bash tests/server/openai_client_test.sh path/to/specd [--speculative-only]
set -euo pipefail
specd=$(realpath "$1")
speculative_only=0
[ "${2:-}" = --speculative-only ] && speculative_only=1
root=$(cd "$(dirname "$0")/../.." && pwd)
export SPECD_DATA_DIR="${SPECD_DATA_DIR:-${HOME:-$root/build}/.cache/specd}"
command -v node > /dev/null || { echo "openai_client_test: node not found, skipped"; exit 77; }
modules=$(bash "$root/tests/server/fetch_openai_client.sh" 2> /dev/null) ||
  { echo "openai_client_test: the openai npm package is not available, skipped"; exit 77; }
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# start_server NAME ARGS...: starts specd serve on a free loopback port; sets $port and $pid.
start_server() {
  local name=$1
  shift
  "$specd" serve --model "$root/models/pycoder-target" --host 127.0.0.1 --port 0 \
    --api-key sk-local-test --threads 2 --ctx-size 1024 \
    --chat-template "$root/tests/data/server/chat_template.jinja" "$@" 2> "$work/$name.log" &
  pid=$!
  pids+=("$pid")
  port=""
  for _ in $(seq 1 300); do  # up to 30 s to load
    port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$work/$name.log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "server $name did not start:"; cat "$work/$name.log"; exit 1; }
}

run_client() {  # run_client NAME: the client test against $port; greedy texts to $work/NAME.json
  SPECD_URL="http://127.0.0.1:$port/v1" SPECD_KEY=sk-local-test SPECD_MODEL=pycoder-target \
    OPENAI_MODULES="$modules" timeout 480 node "$root/tests/server/openai_client_test.cjs" \
    > "$work/$1.json" || { echo "client test failed against server $1:"; tail -n 20 "$work/$1.log"; exit 1; }
}

if [ "$speculative_only" = 0 ]; then
  start_server plain --spec none --parallel 16
  run_client plain
  kill -TERM "$pid"
  wait "$pid"
fi
start_server spec --draft "$root/models/pycoder-draft" --spec ngram+draft --parallel 16
run_client spec
if [ "$speculative_only" = 0 ]; then
  cmp -s <(tail -n 1 "$work/plain.json") <(tail -n 1 "$work/spec.json") ||
    { echo "greedy texts differ between plain and speculative serving"; exit 1; }
fi

# SIGTERM drains: the in-flight stream completes, then the server exits 0.
curl_out="$work/drain.txt"
body='{"model": "pycoder-target", "prompt": "def f(x):\n", "max_tokens": 200, "temperature": 0, "stream": true, "ignore_eos": true}'
node -e '
  const [url, body, out] = process.argv.slice(1);
  fetch(url, {method: "POST", body, headers: {"Content-Type": "application/json",
        "Authorization": "Bearer sk-local-test"}})
    .then((r) => r.text()).then((t) => require("fs").writeFileSync(out, t))
    .catch((e) => { require("fs").writeFileSync(out, "FAILED " + e); });
' "http://127.0.0.1:$port/v1/completions" "$body" "$curl_out" &
client=$!
# SIGTERM once the request is being decoded (polls /metrics for up to 30 s).
node -e '
  const url = process.argv[1], end = Date.now() + 30000;
  const poll = () => fetch(url, {headers: {"Authorization": "Bearer sk-local-test"}})
    .then((r) => r.text()).then((t) => /^specd_active_sequences [1-9]/m.test(t))
    .catch(() => false)
    .then((busy) => busy || Date.now() > end ? 0 : new Promise((ok) => setTimeout(ok, 50)).then(poll));
  poll();
' "http://127.0.0.1:$port/metrics"
kill -TERM "$pid"
wait "$client"
status=0
wait "$pid" || status=$?
[ "$status" = 0 ] || { echo "server exited with $status after SIGTERM"; cat "$work/spec.log"; exit 1; }
grep -q 'data: \[DONE\]' "$curl_out" || { echo "the stream in flight did not finish:"; tail -c 300 "$curl_out"; exit 1; }
grep -q '"finish_reason":"length"' "$curl_out" || { echo "the drained stream was cut short"; exit 1; }
if [ "$speculative_only" = 0 ]; then
  echo "openai_client_test: passed (plain and ngram+draft, 16 concurrent, SIGTERM drain)"
else
  echo "openai_client_test: passed (ngram+draft only, 16 concurrent, SIGTERM drain)"
fi
