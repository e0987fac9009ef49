#!/usr/bin/env bash
# Builds the Rust sample plugin (no crates, so it works offline). Prints the .so's path.
# CARGO_TARGET_DIR chooses where the build goes (default: ./target, ignored by git).
set -euo pipefail
cd "$(dirname "$0")"
cargo build --offline --release --quiet
echo "${CARGO_TARGET_DIR:-$(pwd)/target}/release/librust_example.so"
