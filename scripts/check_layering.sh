#!/usr/bin/env bash
# Rejects upward includes between Sluice's layers: core <- ep <- vm <- ops <- framework <-
# stress <- capi <- tools.
# A source file in a layer may include headers of its own layer and of the layers below it,
# never of a layer above (e.g. core/ including "ep/..." or ops/ including <framework/...>).
# Private headers stay private: no file includes another layer's internal/ header, and no
# public header (one outside every internal/ folder) includes an internal/ header at all —
# the install ships no internal/, so such a header would not compile for an embedder.
# Inside framework/, each folder is a sub-library: framework/layers.txt lists them, each
# with the folders it may include, each after the ones it names (so no cycle); an include of
# another framework folder not on the includer's line, a folder missing from the file, or a
# name used before its line is rejected.
#
#   scripts/check_layering.sh [ROOT]     check ROOT (default: the repository); exit 1 and
#                                        list file:line for every upward include
#   scripts/check_layering.sh --self-test
#                                        build a temporary tree with known good and bad
#                                        includes and check that the checker flags exactly
#                                        the bad ones (proves this check can fail)
set -euo pipefail

layers=(core ep vm ops framework stress capi tools)
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"

# Prints "file:line: text" for each upward include under $1; returns 1 if there is any.
check_tree() {
  local root=$1 found=0 i j hits
  cd "$root" || return 2
  for (( i = 0; i < ${#layers[@]} - 1; i++ )); do
    local layer=${layers[i]}
    [[ -d "$layer" ]] || continue
    local above=()
    for (( j = i + 1; j < ${#layers[@]}; j++ )); do above+=("${layers[j]}"); done
    local alternation
    alternation=$(IFS='|'; echo "${above[*]}")
    # grep exits 1 when nothing matches; only a status above 1 is an error.
    hits=$(grep -rnE \
      --include='*.h' --include='*.hh' --include='*.hpp' --include='*.inc' \
      --include='*.cc' --include='*.cpp' --include='*.cu' --include='*.cuh' \
      "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"](${alternation})/" "$layer") || {
      (( $? == 1 )) || return 2
    }
    if [[ -n "$hits" ]]; then
      found=1
      while IFS= read -r hit; do
        # hit is "file:line:text"; the text keeps its own spacing.
        local file=${hit%%:*} rest=${hit#*:}
        local line=${rest%%:*} text=${rest#*:}
        echo "${file}:${line}: ${layer}/ may not include ${alternation//|/, }: ${text}"
      done <<<"$hits"
    fi
  done
  check_private "$root" || found=1
  check_framework_layers "$root" || found=1
  return "$found"
}

# framework/'s sub-libraries against framework/layers.txt (see the header); under $1 (the
# current directory). Prints one line per violation; returns 1 if there is any.
check_framework_layers() {
  local file=framework/layers.txt found=0
  [[ -d framework ]] || return 0
  if [[ ! -f $file ]]; then
    echo "$file: missing (framework's sub-libraries and their arrows)"
    return 1
  fi
  declare -A allowed=()
  local line name arrows arrow n=0
  while IFS= read -r line; do
    n=$((n + 1))
    [[ $line =~ ^([a-z_]+):(.*)$ ]] || continue
    name=${BASH_REMATCH[1]}
    arrows=${BASH_REMATCH[2]}
    for arrow in $arrows; do
      if [[ -z ${allowed[$arrow]+set} ]]; then
        found=1
        echo "$file:$n: $name names $arrow before its line (a cycle, or a missing library)"
      fi
    done
    allowed[$name]=" $arrows "
  done <"$file"
  local dir sub hits hit
  for dir in framework/*/; do
    sub=$(basename "$dir")
    if [[ -z ${allowed[$sub]+set} ]]; then
      found=1
      echo "$file: framework/$sub/ is not listed"
      continue
    fi
    hits=$(grep -rnE --include='*.h' --include='*.cc' --include='*.cu' \
      '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]framework/[a-z_]+/' "$dir") || {
      (( $? == 1 )) || return 2
    }
    [[ -n "$hits" ]] || continue
    while IFS= read -r hit; do
      local where=${hit%:*} text=${hit#*:}
      text=${text#*:}
      local target=${text#*framework/}
      target=${target%%/*}
      [[ $target == "$sub" || ${allowed[$sub]} == *" $target "* ]] && continue
      found=1
      echo "${where}: framework/$sub/ may not include framework/$target/ (framework/layers.txt): ${text}"
    done <<<"$hits"
  done
  return "$found"
}

# Prints "file:line: text" for each include of a private header that check_tree's header
# comment forbids, under $1 (the current directory); returns 1 if there is any.
check_private() {
  local found=0 layer hits hit
  for layer in "${layers[@]}"; do
    [[ -d "$layer" ]] || continue
    hits=$(grep -rnE \
      --include='*.h' --include='*.hh' --include='*.hpp' --include='*.inc' \
      --include='*.cc' --include='*.cpp' --include='*.cu' --include='*.cuh' \
      '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][a-z_]+/([^">]*/)?internal/' "$layer") || {
      (( $? == 1 )) || return 2
    }
    [[ -n "$hits" ]] || continue
    while IFS= read -r hit; do
      local file=${hit%%:*} rest=${hit#*:}
      local line=${rest%%:*} text=${rest#*:}
      local included=${text#*[<\"]}
      included=${included%%/*}
      if [[ "$included" != "$layer" ]]; then
        found=1
        echo "${file}:${line}: ${layer}/ may not include ${included}/'s internal headers: ${text}"
      elif [[ "$file" =~ \.(h|hh|hpp|inc|cuh)$ && "/$file" != */internal/* ]]; then
        found=1
        echo "${file}:${line}: a public header may not include an internal/ header: ${text}"
      fi
    done <<<"$hits"
  done
  return "$found"
}

self_test_dir=""
self_test() {
  local tmp out rc
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-layering.XXXXXX")
  self_test_dir=$tmp
  trap 'rm -rf "$self_test_dir"' EXIT
  mkdir -p "$tmp"/{core,ep/sim/internal,vm,ops,framework,stress,capi,tools}
  # Allowed: same layer, lower layers, third-party and system headers.
  printf '#include "core/status.h"\n#include <vector>\n' >"$tmp/core/ok.h"
  printf '#include "core/status.h"\n#include "ep/device.h"\n#include "absl/status/status.h"\n' \
    >"$tmp/ep/ok.cc"
  printf '#include "ep/stream.h"\n#include "core/device.h"\n' >"$tmp/vm/ok.cc"
  printf '#include "framework/x.h"\n#include "ops/y.h"\n#include "vm/z.h"\n' >"$tmp/tools/ok.cc"
  printf '#include "framework/x.h"\n#include "stress/eager_stress.h"\n' >"$tmp/capi/ok.cc"
  printf '// #include "tools/in_a_comment.h" is not an include\n' >"$tmp/core/comment.h"
  mkdir -p "$tmp"/{ops/internal,ops/cpu}
  printf '#include "ops/internal/families.h"\n' >"$tmp/ops/cpu/kernels.cc"
  printf '#include "ops/internal/families.h"\n' >"$tmp/ops/internal/helpers.h"
  printf '#include "ep/sim/internal/sim_stream.h"\n' >"$tmp/ep/sim/internal/ok.h"
  mkdir -p "$tmp"/framework/{ir,builder,graph}
  printf 'ir:\nbuilder: ir\ngraph: builder\n' >"$tmp/framework/layers.txt"
  printf '#include "framework/ir/desc.h"\n#include "framework/builder/x.h"\n' \
    >"$tmp/framework/builder/ok.cc"

  echo "check_layering self-test: a clean tree must pass"
  if ! out=$(bash "$script" "$tmp" 2>&1); then
    echo "$out"
    echo "check_layering self-test FAILED: the clean tree was rejected" >&2
    return 1
  fi

  # Forbidden, in the spellings a real upward include may take.
  printf '#include "core/status.h"\n#include "ep/device.h"\n' >"$tmp/core/bad.cc"
  printf '\n\n#include <vm/program.h>\n' >"$tmp/ep/sim/internal/bad.h"
  printf '  #  include "framework/session.h"\n' >"$tmp/ops/bad.cu"
  printf '#include "tools/cli.h"\n' >"$tmp/framework/bad.h"
  printf '#include "vm/z.h"\n#include "capi/sluice_c_api.h"\n' >"$tmp/stress/bad.cc"
  # Private headers: another layer's internal/, and a public header including its own.
  printf '#include "vm/z.h"\n#include "ep/internal/spin.h"\n' >"$tmp/vm/private.cc"
  printf '#include "ops/internal/families.h"\n' >"$tmp/ops/public.h"
  # framework's sub-libraries: an arrow not on the line (graph may include builder, not ir;
  # ir nothing).
  printf '#include "framework/builder/x.h"\n#include "framework/ir/desc.h"\n' \
    >"$tmp/framework/graph/bad.cc"
  printf '#include "framework/graph/g.h"\n' >"$tmp/framework/ir/bad.h"
  local expected=(core/bad.cc:2 ep/sim/internal/bad.h:3 ops/bad.cu:1 framework/bad.h:1
                  stress/bad.cc:2 vm/private.cc:2 ops/public.h:1 framework/graph/bad.cc:2
                  framework/ir/bad.h:1)

  echo "check_layering self-test: a tree with ${#expected[@]} upward includes must fail"
  rc=0
  out=$(bash "$script" "$tmp" 2>&1) || rc=$?
  while IFS= read -r line; do echo "  | $line"; done <<<"$out"
  if (( rc != 1 )); then
    echo "check_layering self-test FAILED: expected exit 1, got $rc" >&2
    return 1
  fi
  local want
  for want in "${expected[@]}"; do
    if ! grep -q "^${want}: " <<<"$out"; then
      echo "check_layering self-test FAILED: ${want} was not reported" >&2
      return 1
    fi
  done
  if (( $(grep -cE '^[^ ]+:[0-9]+: ' <<<"$out") != ${#expected[@]} )); then
    echo "check_layering self-test FAILED: reported something other than the ${#expected[@]} bad includes" >&2
    return 1
  fi
  echo "check_layering self-test: OK"
}

case "${1:-}" in
  --self-test) self_test ;;
  -h|--help) sed -n '2,11p' "$script" | sed 's/^# \{0,1\}//' ;;
  *)
    root=${1:-"$(dirname "$script")/.."}
    rc=0
    check_tree "$root" || rc=$?
    if (( rc == 0 )); then
      echo "check_layering: OK (${layers[*]})"
    elif (( rc == 1 )); then
      echo "check_layering: upward or private includes found (layers, bottom to top: ${layers[*]})" >&2
      exit 1
    else
      echo "check_layering: could not read $root" >&2
      exit 2
    fi
    ;;
esac
