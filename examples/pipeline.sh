#!/usr/bin/env bash
# A script around dracode: run a batch, read results.jsonl with jq, re-run what failed once.
#
#   examples/pipeline.sh MANIFEST [OUT]        (needs dracode on PATH, or DRACODE=path, and jq)
#
# Prints each task that did not pass with its status and error kind, the total cost and
# tokens, then re-runs only the failed tasks (--rerun-failed) into OUT-rerun. Exits with the
# last run's exit code (0: everything passed in the end).
set -euo pipefail

manifest=${1:?usage: pipeline.sh MANIFEST [OUT]}
out=${2:-dracode-out}
dracode=${DRACODE:-dracode}

report() {
  local results=$1
  # run.finished: counts, usage and cost of the whole run (total_cost_usd is null when a
  # model's price is unknown).
  jq -r 'select(.type == "run.finished")
    | "passed \(.counts.passed) of \(.counts | add) · \(.usage.input_tokens) input + \(.usage.output_tokens) output tokens · cost \(if .total_cost_usd == null then "unknown" else "$\(.total_cost_usd)" end) · exit code \(.exit_code)"' "$results"
  # One line per task that did not pass: id, status, error kind (infrastructure or the task's own).
  jq -r 'select(.type == "task.finished" and .status != "passed")
    | "  not passed: \(.task_id)\t\(.status)\t\(.error.kind // "-")\t\(.error.message // "" | split("\n")[0])"' "$results"
}

code=0
"$dracode" run "$manifest" --out "$out" --quiet || code=$?
# 1: a task did not pass; 5: a task could not be judged (no key, a provider that failed): both
# ran, so both are worth reporting and a re-run. Anything else stopped the batch.
if [ "$code" -ge 2 ] && [ "$code" -ne 5 ]; then
  echo "pipeline: dracode could not run the batch (exit code $code)" >&2
  exit "$code"
fi
report "$out/results.jsonl"

failed=$(jq -r 'select(.type == "task.finished" and .status != "passed") | .task_id' "$out/results.jsonl")
if [ -z "$failed" ]; then
  echo "pipeline: every task passed"
  exit 0
fi

# Infrastructure errors (rate limits, network, auth…) are worth another try; so is a flaky check.
echo "pipeline: re-running $(echo "$failed" | wc -l | tr -d ' ') task(s): $(echo "$failed" | tr '\n' ' ')"
code=0
"$dracode" run "$manifest" --rerun-failed "$out/results.jsonl" --out "$out-rerun" --quiet || code=$?
report "$out-rerun/results.jsonl"
exit "$code"
