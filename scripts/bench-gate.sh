#!/usr/bin/env bash
# The benchmark gate (issue 43; docs/src/performance.md#the-benchmark-gate): builds the release
# binary of BASE (a commit-ish; default: the merge base with origin/main) and of the checkout,
# then runs `cargo bench --bench overhead -- gate`, which times both in turn on a one-task run
# and on 1,000 one-turn tasks at --jobs 64 and fails (exit 1) when the change is more than 15%
# slower on either. The base is built in a worktree of its own, beside the checkout's target.
#
#   scripts/bench-gate.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
base_ref=${1:-$(git merge-base HEAD origin/main)}
base=$(git rev-parse --verify "$base_ref^{commit}")
target=$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dracode-gate.XXXXXX")
trap 'git worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

echo "== the change: $(git rev-parse --short HEAD)"
cargo build --release --locked --quiet
mkdir -p "$target/bench-bin"
cp "$target/release/dracode" "$target/bench-bin/dracode-change"

echo "== the base: $(git rev-parse --short "$base") ($base_ref)"
git worktree add --quiet --detach "$work/base" "$base"
(cd "$work/base" && CARGO_TARGET_DIR="$target/gate-base" cargo build --release --locked --quiet)
cp "$target/gate-base/release/dracode" "$target/bench-bin/dracode-base"

echo "== the gate"
DRACODE_BENCH_BIN="$target/bench-bin/dracode-change" DRACODE_BENCH_BASE_BIN="$target/bench-bin/dracode-base" \
  cargo bench --locked --bench overhead -- gate
