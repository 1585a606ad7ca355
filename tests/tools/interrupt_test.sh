#!/usr/bin/env bash
# SIGTERM and SIGINT ending long CLI runs under load: `sluice stress` with programs of 10^4
# ops on four sim streams with jitter (10^4 instructions in flight) and `sluice run` of the
# power iteration on sim for a million steps. Each is signalled mid-run and must exit within
# 30 s (no hang) with 128 + the signal's number and a line naming the signal. Both signals.
#
#   interrupt_test.sh SLUICE SOURCE_DIR
set -euo pipefail
sluice=${1:?usage: interrupt_test.sh SLUICE SOURCE_DIR}
src=${2:?usage: interrupt_test.sh SLUICE SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

ex=$src/examples/control_flow
run_cmd=("$sluice" run "$ex/power_iteration.program" --feed "A=$ex/A.npy" --feed "v0=$ex/v0.npy"
  --feed "tol=$ex/tol.npy" --feed "gap0=$ex/gap0.npy" --device sim:0 --steps 1000000)
stress_cmd=("$sluice" stress --devices 1 --streams 4 --ops 10000 --tensors 64 --elements 16
  --jitter-us 20 --programs 100000)

# interrupt NAME SIGNAL WANT_CODE CMD...: start CMD, wait until it prints or 3 s pass,
# signal it, and check the exit within 30 s.
interrupt() {
  local name=$1 sig=$2 want=$3
  shift 3
  local out=$work/$name.out err=$work/$name.err
  "$@" >"$out" 2>"$err" &
  local pid=$!
  local waited=0
  until [[ -s $out || -s $err ]] || ((waited >= 30)); do sleep 0.1; waited=$((waited + 1)); done
  sleep 1  # well inside the run: steps or programs in flight
  kill -s "$sig" "$pid"
  local t0=$SECONDS rc=0
  while kill -0 "$pid" 2>/dev/null && ((SECONDS - t0 < 30)); do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "FAIL $name: still running 30 s after SIG$sig" >&2
    kill -KILL "$pid"
    failures=$((failures + 1))
    return
  fi
  wait "$pid" || rc=$?
  if ((rc != want)); then
    echo "FAIL $name: exit $rc, want $want; stderr:" >&2
    cat "$err" >&2
    failures=$((failures + 1))
  elif ! grep -q "interrupted by SIG$sig" "$err"; then
    echo "FAIL $name: no 'interrupted by SIG$sig' on stderr:" >&2
    cat "$err" >&2
    failures=$((failures + 1))
  else
    echo "ok   $name: exit $rc in $((SECONDS - t0)) s: $(grep -m1 interrupted "$err")"
  fi
}

interrupt run_term TERM 143 "${run_cmd[@]}"
interrupt run_int INT 130 "${run_cmd[@]}"
interrupt stress_term TERM 143 "${stress_cmd[@]}"
interrupt stress_int INT 130 "${stress_cmd[@]}"

if ((failures)); then
  echo "interrupt_test: $failures failure(s)" >&2
  exit 1
fi
echo "interrupt_test: all passed"
