#!/usr/bin/env bash
# `sluice demo --data-parallel` and `sluice run --data-parallel` under mpirun:
#  - 2 ranks print the single-process demo's losses (whole batch) within 1e-5 relative, on
#    cpu and on sim with the sync checker;
#  - 3 ranks cannot split the demo's 16 rows: exit 1, naming the feed;
#  - `sluice run` on examples/linear_regression: the same fetches as one process; --save
#    (rank 0) and --load;
#  - a rank killed with SIGKILL in the middle of training: the other rank exits non-zero
#    within the collective timeout, with a message naming the dead rank and its pid.
#
#   tests/tools/data_parallel_cli.sh SLUICE_BINARY MPIRUN SOURCE_DIR
set -uo pipefail

sluice=${1:?usage: data_parallel_cli.sh SLUICE_BINARY MPIRUN SOURCE_DIR}
mpirun=${2:?usage: data_parallel_cli.sh SLUICE_BINARY MPIRUN SOURCE_DIR}
src=${3:?usage: data_parallel_cli.sh SLUICE_BINARY MPIRUN SOURCE_DIR}
ex=$src/examples/linear_regression
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
launch=("$mpirun" --oversubscribe --allow-run-as-root)

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# losses FILE: the "step N loss X" and final lines of a demo's output, as "N X" pairs.
losses() { awk '/^step / { print $2, $4 }' "$1"; }

# same_losses A B: every step's loss within 1e-5 relative, and the same steps.
same_losses() {
  paste -d' ' <(losses "$1") <(losses "$2") | awk '
    { n++; if ($1 != $3) bad = 1; d = $2 - $4; if (d < 0) d = -d; m = $4 < 0 ? -$4 : $4;
      if (d > 1e-5 * m + 1e-12) { bad = 1; print "  step " $1 ": " $2 " vs " $4 } }
    END { exit (bad || n == 0) }'
}

echo "---- demo: 2 ranks against one process (cpu)"
"$sluice" demo >"$tmp/single.out" 2>&1 || fail "single-process demo failed"
"${launch[@]}" -np 2 "$sluice" demo --data-parallel >"$tmp/dp.out" 2>"$tmp/dp.err" ||
  fail "data-parallel demo failed: $(head -3 "$tmp/dp.err")"
same_losses "$tmp/dp.out" "$tmp/single.out" || fail "2-rank losses differ from one process's"
grep -q "data parallel across 2 ranks" "$tmp/dp.out" || fail "the demo did not say it ran on 2 ranks"
[[ $(grep -c '^step ' "$tmp/dp.out") == $(grep -c '^step ' "$tmp/single.out") ]] ||
  fail "rank 0 alone should print the steps"

echo "---- demo: 2 ranks on sim with the sync checker"
"$sluice" demo --device sim:0 --streams 2 >"$tmp/single_sim.out" 2>&1 || fail "sim demo failed"
"${launch[@]}" -np 2 "$sluice" demo --data-parallel --device sim:0 --streams 2 --sync-check \
  >"$tmp/dp_sim.out" 2>"$tmp/dp_sim.err" || fail "sim data-parallel demo failed: $(head -3 "$tmp/dp_sim.err")"
same_losses "$tmp/dp_sim.out" "$tmp/single_sim.out" || fail "sim: 2-rank losses differ"
grep -q "sync check: 0 violations" "$tmp/dp_sim.out" || fail "sim: the sync checker found violations"

echo "---- demo: 3 ranks cannot split 16 rows"
if "${launch[@]}" -np 3 "$sluice" demo --data-parallel --ccl-timeout 20 >"$tmp/np3.out" 2>"$tmp/np3.err"; then
  fail "a 3-rank demo over 16 rows passed"
fi
grep -q "does not split into 3 equal parts" "$tmp/np3.err" || fail "3 ranks: no message naming the split"

echo "---- run: examples/linear_regression on 2 ranks, saved and loaded"
run_args=("$ex/main.program" --startup "$ex/startup.program" --feed x="$ex/x.npy"
  --feed y="$ex/y.npy" --fetch reduce_mean_0.out --steps 5)
"$sluice" run "${run_args[@]}" >"$tmp/run_single.out" 2>&1 || fail "single run failed"
"${launch[@]}" -np 2 "$sluice" run "${run_args[@]}" --data-parallel --save "$tmp/params" \
  >"$tmp/run_dp.out" 2>"$tmp/run_dp.err" || fail "data-parallel run failed: $(head -3 "$tmp/run_dp.err")"
paste -d' ' <(grep '^step' "$tmp/run_single.out") <(grep '^step' "$tmp/run_dp.out") | awk '
  { a = $4; b = $8; sub(/.*\[/, "", a); sub(/\].*/, "", a); sub(/.*\[/, "", b); sub(/\].*/, "", b);
    d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a; n++; if (d > 1e-5 * m) bad = 1 }
  END { exit (bad || n != 5) }' || fail "run: 2-rank fetches differ from one process's"
ls "$tmp/params"/*.npy >/dev/null 2>&1 || fail "run --save wrote no parameters"
"$sluice" run "$ex/main.program" --load "$tmp/params" --feed x="$ex/x.npy" --feed y="$ex/y.npy" \
  --fetch reduce_mean_0.out >/dev/null 2>&1 || fail "the saved parameters do not load"

echo "---- a rank killed in the middle of training"
"${launch[@]}" -np 2 "$sluice" demo --data-parallel --steps 100000000 --ccl-timeout 30 \
  >"$tmp/kill.out" 2>"$tmp/kill.err" &
job=$!
victim=""
for _ in $(seq 1 200); do  # up to 20 s for both ranks to start and a step to print
  victim=$(sed -n 's/.*rank 1 of 2 (pid \([0-9]*\).*/\1/p' "$tmp/kill.out" | head -1)
  if [[ -n $victim ]] && grep -q '^step  10 ' "$tmp/kill.out"; then break; fi
  sleep 0.1
done
if [[ -z $victim ]]; then
  fail "rank 1 never started"
  kill "$job" 2>/dev/null
else
  start=$SECONDS
  kill -9 "$victim"
  wait "$job"
  code=$?
  elapsed=$((SECONDS - start))
  [[ $code != 0 ]] || fail "the job exited 0 after a rank was killed"
  ((elapsed < 30)) || fail "the surviving rank took ${elapsed}s (timeout 30 s)"
  grep -q "rank 1 (pid $victim)" "$tmp/kill.err" ||
    fail "no message naming rank 1 (pid $victim): $(grep sluice "$tmp/kill.err" | head -2)"
  echo "  rank 1 (pid $victim) killed; the job ended in ${elapsed}s with exit $code"
  grep "sluice demo" "$tmp/kill.err" | head -1 | sed "s/^/  /"; echo
fi

if ((failures > 0)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "data-parallel CLI: all checks passed"
