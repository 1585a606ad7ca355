#!/usr/bin/env bash
# Checks that every tracked C/C++/CUDA source (*.h, *.cc, *.c, *.cu per `git ls-files`) is
# formatted per .clang-format (Google style). Lists the offenders and exits 1 if there are any;
# fix them with `clang-format -i FILE...`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format: clang-format not found (scripts/install_deps.sh installs it)" >&2
  exit 2
fi
if ! files_list=$(git ls-files -- '*.h' '*.cc' '*.c' '*.cu'); then
  echo "check_format: git ls-files failed; run from a git checkout" >&2
  exit 2
fi
mapfile -t files <<<"$files_list"

existing=()
for file in "${files[@]}"; do
  [[ -n "$file" && -f "$file" ]] || continue  # deleted but not yet staged
  existing+=("$file")
done
checked=${#existing[@]}

# Batches of files, one clang-format per batch, SLUICE_JOBS (default: every core) at once.
# Each unformatted file gets "FILE:LINE:COL: error: code should be clang-formatted".
jobs=${SLUICE_JOBS:-$(nproc)}
rc=0
report=$(printf '%s\0' "${existing[@]}" |
  xargs -0 -n 40 -P "$jobs" clang-format --dry-run --Werror 2>&1 >/dev/null) || rc=$?
mapfile -t offenders < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
  <<<"$report" | sort -u)
if (( rc != 0 && ${#offenders[@]} == 0 )); then
  echo "check_format: clang-format failed without naming an unformatted file:" >&2
  echo "$report" | head -20 >&2
  exit 2
fi

if (( ${#offenders[@]} > 0 )); then
  echo "check_format: ${#offenders[@]} of ${checked} files are not clang-formatted ($(clang-format --version)):" >&2
  printf '  %s\n' "${offenders[@]}" >&2
  echo "check_format: fix with: clang-format -i ${offenders[*]}" >&2
  exit 1
fi
echo "check_format: OK (${checked} files)"
