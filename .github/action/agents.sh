#!/usr/bin/env bash
# Installs the coding agents a run needs (the action's `agents` input) from the npm registry:
#
#   agents.sh "claude-code codex"        each at the version dracode was tested with
#                                         (.github/action/agents.tsv)
#   agents.sh "claude-code@2.1.400"      another version of that agent
#
# Names are separated by spaces, commas or newlines; an unknown name fails the step before
# anything is installed, listing the known ones. Each is installed with `npm install -g`, then its program must answer `--version`.
# Nothing else is installed: an empty input installs nothing.
set -euo pipefail

die() {
  printf '::error title=dracode action::%s\n' "$1"
  exit 1
}

table="$(dirname "$0")/agents.tsv"
known=$(grep -v '^#' "$table" | cut -f1 | tr '\n' ' ')
words=$(printf '%s' "${1:-}" | tr ',\n' '  ')
# Every name is checked before anything is installed.
for word in $words; do
  grep -v '^#' "$table" | cut -f1 | grep -qx "${word%%@*}" || die "agents: unknown agent '${word%%@*}'; the agents are: $known"
done
for word in $words; do
  name=${word%%@*}
  version=${word#"$name"}
  version=${version#@}
  row=$(grep -v '^#' "$table" | awk -F '\t' -v n="$name" '$1 == n')
  package=$(printf '%s' "$row" | cut -f2)
  program=$(printf '%s' "$row" | cut -f4)
  [ -n "$version" ] || version=$(printf '%s' "$row" | cut -f3)
  echo "installing $name: npm install -g $package@$version"
  npm install -g --no-audit --no-fund --loglevel=error "$package@$version" || die "agents: npm install -g $package@$version failed"
  "$program" --version >/dev/null 2>&1 || die "agents: $name was installed but \`$program --version\` fails"
  echo "$name: $("$program" --version 2>/dev/null | head -n 1)"
done
