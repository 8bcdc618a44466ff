#!/usr/bin/env bash
# The figures of docs/src/performance.md: builds the release binary as `cargo build --release` (and
# `cargo install`) make it, keeps a copy, and runs `cargo bench --bench overhead` against that
# copy (DRACODE_BENCH_BIN). A bench build unifies the dev-dependencies' features, so the binary it
# builds at the same path differs from the one users run. Arguments go to the bench:
# `scripts/bench.sh scale` runs one section.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
target=$(cd "${CARGO_TARGET_DIR:-target}" && pwd)
mkdir -p "$target/bench-bin"
cp "$target/release/dracode" "$target/bench-bin/dracode"
DRACODE_BENCH_BIN="$target/bench-bin/dracode" cargo bench --locked --bench overhead -- "$@"
