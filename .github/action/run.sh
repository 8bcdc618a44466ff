#!/usr/bin/env bash
# The action's run step: builds dracode's command line from the inputs (never re-split by the
# shell: see args.sh), runs it, writes the step outputs and decides the step's result.
#
# Inputs come as environment variables (the action maps `with:` to them; nothing from a
# workflow expression is pasted into this script's text):
#   INPUT_MANIFEST   manifest paths, shell-like quoting or one per line (may be empty with --task in args)
#   INPUT_PROVIDER INPUT_MODEL INPUT_JOBS INPUT_SHARD   one value each, optional
#   INPUT_FILTER     one filter per line (`tag:docs`, `fix-*`), taken literally
#   INPUT_ARGS       more `dracode run` arguments, shell-like quoting, any number of lines
#   INPUT_OUT        the output folder (default dracode-out)
#   INPUT_CACHE      the cache folder (`--cache`), optional
#   INPUT_FAIL_ON    any (default): the step fails unless dracode exits 0;
#                    error: it fails only when dracode could not do its job or judge the tasks
#                    (exit codes other than 0 and 1: bad input 2, results not written 3, no task
#                    selected 4, a task not judged 5 — a missing key, a provider that failed —,
#                    interrupted 130/143); failed tasks (1) are reported but leave the step
#                    green; never: it never fails
#   INPUT_ARTIFACT_NAME  the artifact's name (default dracode-out, plus -shard-K-of-N)
#   INPUT_UPLOAD_ARTIFACTS  true (default) when the next step uploads the output folder: the step
#                    summary then names the artifact that holds report.html
#   INPUT_PUBLISH    tasks: `dracode publish OUT` after the run (one pull request per passed task);
#                    combined: `dracode combine OUT`, then `dracode publish OUT --combined`; empty: none.
#                    Only when the run judged every task (exit 0 or 1); the token is GITHUB_TOKEN.
#   INPUT_PUBLISH_ARGS  more `dracode publish` arguments, shell-like quoting
# Also read: DRACODE_BIN (default: dracode on PATH), RUNNER_TEMP, GITHUB_OUTPUT.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1091 # args.sh sits beside this script
. "$here/args.sh"

fail() {
  printf '::error title=dracode action::%s\n' "$1"
  exit 2
}

# Appends the words of $1 (parsed by args.sh) to the array `cmd`.
append_words() {
  local parsed word
  parsed=$(mktemp)
  dracode_split_args "$1" >"$parsed" || { rm -f "$parsed"; fail "cannot parse $2: unmatched quote"; }
  while IFS= read -r -d '' word; do cmd+=("$word"); done <"$parsed"
  rm -f "$parsed"
}

out=${INPUT_OUT:-dracode-out}
fail_on=${INPUT_FAIL_ON:-any}
case $fail_on in any | error | never) ;; *) fail "fail-on must be any, error or never, not \"$fail_on\"" ;; esac
publish=${INPUT_PUBLISH:-}
case $publish in '' | tasks | combined) ;; *) fail "publish must be tasks, combined or empty, not \"$publish\"" ;; esac

cmd=("${DRACODE_BIN:-dracode}" run)
append_words "${INPUT_MANIFEST:-}" "manifest"
[ -n "${INPUT_PROVIDER:-}" ] && cmd+=(--provider "$INPUT_PROVIDER")
[ -n "${INPUT_MODEL:-}" ] && cmd+=(--model "$INPUT_MODEL")
[ -n "${INPUT_JOBS:-}" ] && cmd+=(--jobs "$INPUT_JOBS")
[ -n "${INPUT_SHARD:-}" ] && cmd+=(--shard "$INPUT_SHARD")
[ -n "${INPUT_CACHE:-}" ] && cmd+=(--cache "$INPUT_CACHE")
while IFS= read -r line || [ -n "$line" ]; do
  line=${line%$'\r'}
  # Trim blanks at both ends; blank lines are skipped.
  line=${line#"${line%%[![:space:]]*}"}
  line=${line%"${line##*[![:space:]]}"}
  [ -n "$line" ] && cmd+=(--filter "$line")
done <<<"${INPUT_FILTER:-}"
cmd+=(--out "$out")
append_words "${INPUT_ARGS:-}" "args"

outputs=$(mktemp "${RUNNER_TEMP:-/tmp}/dracode-outputs.XXXXXX")
cmd+=(--github-output "$outputs")

printf 'dracode action: running'
printf ' %q' "${cmd[@]}"
printf '\n'
"${cmd[@]}"
code=$?

if [ -n "${GITHUB_OUTPUT:-}" ]; then
  {
    # dracode's own outputs, but the exit code is the process's (an artifact that could not
    # be written after run.finished turns the code into 3).
    grep -v '^exit-code=' "$outputs" || true
    printf 'exit-code=%s\n' "$code"
    if [ ! -s "$outputs" ]; then printf 'out=%s\n' "$out"; fi
    name=${INPUT_ARTIFACT_NAME:-}
    if [ -z "$name" ]; then
      name=dracode-out
      shard=${INPUT_SHARD:-}
      if [ -n "$shard" ]; then name="$name-shard-$(printf '%s' "${shard//\//-of-}" | tr -c 'A-Za-z0-9._-' '-')"; fi
    fi
    printf 'artifact-name=%s\n' "$name"
  } >>"$GITHUB_OUTPUT"
  # The step summary names the page: where a person finds each task's output, diff and
  # conversation (the artifact is uploaded by the next step unless upload-artifacts is off).
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$out/report.html" ]; then
    if [ "${INPUT_UPLOAD_ARTIFACTS:-true}" = true ]; then
      printf '\n**Report:** download the artifact `%s` of this run and open `report.html` in it.\n' "$name" >>"$GITHUB_STEP_SUMMARY"
    else
      printf '\n**Report:** `%s/report.html`.\n' "$out" >>"$GITHUB_STEP_SUMMARY"
    fi
  fi
fi
rm -f "$outputs"

# Publishes the run's passed tasks (INPUT_PUBLISH); its exit code.
publish_run() {
  local bin=${DRACODE_BIN:-dracode} combined=() code=0
  if [ "$publish" = combined ]; then
    "$bin" combine "$out" || code=$?
    # 1: a patch conflicts (the union holds the rest); 4: nothing to combine.
    if [ "$code" -eq 4 ]; then return 0; fi
    if [ "$code" -ne 0 ] && [ "$code" -ne 1 ]; then return "$code"; fi
    combined=(--combined)
  fi
  # (bash 3.2 takes an empty array for unset under `set -u`: hence the `+` form)
  cmd=("$bin" publish "$out" ${combined[@]+"${combined[@]}"})
  append_words "${INPUT_PUBLISH_ARGS:-}" "publish-args"
  printf 'dracode action: publishing'
  printf ' %q' "${cmd[@]}"
  printf '\n'
  "${cmd[@]}"
}

if [ -n "$publish" ] && { [ "$code" -eq 0 ] || [ "$code" -eq 1 ]; }; then
  publish_code=0
  publish_run || publish_code=$?
  if [ "$publish_code" -ne 0 ]; then
    printf '::error title=dracode publish::exit code %s: the passed tasks were not all published (see above)\n' "$publish_code"
    if [ "$fail_on" != never ]; then exit "$publish_code"; fi
  fi
fi

case $fail_on in
  any) exit "$code" ;;
  # 1 alone means "the agents' work fell short"; every other code (5 included) means the run
  # could not be trusted to have judged it.
  error) if [ "$code" -eq 0 ] || [ "$code" -eq 1 ]; then exit 0; else exit "$code"; fi ;;
  never) exit 0 ;;
esac
