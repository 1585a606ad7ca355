#!/usr/bin/env bash
# Compares two builds' Google Benchmark figures in one interleaved run: for each round, each
# build's benchmark binary runs once (A then B, then B then A the next round, so neither
# always goes first), and the table reports each benchmark's median per build and the ratio
# B/A of the medians. Noise on a shared machine hits both builds alike this way.
#
#   scripts/bench_compare.sh [--rounds N] [--min-time S] A_BUILD B_BUILD BINARY FILTER
#
#   A_BUILD, B_BUILD  build directories (the binary is A_BUILD/bench/BINARY)
#   BINARY            vm_benchmarks, framework_benchmarks, ...
#   FILTER            a --benchmark_filter regular expression
#   --rounds N        rounds (default 5)
#   --min-time S      --benchmark_min_time per run (default 0.2)
#
# Prints a Markdown table (benchmark, A median, B median, B/A, unit) on stdout; the raw
# per-round figures go to stderr. Exit 2 for a usage error, 1 when a run fails. Needs python3
# (to read the benchmarks' JSON).
set -euo pipefail

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

rounds=5
min_time=0.2
args=()
while (( $# > 0 )); do
  case "$1" in
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --min-time) min_time=${2:?--min-time needs a value}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "bench_compare: unknown option '$1'; see --help" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if (( ${#args[@]} != 4 )); then
  echo "bench_compare: expected A_BUILD B_BUILD BINARY FILTER; see --help" >&2
  exit 2
fi
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "bench_compare: --rounds must be a positive integer, got '$rounds'" >&2
  exit 2
fi
a_bin="${args[0]}/bench/${args[2]}"
b_bin="${args[1]}/bench/${args[2]}"
filter=${args[3]}
for bin in "$a_bin" "$b_bin"; do
  if [[ ! -x "$bin" ]]; then
    echo "bench_compare: no benchmark binary at $bin" >&2
    exit 2
  fi
done

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
# run SIDE BINARY: one run, "SIDE NAME VALUE UNIT" lines (real time per iteration) to $raw.
run() {
  local side=$1 bin=$2 out
  if ! out=$("$bin" --benchmark_filter="$filter" --benchmark_min_time="$min_time" \
      --benchmark_format=json 2>/dev/null); then
    echo "bench_compare: $bin failed" >&2
    return 1
  fi
  # JSON (the CSV reporter rejects benchmarks with different counters): one line per run.
  python3 -c '
import json, sys
side = sys.argv[1]
for b in json.load(sys.stdin)["benchmarks"]:
    if b.get("run_type", "iteration") == "iteration":
        print(side, b["name"], b["real_time"], b["time_unit"])
' "$side" <<<"$out" | tee -a "$raw" >&2
}
for (( r = 1; r <= rounds; r++ )); do
  echo "bench_compare: round $r of $rounds" >&2
  if (( r % 2 == 1 )); then
    run A "$a_bin"; run B "$b_bin"
  else
    run B "$b_bin"; run A "$a_bin"
  fi
done

echo "| benchmark | A median | B median | B/A | unit |"
echo "|---|---|---|---|---|"
# Medians per (side, name), then one row per name in first-seen order.
awk '
  { key = $1 SUBSEP $2; n[key]++; v[key, n[key]] = $3; unit[$2] = $4
    if (!($2 in seen)) { seen[$2] = 1; order[++count] = $2 } }
  function median(key,    i, j, t, m, a) {
    m = n[key]; if (m == 0) return -1
    for (i = 1; i <= m; i++) a[i] = v[key, i]
    for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    for (k = 1; k <= count; k++) {
      name = order[k]; ma = median("A" SUBSEP name); mb = median("B" SUBSEP name)
      ratio = (ma > 0 && mb >= 0) ? sprintf("%.3f", mb / ma) : "n/a"
      printf "| %s | %.4g | %.4g | %s | %s |\n", name, ma, mb, ratio, unit[name]
    }
  }' "$raw"
