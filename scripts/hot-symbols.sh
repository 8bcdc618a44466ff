#!/usr/bin/env bash
# Regenerates link/hot-symbols.txt: the functions typical runs execute, which build.rs asks the
# linker to place together at the start of the code (see build/link.rs and README "Performance").
# Run it after changing the compiler, Cargo.lock, the release profile or the crate's version; a
# stale list costs memory, never correctness. Needs valgrind and python3; takes a few minutes
# (a release build, then four runs under callgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)
work=$(mktemp -d /tmp/dracode-hot.XXXXXX)
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

echo "== release build with a link map"
DRACODE_LINK_MAP="$work/dracode.map" cargo build --release --locked --quiet
bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/dracode"

# Landlock and seccomp are not available under valgrind: the runs profiled here use --sandbox off
# (the confined path runs in the supervisor, a separate process).
profile() {
  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/callgrind.%p" --trace-children=no -q "$bin" "$@" >/dev/null 2>&1 || true
}

echo "== profiling: the bundled example (replay provider)"
cp -r examples/quickstart.toml examples/quickstart "$work/"
(cd "$work" && profile run quickstart.toml --out out-replay --sandbox off && profile validate quickstart.toml && profile list quickstart.toml)

echo "== profiling: an OpenAI-compatible server on 127.0.0.1 (HTTP, streaming, tool calls)"
python3 "$here/scripts/mock_openai.py" >"$work/port" &
server=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
cat >"$work/dracode.toml" <<TOML
[providers.local]
type = "openai"
base_url = "http://127.0.0.1:$(cat "$work/port")/v1"
model = "gpt-4o"
api_key = "sk-local"
TOML
cat >"$work/http.toml" <<'TOML'
[defaults]
provider = "local"
repo = "quickstart/project"
isolation = "copy"
max_iterations = 6

[[tasks]]
id = "notes"
prompt = "Read greet.sh and write NOTES.md."
check = "test -f NOTES.md"
TOML
(cd "$work" && profile run http.toml --out out-http --sandbox off)

python3 "$here/scripts/hot_symbols.py" "$work/dracode.map" "$work"/callgrind.* >"$here/link/hot-symbols.txt"
echo "== wrote link/hot-symbols.txt; rebuild (cargo build --release) to link with it"
