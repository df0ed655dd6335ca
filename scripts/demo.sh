#!/usr/bin/env bash
# The main job: completes a Python function with the shipped demo pair (pycoder target + draft,
# speculative decoding), then compares plain and speculative decoding on stdlib prompts.
set -euo pipefail
cd "$(dirname "$0")/.."
specd=./build/src/cli/specd
target=models/pycoder-target
draft=models/pycoder-draft
prompt='import os


def list_python_files(root):
    """Return the paths of all .py files below root, sorted."""
'
echo "== specd generate (draft model speculation, greedy) =="
"$specd" generate --model "$target" --draft "$draft" --prompt "$prompt" --max-tokens 96
echo
echo "== specd bench: plain vs speculative on 8 Python stdlib prompts =="
"$specd" bench --model "$target" --draft "$draft" --prompts bench/prompts/pycoder_eval.jsonl \
  --num-prompts 8 --gen-len 128 --modes draft,draft@4,ngram,ngram+draft
