#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz/ for a time budget each.
#
#   scripts/fuzz.sh [--seconds N] [--parallel P] [--build-dir DIR] [--configured] [--merge]
#                   [--seed N] [TARGET...]
#
# Configures and builds a clang fuzzing build (SLUICE_SANITIZE=fuzzer: AddressSanitizer,
# UBSan and libFuzzer's coverage, -O1 -g1) in DIR (default build-fuzz), then runs each TARGET
# (default: every one) for N seconds (default 60). Each target starts from a copy of its seed
# corpus, tests/fuzz/corpus/TARGET/, kept in DIR/corpus/TARGET/ so the repository's corpus
# is not touched; --merge adds the inputs that reached new coverage to the repository's
# corpus afterwards (libFuzzer's -merge=1). A crash, leak, timeout (10 s per input) or
# failed round-trip check stops that target; its input is saved as
# DIR/artifacts/TARGET/crash-* (reproduce with `DIR/tests/fuzz/TARGET FILE`), and the script
# exits 1 after the remaining targets ran. One summary line per target: executions,
# executions per second, coverage (edges) and corpus size. --configured: DIR is already
# configured as a fuzzing build (CI's sanitizer stage builds its tests there too); only the
# targets are built. --parallel P: up to P targets fuzz at once (default SLUICE_JOBS, or 2;
# a libFuzzer process uses one core), each for its N seconds; the summary keeps target order.
# --seed N: libFuzzer's random seed (default: a new one each run). With a fixed seed a run
# mutates in the same order every time, so a shorter run (a slower machine) does a prefix
# of a longer one: CI fixes it, and its findings reproduce here with the same seed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=60
build=build-fuzz
merge=0
configured=0
seed=
targets=()
jobs=${SLUICE_JOBS:-2}
parallel=$jobs
all_targets=(fuzz_program_text fuzz_npy fuzz_record fuzz_attrs fuzz_strings fuzz_onnx)

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --parallel) parallel=${2:?--parallel needs a number}; shift 2 ;;
    --build-dir) build=${2:?--build-dir needs a directory}; shift 2 ;;
    --merge) merge=1; shift ;;
    --configured) configured=1; shift ;;
    --seed) seed=${2:?--seed needs a number}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((${#targets[@]} == 0)); then targets=("${all_targets[@]}"); fi
for t in "${targets[@]}"; do
  if [[ ! " ${all_targets[*]} " == *" $t "* ]]; then
    echo "fuzz.sh: unknown target '$t' (targets: ${all_targets[*]})" >&2
    exit 2
  fi
done
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --seconds wants a positive whole number, not '$seconds'" >&2
  exit 2
fi
if [[ -n $seed ]] && ! [[ $seed =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --seed wants a positive whole number, not '$seed'" >&2
  exit 2
fi
if ! [[ $parallel =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --parallel wants a positive whole number, not '$parallel'" >&2
  exit 2
fi
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (scripts/install_deps.sh installs it)" >&2
  exit 2
fi

if ((configured)); then
  if ! grep -q '^SLUICE_SANITIZE:STRING=fuzzer$' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "fuzz.sh: --configured, but $build is not configured with SLUICE_SANITIZE=fuzzer" >&2
    exit 2
  fi
else
CC=clang CXX=clang++ cmake -S . -B "$build" -G "Unix Makefiles" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  -DSLUICE_SANITIZE=fuzzer -DSLUICE_BUILD_FUZZERS=ON -DSLUICE_BUILD_TESTS=OFF \
  -DSLUICE_BUILD_BENCHMARKS=OFF -DSLUICE_BUILD_TOOLS=OFF -DSLUICE_BUILD_EXAMPLES=OFF \
  -DSLUICE_BUILD_C_API=OFF -DSLUICE_WITH_CUDA=OFF -DSLUICE_WITH_MPI=OFF >/dev/null
fi
cmake --build "$build" -j"$jobs" --target "${targets[@]}"

# Leaks are findings; a fuzzed size may ask for more than the machine has, which the
# readers must refuse before allocating, so a failed allocation is a finding too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
# fuzz_one TARGET: runs it; its summary line goes to $results/TARGET.line, and
# $results/TARGET.failed exists when it found something.
fuzz_one() {
  local t=$1 corpus=$build/corpus/$1 artifacts=$build/artifacts/$1 log=$build/$1.log rc=0
  mkdir -p "$corpus" "$artifacts"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  echo "fuzz.sh: $t for ${seconds}s (log: $log)"
  "$build/tests/fuzz/$t" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/" ${seed:+-seed="$seed"} \
    >"$log" 2>&1 || rc=$?
  local execs rate cov files line
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$corpus" -type f | wc -l)
  line=$(printf '%-18s execs=%s exec/s=%s cov=%s corpus=%s' "$t" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "$files")
  if ((rc != 0)); then
    line+="  FAILED (exit $rc): $(ls "$artifacts" | head -3 | tr '\n' ' ')"
    : >"$results/$t.failed"
    grep -m1 -E 'ERROR: |fuzz check failed|SUMMARY' "$log" >&2 || tail -n 20 "$log" >&2
  elif ((merge)); then
    "$build/tests/fuzz/$t" -merge=1 tests/fuzz/corpus/"$t" "$corpus" >>"$log" 2>&1
  fi
  echo "$line" >"$results/$t.line"
  echo "fuzz.sh: $line"
}

running=0
for t in "${targets[@]}"; do
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait
failed=()
echo "fuzz.sh: summary"
for t in "${targets[@]}"; do
  if [[ -f "$results/$t.line" ]]; then
    echo "  $(<"$results/$t.line")"
  else
    echo "  $t: no result (the run was interrupted)"
    failed+=("$t")
  fi
  if [[ -f "$results/$t.failed" ]]; then failed+=("$t"); fi
done
if ((${#failed[@]})); then
  echo "fuzz.sh: findings in ${failed[*]}; inputs under $build/artifacts/" >&2
  exit 1
fi
