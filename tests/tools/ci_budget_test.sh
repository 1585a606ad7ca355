#!/usr/bin/env bash
# CI's time budget, checked from .ci/run itself: every stage in its STAGES list has a budget
# in STAGE_BUDGET, and the budgets sum to at most CI_TOTAL_BUDGET, itself at most 2,700 s
# (45 minutes on the 2-core CI machine).
#   tests/tools/ci_budget_test.sh [CI_SCRIPT]   check a script (default .ci/run)
#   tests/tools/ci_budget_test.sh --self-test   prove the check fails on a script over budget
#                                               and on a stage without a budget
set -euo pipefail
limit=2700

check() {
  local script=$1
  local budgets stages sum=0 total missing=()
  budgets=$(sed -n '/^declare -A STAGE_BUDGET=(/,/^)/p' "$script" |
    sed -n 's/^ *\[\([a-z_]*\)\]=\([0-9]*\) *$/\1 \2/p')
  if [[ -z $budgets ]]; then
    echo "ci_budget: no STAGE_BUDGET table in $script" >&2
    return 1
  fi
  while read -r _ seconds; do sum=$((sum + seconds)); done <<<"$budgets"
  # The stages .ci/run runs: its STAGES=(...) list.
  stages=$(sed -n 's/^STAGES=(\(.*\))$/\1/p' "$script")
  if [[ -z $stages ]]; then
    echo "ci_budget: no STAGES=(...) list in $script" >&2
    return 1
  fi
  local stage
  for stage in $stages; do
    grep -qx "$stage [0-9]*" <<<"$budgets" || missing+=("$stage")
  done
  total=$(sed -n 's/^CI_TOTAL_BUDGET=\([0-9]*\)$/\1/p' "$script")
  echo "ci_budget: $(wc -l <<<"$budgets") stage budgets sum to ${sum}s (total budget ${total:-?}s, limit ${limit}s)"
  if ((${#missing[@]} > 0)); then
    echo "ci_budget: stages without a budget: ${missing[*]}" >&2
    return 1
  fi
  if [[ -z $total ]] || ((total > limit)); then
    echo "ci_budget: CI_TOTAL_BUDGET must be set and at most ${limit}s" >&2
    return 1
  fi
  if ((sum > total)); then
    echo "ci_budget: the stage budgets (${sum}s) exceed CI_TOTAL_BUDGET (${total}s)" >&2
    return 1
  fi
}

if [[ ${1:-} == --self-test ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  printf 'CI_TOTAL_BUDGET=2700\ndeclare -A STAGE_BUDGET=(\n  [a]=2000\n  [b]=701\n)\nSTAGES=(a b)\n' >"$tmp/over"
  printf 'CI_TOTAL_BUDGET=2700\ndeclare -A STAGE_BUDGET=(\n  [a]=20\n)\nSTAGES=(a b)\n' >"$tmp/missing"
  printf 'CI_TOTAL_BUDGET=2700\ndeclare -A STAGE_BUDGET=(\n  [a]=2000\n  [b]=700\n)\nSTAGES=(a b)\n' >"$tmp/fits"
  for bad in over missing; do
    if check "$tmp/$bad" >/dev/null 2>&1; then
      echo "ci_budget self-test: the '$bad' script passed the check" >&2
      exit 1
    fi
  done
  check "$tmp/fits" >/dev/null || { echo "ci_budget self-test: a fitting script failed" >&2; exit 1; }
  echo "ci_budget self-test: OK (over budget and missing budget both refused)"
  exit 0
fi
check "${1:-.ci/run}"
