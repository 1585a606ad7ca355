#!/usr/bin/env bash
# The `sluice` binary's exit codes: 0 for success and --help, 1 when the work failed (a run
# that cannot start, a file that cannot be read), 2 for every usage error, in every
# subcommand; --help lists each subcommand's options under their exact spellings.
#
#   tests/tools/cli_exit_codes.sh SLUICE_BINARY SOURCE_DIR
set -uo pipefail

sluice=${1:?usage: cli_exit_codes.sh SLUICE_BINARY SOURCE_DIR}
src=${2:?usage: cli_exit_codes.sh SLUICE_BINARY SOURCE_DIR}
ex=$src/examples/linear_regression
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect CODE ARGS...: runs sluice ARGS, output in $tmp/out and $tmp/err; checks the code.
expect() {
  local want=$1 got
  shift
  "$sluice" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  got=$?
  if [[ $got != "$want" ]]; then
    echo "FAIL: sluice $* exited $got, expected $want" >&2
    sed 's/^/  stderr: /' "$tmp/err" | head -5 >&2
    failures=$((failures + 1))
  fi
}

# contains FILE TEXT: FILE (out or err) holds TEXT.
contains() {
  if ! grep -qF -- "$2" "$tmp/$1"; then
    echo "FAIL: $1 of the last command lacks '$2'" >&2
    failures=$((failures + 1))
  fi
}

echo "---- the top level"
expect 2
contains err "usage: sluice <command>"
expect 2 frobnicate
contains err "unknown command 'frobnicate'"
for help in --help -h help; do
  expect 0 "$help"
  for command in demo run selfcheck stress replay; do contains out "  $command "; done
done

# Every subcommand's options, spelled exactly as it accepts them.
declare -A options=(
  [run]="--startup --feed --fetch --steps --device --streams --trace --sync-check --record --load --load-partial --save"
  [demo]="--steps --device --streams --trace --sync-check --record --write-programs"
  [selfcheck]="--sim-devices --jitter-us --seed --iterations --elements"
  [stress]="--programs --streams --devices --seed --jitter-us --no-soft-sync --expect-errors --tensors --ops --elements --scheduling --timeout-s --record --control-flow --device --keep-temporaries --depth --max-trips --fail-rate --fault-kinds --swallow-faults"
  [replay]="--device-map --check-sync --scheduling --repeat --no-verify --ops"
)
# A positional argument each needs, so that only the option under test is wrong.
declare -A positional=([run]="$ex/main.program" [replay]="$tmp/none.rec")
# An integer option of each, for the bad-number and repeated-option cases.
declare -A number=([run]=--steps [demo]=--steps [selfcheck]=--iterations [stress]=--programs
  [replay]=--repeat)

for command in run demo selfcheck stress replay; do
  echo "---- sluice $command"
  pos=${positional[$command]:-}
  expect 0 "$command" --help
  contains out "usage: sluice $command"
  for option in ${options[$command]}; do contains out "  $option"; done
  expect 0 "$command" -h
  expect 2 "$command" ${pos:+"$pos"} --bogus
  contains err "sluice $command: unknown option '--bogus'; see 'sluice $command --help'"
  expect 2 "$command" ${pos:+"$pos"} "${number[$command]}"
  contains err "option '${number[$command]}' needs a value"
  expect 2 "$command" ${pos:+"$pos"} "${number[$command]}" x
  contains err "option '${number[$command]}': 'x' is not"
  expect 2 "$command" ${pos:+"$pos"} "${number[$command]}" 2 "${number[$command]}" 2
  contains err "given more than once"
  expect 2 "$command" ${pos:+"$pos"} stray extra
  contains err "unexpected argument"
done

echo "---- missing positional arguments and bad values"
expect 2 run
contains err "missing PROGRAM"
expect 2 run --steps 3
expect 2 replay
contains err "missing FILE"
expect 2 run "$ex/main.program" --device tpu:0
expect 2 run "$ex/main.program" --feed x
contains err "option '--feed'"
expect 2 stress --scheduling sometimes
expect 2 stress --devices 99
expect 2 stress --control-flow --devices 2
contains err "option '--devices' does not apply to --control-flow"
expect 2 stress --control-flow --record "$tmp/cf.rec"
contains err "option '--record' does not apply to --control-flow"
expect 2 stress --depth 2
contains err "option '--depth' needs --control-flow"
expect 2 stress --max-trips 3
contains err "option '--max-trips' needs --control-flow"
expect 2 stress --control-flow --depth 99
contains err "option '--depth': '99' is not an integer in [0, 6]"
expect 2 stress --control-flow --ops x
expect 2 stress --control-flow --device sim:1
contains err "option '--device': 'sim:1' is not sim:0 or cpu"
expect 2 stress --device cpu
contains err "option '--device' needs --control-flow"
expect 2 stress --keep-temporaries
contains err "option '--keep-temporaries' needs --control-flow"
expect 2 stress --fail-rate 1.5
contains err "is not a probability"
expect 2 stress --fault-kinds kernel
contains err "need --fail-rate"
expect 2 stress --control-flow --fail-rate 0.1
expect 2 stress --fail-rate 0.1 --record "$tmp/faults.rec"
expect 2 selfcheck --sim-devices 99
expect 2 replay "$tmp/none.rec" --ops other
expect 2 run "$ex/main.program" --load-partial
contains err "--load-partial needs --load"

echo "---- failures"
expect 1 run "$ex/main.program" --feed x="$ex/x.npy"  # feed y missing
expect 1 run "$tmp/none.program"
expect 1 run "$ex/main.program" --feed x="$tmp/none.npy" --feed y="$ex/y.npy"
expect 1 run "$ex/main.program" --load "$tmp/empty" --feed x="$ex/x.npy" --feed y="$ex/y.npy"
contains err "$tmp/empty"
expect 1 run "$ex/main.program" --load "$tmp/empty" --load-partial --feed x="$ex/x.npy" \
  --feed y="$ex/y.npy"
contains err "$tmp/empty"
expect 1 replay "$tmp/none.rec"

echo "---- successes"
expect 0 selfcheck --iterations 2 --elements 16
expect 0 stress --programs 3 --streams 2 --devices 1
expect 0 stress --control-flow --programs 3 --streams 2 --jitter-us 10
contains out '"mismatches":0,"sync_errors":0,"programs_with_sync_errors":0,"hangs":0,"run_errors":0'
# Without soft sync a while loop may read a racy predicate and run on (a 'hang' found by the
# timeout): a short --timeout-s keeps such a run to seconds.
expect 0 stress --control-flow --programs 3 --streams 3 --no-soft-sync --expect-errors --timeout-s 5
expect 0 stress --control-flow --programs 3 --streams 2 --device cpu
expect 0 stress --control-flow --programs 3 --streams 2 --keep-temporaries --jitter-us 10
expect 1 stress --control-flow --programs 3 --streams 3 --no-soft-sync --timeout-s 5
expect 0 stress --programs 20 --streams 2 --fail-rate 0.05 --jitter-us 10
contains out '"faults_unnamed":0,"wrong_independent_results":0,"dependents_not_skipped":0}'
expect 1 stress --programs 20 --fail-rate 0.1 --fault-kinds kernel --swallow-faults
expect 0 stress --programs 20 --fail-rate 0.1 --fault-kinds kernel --swallow-faults --expect-errors
expect 0 demo --steps 3
expect 0 run "$ex/main.program" --startup "$ex/startup.program" --feed x="$ex/x.npy" \
  --feed y="$ex/y.npy" --fetch reduce_mean_0.out --steps 2 --save "$tmp/params"
contains out "saved"
for name in linear_0.w linear_0.b; do
  [[ -f "$tmp/params/$name.npy" ]] || { echo "FAIL: no $tmp/params/$name.npy" >&2; failures=$((failures + 1)); }
done
if compgen -G "$tmp/.params.saving-*" >/dev/null; then
  echo "FAIL: a temporary directory was left beside $tmp/params" >&2
  failures=$((failures + 1))
fi
expect 0 run "$ex/main.program" --load "$tmp/params" --feed x="$ex/x.npy" --feed y="$ex/y.npy" \
  --fetch=reduce_mean_0.out
# Two files gone: a load names both; a partial load leaves them as --startup made them.
rm "$tmp/params/linear_0.b.npy" "$tmp/params/learning_rate_0.npy"
expect 1 run "$ex/main.program" --load "$tmp/params" --feed x="$ex/x.npy" --feed y="$ex/y.npy"
contains err "variable 'linear_0.b'"
contains err "variable 'learning_rate_0'"
expect 0 run "$ex/main.program" --startup "$ex/startup.program" --load "$tmp/params" \
  --load-partial --feed x="$ex/x.npy" --feed y="$ex/y.npy"
contains out "left as initialized: linear_0.b, learning_rate_0"

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all exit codes as expected"
