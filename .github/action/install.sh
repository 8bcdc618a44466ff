#!/usr/bin/env bash
# Installs dracode for the action, in three steps the action runs around its caches:
#
#   install.sh resolve   which version, for which target, into which folder, and how
#                        (outputs: version, target, dir, method=release|cargo, source-key)
#   install.sh fetch     method=release: downloads dracode-<target>.tar.gz of the release and
#                        its .sha256, verifies the checksum, unpacks to <dir>/bin. A release
#                        without that asset falls back to cargo (method=cargo in the outputs)
#                        when the action's own source is that version; a checksum that does
#                        not match fails the step, and so does a download that fails for
#                        another reason than a missing file (no network, DNS, TLS, a server
#                        error), naming curl's error or the HTTP status.
#   install.sh build     method=cargo: cargo install --locked from the action's own checkout.
#
# Which release, however the action is pinned (`version` input, else the action's ref):
#   v1.2.3        that release;
#   v1, v1.2      the newest release v1.x.y / v1.2.y (from the releases API; tags with a suffix
#                 such as -rc.1, drafts and prereleases are skipped), else — the API unreachable —
#                 the action's own version when it matches;
#   a commit SHA  the release of the action's own version (its Cargo.toml), checksum-verified;
#   latest        the newest release;
#   a branch, `./` or no release matching: built from the action's source with cargo, said in
#   one line.
#
# Every step skips its work when <dir>/bin/dracode is already there (restored from a cache),
# and puts <dir>/bin on GITHUB_PATH.
# Reads: INPUT_VERSION, DRACODE_ACTION_REF and DRACODE_ACTION_REPOSITORY (else GITHUB_ACTION_*,
# else the checkout path), GITHUB_ACTION_PATH, GITHUB_SERVER_URL and GITHUB_API_URL (where
# releases and the releases API are; github.com's by default), RUNNER_OS, RUNNER_ARCH,
# RUNNER_TOOL_CACHE, GITHUB_OUTPUT, GITHUB_PATH; DRACODE_RELEASE_URL overrides the download
# base (default $GITHUB_SERVER_URL/<repository>/releases), e.g. for a mirror.
# Nothing secret is needed or read: release downloads and the releases list are anonymous.
set -euo pipefail

output() { printf '%s=%s\n' "$1" "$2" >>"${GITHUB_OUTPUT:-/dev/null}"; }
die() {
  printf '::error title=dracode action::%s\n' "$1"
  exit 1
}

target_of_runner() {
  case "${RUNNER_OS:-$(uname -s)}-${RUNNER_ARCH:-$(uname -m)}" in
    Linux-X64 | Linux-x86_64) echo x86_64-unknown-linux-musl ;;
    Linux-ARM64 | Linux-aarch64) echo aarch64-unknown-linux-musl ;;
    macOS-ARM64 | Darwin-arm64) echo aarch64-apple-darwin ;;
    macOS-X64 | Darwin-x86_64) echo x86_64-apple-darwin ;;
    *) echo unsupported ;;
  esac
}

# A key that changes with the action's source: its commit, else a hash of Cargo.lock and src/.
source_key() {
  local path=${GITHUB_ACTION_PATH:-.}
  if git -C "$path" rev-parse HEAD 2>/dev/null; then return; fi
  (cd "$path" && find Cargo.lock Cargo.toml build.rs src -type f 2>/dev/null | LC_ALL=C sort | xargs cat | sha256) | cut -c1-40
}

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum | cut -d' ' -f1; else shasum -a 256 | cut -d' ' -f1; fi
}

# The action's own ref and repository. GitHub leaves GITHUB_ACTION_REF/_REPOSITORY empty inside
# composite actions (actions/runner#2473), so the action passes them as DRACODE_ACTION_*; the
# checkout path, .../_actions/OWNER/REPO/REF, is the last resort.
action_ref() {
  local ref=${DRACODE_ACTION_REF:-${GITHUB_ACTION_REF:-}}
  case ${ref:-}:${GITHUB_ACTION_PATH:-} in
    :*/_actions/*/*/*) ref=$(basename "$GITHUB_ACTION_PATH") ;;
  esac
  printf '%s' "$ref"
}

# The action's repository (OWNER/REPO); empty when it cannot be known (`uses: ./`).
action_repository() {
  local repo=${DRACODE_ACTION_REPOSITORY:-${GITHUB_ACTION_REPOSITORY:-}}
  case ${repo:-}:${GITHUB_ACTION_PATH:-} in
    :*/_actions/*/*/*) repo="$(basename "$(dirname "$(dirname "$GITHUB_ACTION_PATH")")")/$(basename "$(dirname "$GITHUB_ACTION_PATH")")" ;;
  esac
  printf '%s' "$repo"
}

# The version in the action's own Cargo.toml (`0.3.1`), empty when there is none.
source_version() {
  local manifest=${GITHUB_ACTION_PATH:-.}/Cargo.toml
  [ -f "$manifest" ] || return 0
  sed -n 's/^version = "\(.*\)"$/\1/p' "$manifest" | head -n 1
}

# The release tags of the action's repository, newest version first: from the releases API,
# without drafts, prereleases and tags that are not vX.Y.Z. Fails when the list cannot be read.
release_tags() {
  local repo api json
  repo=$(action_repository)
  [ -n "$repo" ] || return 1
  api=${GITHUB_API_URL:-https://api.github.com}
  json=$(curl -fsSL --retry 2 -H 'Accept: application/vnd.github+json' "$api/repos/$repo/releases?per_page=100") || return 1
  if command -v jq >/dev/null 2>&1; then
    printf '%s' "$json" | jq -r '.[] | select((.draft | not) and (.prerelease | not)) | .tag_name'
  elif command -v python3 >/dev/null 2>&1; then
    printf '%s' "$json" | python3 -c 'import json,sys; [print(r["tag_name"]) for r in json.load(sys.stdin) if not r.get("draft") and not r.get("prerelease")]'
  else
    printf '%s' "$json" | grep -o '"tag_name": *"[^"]*"' | sed 's/.*"\(v[^"]*\)"$/\1/'
  fi | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sed 's/^v//' | sort -t. -k1,1nr -k2,2nr -k3,3nr | sed 's/^/v/'
}

# The newest release matching a major or minor tag (`v1` → v1.x.y, `v1.2` → v1.2.y); prints
# how it was chosen on stderr. Empty when nothing matches.
newest_matching() {
  local prefix=$1 tags own
  if tags=$(release_tags); then
    printf '%s\n' "$tags" | grep -F -m 1 "$prefix." || true
    return
  fi
  own=$(source_version)
  case v$own in
    "$prefix".*)
      echo "dracode action: the releases list could not be read; using the action's own version v$own for $prefix" >&2
      printf 'v%s' "$own"
      ;;
  esac
}

# The version to install for what was asked (`v1.2.3`, `v1`, `latest`, a commit, a branch);
# `source` for a build from the action's checkout. One line on stderr says why when it is not
# what was asked as is.
pick_version() {
  local asked=$1 own found
  own=$(source_version)
  case $asked in
    latest | source) printf '%s' "$asked" ;;
    v[0-9]*.[0-9]*.[0-9]*) printf '%s' "$asked" ;;
    v[0-9]* | v[0-9]*.[0-9]*)
      found=$(newest_matching "$asked")
      if [ -n "$found" ]; then
        echo "dracode action: $asked is release $found (the newest matching one)" >&2
        printf '%s' "$found"
      else
        printf '::notice title=dracode action::no release matches %s; building from the action source with cargo\n' "$asked" >&2
        printf source
      fi
      ;;
    *)
      if [[ $asked =~ ^[0-9a-f]{40}$ ]] && [ -n "$own" ]; then
        echo "dracode action: pinned to commit ${asked:0:12}, whose Cargo.toml is version $own: installing release v$own" >&2
        printf 'v%s' "$own"
      else
        printf source # a branch or `uses: ./`: build what the action holds
      fi
      ;;
  esac
}

resolve() {
  local asked=${INPUT_VERSION:-} version target method dir
  [ -n "$asked" ] || asked=$(action_ref)
  [ -n "$asked" ] || asked=source
  version=$(pick_version "$asked")
  target=$(target_of_runner)
  method=release
  if [ "$version" = source ]; then method=cargo; fi
  if [ "$target" = unsupported ]; then
    [ "$method" = release ] && printf '::notice title=dracode action::no release binary for %s-%s; building from source\n' "${RUNNER_OS:-}" "${RUNNER_ARCH:-}"
    method=cargo
  fi
  dir="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}/dracode/$version/$target"
  output version "$version"
  output target "$target"
  output dir "$dir"
  output method "$method"
  output source-key "$(source_key)"
  echo "dracode action: version $version, target $target, install by $method into $dir"
}

on_path() {
  echo "$1/bin" >>"${GITHUB_PATH:-/dev/null}"
  "$1/bin/dracode" --version
}

fetch() {
  local version=$1 target=$2 dir=$3
  if [ -x "$dir/bin/dracode" ]; then
    on_path "$dir"
    return
  fi
  if [ -z "$(action_repository)" ] && [ -z "${DRACODE_RELEASE_URL:-}" ]; then
    printf '::notice title=dracode action::the action repository is unknown, and so are its releases; building from source with cargo\n'
    output method cargo
    return
  fi
  local base=${DRACODE_RELEASE_URL:-${GITHUB_SERVER_URL:-https://github.com}/$(action_repository)/releases}
  local url own
  if [ "$version" = latest ]; then url="$base/latest/download"; else url="$base/download/$version"; fi
  local asset="dracode-$target.tar.gz" tmp
  tmp=$(mktemp -d)
  local status
  if ! status=$(download "$url/$asset" "$tmp/$asset"); then
    rm -rf "$tmp"
    case $status in
      missing:*) ;;
      *) die "cannot download $url/$asset: ${status#*:}. A network or server problem, not a missing release: re-run the job, or set DRACODE_RELEASE_URL to a reachable mirror" ;;
    esac
    own=$(source_version)
    # Building the action's source gives its own version: right only when that is what was asked.
    if [ -n "$own" ] && [ "$version" != "v$own" ]; then
      die "no release $version of dracode (no $asset at $url), and the action's source is v$own: pick a released version (see $base)"
    fi
    printf '::notice title=dracode action::no release asset %s at %s (%s); building from source with cargo\n' "$asset" "$url" "${status#*:}"
    output method cargo
    return
  fi
  curl -fsSL --retry 3 -o "$tmp/$asset.sha256" "$url/$asset.sha256" || die "the release has $asset but no $asset.sha256: refusing an unverified binary"
  local want got
  want=$(cut -d' ' -f1 <"$tmp/$asset.sha256")
  got=$(sha256 <"$tmp/$asset")
  [ -n "$want" ] && [ "$want" = "$got" ] || die "checksum mismatch for $asset: expected $want, got $got"
  mkdir -p "$dir/bin"
  tar -xzf "$tmp/$asset" -C "$dir/bin" dracode
  rm -rf "$tmp"
  on_path "$dir"
}

# Downloads $1 to $2. On failure prints `missing:WHY` when the server says there is no such
# file (HTTP 404 or 410, or no such file:// path), else `network:WHY` (no connection, DNS, TLS,
# a timeout, another HTTP status), and fails.
download() {
  local code rc=0
  code=$(curl -sSL --retry 3 -o "$2" -w '%{http_code}' "$1" 2>"$2.err") || rc=$?
  if [ "$rc" = 0 ] && { [ "$code" = 200 ] || [ "$code" = 000 ]; }; then
    rm -f "$2.err"
    return 0
  fi
  local why
  why=$(tr '\n' ' ' <"$2.err" | sed 's/^curl: //; s/ *$//')
  case $rc:$code in
    0:404 | 0:410) printf 'missing:HTTP %s' "$code" ;;
    37:*) printf 'missing:%s' "${why:-no such file}" ;;
    0:*) printf 'network:the server answered HTTP %s' "$code" ;;
    *) printf 'network:curl exit %s: %s' "$rc" "${why:-no details}" ;;
  esac
  return 1
}

build() {
  local dir=$1
  if [ ! -x "$dir/bin/dracode" ]; then
    command -v cargo >/dev/null 2>&1 || die "no release binary and no cargo to build one: install a Rust toolchain first, or pick a released version"
    cargo install --locked --path "${GITHUB_ACTION_PATH:-.}" --root "$dir"
  fi
  on_path "$dir"
}

case ${1:-} in
  resolve) resolve ;;
  fetch) fetch "$2" "$3" "$4" ;;
  build) build "$2" ;;
  *) die "usage: install.sh resolve | fetch VERSION TARGET DIR | build DIR" ;;
esac
