#!/usr/bin/env bash
# The GPU acceptance run, for any machine with an NVIDIA GPU (driver and CUDA runtime; no
# Debian packages needed when the binaries come prebuilt). Every row checks values read back
# from the device against cpu; the script prints a summary table and exits non-zero when any
# row failed.
#
# Usage: scripts/gpu_check.sh [--build DIR | --bin DIR] [--device cuda:N] [--help]
#   --build DIR  use the binaries of an existing CUDA-enabled build (tools/sluice, tests/*)
#   --bin DIR    use a folder of prebuilt binaries, e.g. a build packed by
#                pack_for_device.sh (DIR/sluice, DIR/*_cuda_tests; libraries in DIR/../lib)
#   (neither)    configure and build build-gpu/ here with -DCMAKE_CUDA_ARCHITECTURES=native
#   --device     the device to check (default cuda:0)
# Rows: every gpu-labelled test binary (ep, ops, ccl, framework: random programs with cuda
# as one configuration); the control-flow yield tests with cuda:0 among their devices; `sluice selfcheck`; the demo (static on 1 and 3 streams under the
# sync checker, eager, graph) against cpu's losses; the control-flow examples against cpu;
# a run recorded on cuda and replayed on cuda and on sim.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="" bin="" device="cuda:0"
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --bin) bin=${2:?--bin needs a directory}; shift 2 ;;
    --device) device=${2:?--device needs a device}; shift 2 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU found (nvidia-smi -L failed)" >&2
  exit 1
fi
export PATH=$PATH:/usr/local/cuda/bin
if [[ -z $build && -z $bin ]]; then
  build=build-gpu
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSLUICE_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=native -DSLUICE_BUILD_BENCHMARKS=OFF || exit 1
  cmake --build "$build" -j"$(nproc)" || exit 1
fi
# find_bin NAME: the path of an executable, or empty.
find_bin() {
  if [[ -n $bin ]]; then
    [[ -x $bin/$1 ]] && echo "$bin/$1"
  else
    find "$build" -type f -name "$1" -perm -u+x ! -path '*/CMakeFiles/*' -print -quit
  fi
}
if [[ -n $bin ]]; then
  export LD_LIBRARY_PATH=$(cd "$bin/../lib" 2>/dev/null && pwd):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
fi
sluice=$(find_bin sluice)
if [[ -z $sluice ]]; then
  echo "gpu_check: no sluice binary found" >&2
  exit 1
fi
nvidia-smi -L
log=$(mktemp -d)
rows=()
failed=0

# row NAME COMMAND...: runs it (output in $log/NAME.log, its tail shown on failure).
row() {
  local name=$1 t0=$SECONDS rc
  shift
  printf '\n==== %s\n' "$name"
  "$@" >"$log/$name.log" 2>&1
  rc=$?
  local dt=$((SECONDS - t0))
  if ((rc == 0)); then
    tail -n 3 "$log/$name.log"
    rows+=("$(printf '%-32s %-6s %4ds' "$name" pass "$dt")")
  else
    tail -n 40 "$log/$name.log"
    rows+=("$(printf '%-32s %-6s %4ds  (exit %d)' "$name" FAIL "$dt" "$rc")")
    failed=1
  fi
}

# gtest_gpu BINARY [ARGS...]: runs a gpu test binary; fails when it fails, when nothing ran, or when
# every test skipped (a GPU is present, so a skip means the device was not used).
gtest_gpu() {
  local path
  path=$(find_bin "$1")
  if [[ -z $path ]]; then
    echo "$1 was not built"
    return 1
  fi
  local out
  out=$("$path" "${@:2}" 2>&1)
  local rc=$?
  echo "$out" | grep -E '^\[  (FAILED|SKIPPED) |^\[  PASSED|^\[==========\]' | tail -n 30
  ((rc == 0)) || return "$rc"
  local passed skipped
  passed=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  skipped=$(echo "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -1)
  echo "passed ${passed:-0}, skipped ${skipped:-0}"
  [[ ${passed:-0} -gt ${skipped:-0} ]]
}

# losses CMD...: the "step N loss X" values a command prints, one a line.
losses() { "$@" | awk '$1 == "step" && $3 == "loss" { print $4 }'; }
# same_losses WANT GOT: every value within 1e-5 relative, and at least one.
same_losses() {
  echo "want: $(echo "$1" | tail -1)  got: $(echo "$2" | tail -1)"
  paste -d' ' <(echo "$1") <(echo "$2") | awk '
    { d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1; n++; if (NF != 2 || d > 1e-5 * m + 1e-7) bad = 1 }
    END { exit (bad || n == 0) }'
}
demo_vs_cpu() {
  local want got
  want=$(losses "$sluice" demo "$@") || return 1
  got=$(losses "$sluice" demo --device "$device" "$@") || return 1
  same_losses "$want" "$got"
}
demo_streams_vs_cpu() {
  local want got
  want=$(losses "$sluice" demo) || return 1
  got=$(losses "$sluice" demo --device "$device" "$@") || return 1
  same_losses "$want" "$got"
}

# fetched CMD...: the numbers `sluice run` prints for its fetches, one a line.
# Lines read "step N  NAME=DTYPE[SHAPE] [v, ...]  ...": the step number, names, dtypes and
# shapes are dropped, so runs that print extra lines or differ in them still line up.
fetched() {
  "$@" | grep -E '^step ' | sed -E 's/^step +[0-9]+//; s/[a-z]+[0-9]*\[[^]]*\]//g; s/[A-Za-z_][A-Za-z0-9_.]*=//g' |
    grep -oE '[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?|nan|inf'
}
cf=examples/control_flow
power_iteration() {
  local want got args=(run "$cf/power_iteration.program" --feed A="$cf/A.npy" --feed v0="$cf/v0.npy"
    --feed tol="$cf/tol.npy" --feed gap0="$cf/gap0.npy" --fetch lambda --fetch v)
  want=$(fetched "$sluice" "${args[@]}") || return 1
  got=$(fetched "$sluice" "${args[@]}" --device "$device" --streams 2 --sync-check) || return 1
  echo "cpu: $(echo "$want" | tr '\n' ' ' | cut -c1-100)"
  echo "gpu: $(echo "$got" | tr '\n' ' ' | cut -c1-100)"
  [[ -n $want ]] && same_losses "$want" "$got"
}
rnn() {
  local want got args=(run "$cf/rnn_main.program" --startup "$cf/rnn_startup.program"
    --feed xs="$cf/rnn_xs.npy" --feed h0="$cf/rnn_h0.npy" --feed target="$cf/rnn_target.npy"
    --fetch reduce_mean_0.out --steps 20)
  want=$(fetched "$sluice" "${args[@]}") || return 1
  got=$(fetched "$sluice" "${args[@]}" --device "$device" --sync-check) || return 1
  [[ -n $want ]] && same_losses "$want" "$got"
}
record_replay() {
  "$sluice" demo --steps 3 --device "$device" --streams 2 --record "$log/demo.rec" || return 1
  "$sluice" replay "$log/demo.rec" --ops standard --check-sync || return 1
  "$sluice" replay "$log/demo.rec" --ops standard --device-map "$device=sim:0" --check-sync
}
# The eager and graph front ends' records, replayed on the GPU and on sim.
record_replay_eager_graph() {
  local mode
  for mode in --eager --graph; do
    "$sluice" demo --steps 3 --device "$device" "$mode" --record "$log/front.rec" || return 1
    "$sluice" replay "$log/front.rec" --ops standard --check-sync || return 1
    "$sluice" replay "$log/front.rec" --ops standard --device-map "$device=sim:0" --check-sync ||
      return 1
  done
}

for t in ep_cuda_tests ops_cuda_tests ccl_cuda_tests framework_cuda_tests; do
  row "$t" gtest_gpu "$t"
done
# Control-flow yields (parallel assignment) on cpu, sim and cuda:0 against a host reference.
row control_flow_yields gtest_gpu framework_concurrency_tests --gtest_filter='ControlFlowYield*:Aliasing*'
row selfcheck "$sluice" selfcheck
row demo_static_1_stream demo_streams_vs_cpu --sync-check
row demo_static_3_streams demo_streams_vs_cpu --streams 3 --sync-check
row demo_eager demo_vs_cpu --eager
row demo_graph demo_vs_cpu --graph
row control_flow_power_iteration power_iteration
row control_flow_rnn rnn
row record_cuda_replay_cuda_sim record_replay
row record_eager_graph_replay record_replay_eager_graph

echo
echo "======== gpu_check summary ($device, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
printf '  %s\n' "${rows[@]}"
rm -rf "$log"
exit "$failed"
