#!/usr/bin/env bash
# Measures specd's tokenizer (load time, single-threaded encode/decode throughput) and writes
# bench/results/tokenizer_<date>.json.
#
#   bash tools/tokenizer/run_bench.sh BUILD_DIR [NAME...]      # NAME defaults to qwen3
#
# A NAME ending in .gguf is a GGUF file under the data directory (e.g.
# gguf/gemma3/gemma-3-270m-q4_k_m.gguf from tools/gguf/fetch_models.sh); its tokenizer is built
# from the metadata. SPECD_BENCH_NAME (default tokenizer) names the result file.
#
# Needs the tokenizer_bench target built in BUILD_DIR and the tokenizers fetched by
# tools/tokenizer/fetch_tokenizers.sh. The input is ~2 MB of mixed English and code (Python
# standard-library modules, see corpus.py), the same on every machine with the same Python.
set -euo pipefail
build=${1:?usage: run_bench.sh BUILD_DIR [NAME...]}
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(qwen3)
root=$(cd "$(dirname "$0")/../.." && pwd)
root_data="${SPECD_DATA_DIR:-$HOME/.cache/specd}"
data="$root_data/tokenizers"
bench="$build/bench/tokenizer/tokenizer_bench"
[ -x "$bench" ] || { echo "run_bench: $bench not built" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$root/tools/tokenizer/corpus.py" --bench-text > "$work/input.txt"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
keys=()
for name in "${names[@]}"; do
  model="$data/$name"
  case "$name" in *.gguf) model="$root_data/$name" ;; esac
  key=$(basename "$name")
  keys+=("$key")
  "$bench" --model "$model" --input "$work/input.txt" --repeat 7 --device "$cpu" > "$work/$key.json"
done
out="$root/bench/results/${SPECD_BENCH_NAME:-tokenizer}_$(date -u +%Y-%m-%d).json"
python3 - "$out" "$work" "${keys[@]}" <<'PY'
import json, os, subprocess, sys, datetime
out, work, names = sys.argv[1], sys.argv[2], sys.argv[3:]
root = os.path.dirname(os.path.dirname(os.path.abspath(out)))
try:
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
except OSError:
    commit = ""
results = {name: json.load(open(os.path.join(work, name + ".json"))) for name in names}
for name, result in results.items():
    result["model_dir"] = name  # no machine-specific paths in the results
load = os.getloadavg()[0]
doc = {"benchmark": "tokenizer", "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
       "commit": commit or "uncommitted", "device": next(iter(results.values()))["device"],
       "cores": os.cpu_count(), "load_average_1min": load,
       "input": "tools/tokenizer/corpus.py --bench-text (Python stdlib modules, ~2 MB)",
       "results": results}
open(out, "w").write(json.dumps(doc, indent=2) + "\n")
print(out)
PY
