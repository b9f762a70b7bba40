#!/usr/bin/env bash
# Installs the independent GGUF reader the tests check Ember's files with: the npm package
# @huggingface/gguf at a pinned version, cached outside the tree (EMBER_NPM_CACHE, default
# /var/cache/ember-npm), then prints the folder holding its node_modules. Run by
# tests/lua/gguf_spec.lua; nothing is fetched when the cache already has it.
set -euo pipefail
VERSION=0.4.6
dir="${EMBER_NPM_CACHE:-/var/cache/ember-npm}/gguf-$VERSION"
if [ ! -f "$dir/node_modules/@huggingface/gguf/package.json" ]; then
  mkdir -p "$dir"
  npm install --silent --no-audit --no-fund --prefix "$dir" "@huggingface/gguf@$VERSION" >&2
fi
echo "$dir"
