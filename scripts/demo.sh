#!/usr/bin/env bash
# The main job on a fresh machine: writes a random-weight model with the Qwen3-0.6B shape (until
# the trained demo models ship), describes it, generates from it and benchmarks decoding.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${SPECD_DEMO_MODEL:-build/models/random-qwen3-0.6b}
if [ ! -f "$model/model.safetensors" ]; then
  ./build/tools/make_random_model --preset qwen3-0.6b --out "$model"
fi
./build/src/cli/specd info --model "$model"
./build/src/cli/specd generate --model "$model" --prompt-ids "1,2,3,4,5,6,7,8" --max-tokens 16
./build/src/cli/specd bench --model "$model" --prompt-len 128 --gen-len 128 --reps 3
