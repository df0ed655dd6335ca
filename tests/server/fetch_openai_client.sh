#!/usr/bin/env bash
# Installs the official OpenAI Node client at a pinned version for tests/server/openai_client_test.
#
#   bash tests/server/fetch_openai_client.sh      # prints the node_modules directory
#
# Lands in ${SPECD_DATA_DIR:-$HOME/.cache/specd}/npm/openai-<version>/node_modules; an existing
# install of the right version is kept (no network). Needs npm.
set -euo pipefail
VERSION=5.23.2
dest="${SPECD_DATA_DIR:-$HOME/.cache/specd}/npm/openai-$VERSION"
if [ -f "$dest/node_modules/openai/package.json" ] &&
  grep -q "\"version\": \"$VERSION\"" "$dest/node_modules/openai/package.json"; then
  echo "$dest/node_modules"
  exit 0
fi
command -v npm > /dev/null || { echo "fetch_openai_client: npm is needed" >&2; exit 1; }
mkdir -p "$dest"
(cd "$dest" && echo '{"name": "specd-openai-client-test", "private": true}' > package.json &&
  npm install --silent --no-audit --no-fund --save-exact "openai@$VERSION" > install.log 2>&1) || {
  echo "fetch_openai_client: npm install openai@$VERSION failed:" >&2
  cat "$dest/install.log" >&2
  exit 1
}
echo "$dest/node_modules"
