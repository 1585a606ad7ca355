#!/usr/bin/env bash
# Runs the examples in the documentation, so that a document cannot drift from the code.
#
#   doc_examples_test.sh --sluice BIN --source DIR [FILE.md ...]
#   doc_examples_test.sh --sluice BIN --source DIR --self-test
#
# With no FILE, the documents are DIR/README.md and DIR/docs/*.md. Conventions for fenced
# blocks (the info string is the text after the opening ```):
#
#   ```program      A Program in the text format (docs/program-format.md). It is written to a
#                   file and run with `sluice run`, which parses it, checks every op of the
#                   block it runs against its schema and runs it once. Every variable of
#                   block 0 that an op reads before any op writes it is fed (persistable
#                   ones through `--load`, the others through `--feed`), with ones for
#                   floating-point variables and zeros for integer and bool ones; every
#                   op output of block 0 is fetched. A block whose first line is
#                   `sluice-program` must carry this info string.
#   ```sh           A shell example. When its first command starts with `sluice ` or
#                   `build/tools/sluice `, every command in it is run, in order, in a scratch
#                   directory of the document's (where `examples/` and `docs/` point into the
#                   source tree), with that prefix replaced by BIN; each must exit 0. Such a
#                   block may hold only `sluice` commands. Blocks of other commands (builds,
#                   installs, scripts) are not run and are counted as skipped.
#   ```sh not-run   (also ```program not-run) An example that is not run here (a long
#                   training, a file the reader supplies); counted as skipped.
#
# The test prints what it ran and skipped, and fails when an example fails, when a program
# example is not marked, or when it ran nothing. --self-test feeds it documents that must
# fail (a program with an attribute its op does not have, an unmarked program, a failing
# command) and one that must pass, and checks each outcome.
set -uo pipefail

sluice=""
source_dir=""
self_test=0
files=()
while (($#)); do
  case "$1" in
    --sluice) sluice="$2"; shift 2 ;;
    --source) source_dir="$2"; shift 2 ;;
    --self-test) self_test=1; shift ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) files+=("$1"); shift ;;
  esac
done
if [[ -z "$sluice" || -z "$source_dir" ]]; then
  echo "usage: $0 --sluice BIN --source DIR [--self-test] [FILE.md ...]" >&2
  exit 2
fi
if [[ ! -x "$sluice" ]]; then
  echo "doc_examples: $sluice is not an executable (build the sluice target first)" >&2
  exit 2
fi
sluice=$(cd "$(dirname "$sluice")" && pwd)/$(basename "$sluice")
source_dir=$(cd "$source_dir" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-doc-examples.XXXXXX")
trap 'rm -rf "$work"' EXIT

ran=0
skipped=0
failures=0

fail() {
  echo "FAIL $*" >&2
  failures=$((failures + 1))
}

# Decodes the text format's %XX escapes.
unescape() { printf '%b' "$(sed 's/%\([0-9A-Fa-f][0-9A-Fa-f]\)/\\x\1/g' <<<"$1")"; }

# write_npy FILE DTYPE SHAPE: a C-order .npy of DTYPE (program-format name) and SHAPE ([2,3]),
# ones for f32/f64, zeros for i32/i64/bool.
write_npy() {
  local file=$1 dtype=$2 shape=$3 descr one dims count=1 d tuple header pad
  case "$dtype" in
    f32|float32) descr='<f4'; one='\x00\x00\x80\x3f' ;;
    f64|float64) descr='<f8'; one='\x00\x00\x00\x00\x00\x00\xf0\x3f' ;;
    i32|int32) descr='<i4'; one='\x00\x00\x00\x00' ;;
    i64|int64) descr='<i8'; one='\x00\x00\x00\x00\x00\x00\x00\x00' ;;
    bool) descr='|b1'; one='\x00' ;;
    *) echo "unknown dtype '$dtype'"; return 1 ;;
  esac
  dims=${shape#[}
  dims=${dims%]}
  tuple="("
  if [[ -n "$dims" ]]; then
    IFS=, read -r -a dim_list <<<"$dims"
    for d in "${dim_list[@]}"; do
      count=$((count * d))
      tuple+="$d, "
    done
    ((${#dim_list[@]} > 1)) && tuple=${tuple%, }
    ((${#dim_list[@]} == 1)) && tuple=${tuple% }
  fi
  tuple+=")"
  if ((count > 1000000)); then
    echo "shape $shape is too large for an example"
    return 1
  fi
  header="{'descr': '$descr', 'fortran_order': False, 'shape': $tuple, }"
  # Magic (6) + version (2) + length (2) + header + '\n', padded to a multiple of 64.
  pad=$(((64 - (10 + ${#header} + 1) % 64) % 64))
  header+=$(printf '%*s' "$pad" '')
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf '%02x' $(((${#header} + 1) % 256)))\\x$(printf '%02x' $(((${#header} + 1) / 256)))"
    printf '%s\n' "$header"
    local i
    for ((i = 0; i < count; ++i)); do printf "$one"; done
  } >"$file"
}

# run_program WHERE FILE: runs a program example with generated feeds; fails with its output.
run_program() {
  local where=$1 program=$2 dir
  dir=$(mktemp -d "$work/program.XXXXXX")
  # Block 0's variables (name dtype shape persistable) and the operands its ops read before
  # any op writes them, then every output.
  local plan
  if ! plan=$(awk '
    $1 == "block" { block = $2; next }
    block != 0 { next }
    $1 == "var" {
      dtype = ""; shape = ""; persist = ""
      for (i = 3; i <= NF; ++i) {
        split($i, kv, "=")
        if (kv[1] == "dtype") dtype = kv[2]
        if (kv[1] == "shape") shape = kv[2]
        if (kv[1] == "persistable") persist = kv[2]
      }
      print "var", $2, dtype, shape, persist
      next
    }
    $1 == "op" {
      side = ""
      for (i = 3; i <= NF; ++i) {
        if ($i == "in" || $i == "out" || $i == "attrs") { side = $i; continue }
        if (side == "attrs") continue
        eq = index($i, "=")
        n = split(substr($i, eq + 1), names, ",")
        for (k = 1; k <= n; ++k) {
          if (names[k] == "") continue
          if (side == "in" && !(names[k] in written) && !(names[k] in needed)) {
            needed[names[k]] = 1
            print "needs", names[k]
          }
          if (side == "out") {
            written[names[k]] = 1
            if (!(names[k] in fetched)) { fetched[names[k]] = 1; print "fetch", names[k] }
          }
        }
      }
    }
  ' "$program"); then
    fail "$where: cannot read the program"
    return
  fi
  declare -A dtype_of shape_of persistable_of
  local kind name dtype shape persist
  local args=() persistables=()
  while read -r kind name dtype shape persist; do
    if [[ "$kind" == var ]]; then
      dtype_of[$name]=$dtype
      shape_of[$name]=$shape
      persistable_of[$name]=$persist
      [[ "$persist" == 1 ]] && persistables+=("$name")
    fi
  done <<<"$plan"
  mkdir -p "$dir/params"
  # --load reads every persistable variable of the program.
  for name in "${persistables[@]}"; do
    if ! msg=$(write_npy "$dir/params/$(unescape "$name").npy" "${dtype_of[$name]}" \
      "${shape_of[$name]}"); then
      fail "$where: persistable '$name': $msg"
      return
    fi
  done
  ((${#persistables[@]})) && args+=(--load "$dir/params")
  while read -r kind name _; do
    if [[ "$kind" == needs && -n "${dtype_of[$name]+x}" && "${persistable_of[$name]}" != 1 ]]; then
      if ! msg=$(write_npy "$dir/feed.$name.npy" "${dtype_of[$name]}" "${shape_of[$name]}"); then
        fail "$where: feed '$name': $msg"
        return
      fi
      args+=(--feed "$(unescape "$name")=$dir/feed.$name.npy")
    elif [[ "$kind" == fetch ]]; then
      args+=(--fetch "$(unescape "$name")")
    fi
  done <<<"$plan"
  local out
  if out=$(timeout 300 "$sluice" run "$program" "${args[@]}" 2>&1); then
    echo "ok   $where: sluice run PROGRAM ${args[*]}"
    ran=$((ran + 1))
  else
    fail "$where: sluice run $program ${args[*]}"
    sed 's/^/     | /' <<<"$out" >&2
  fi
}

# run_shell WHERE DOC_DIR BODY_FILE: runs a shell example's sluice commands in DOC_DIR.
run_shell() {
  local where=$1 doc_dir=$2 body=$3 command="" line rest out
  local commands=()
  while IFS= read -r line || [[ -n "$line" ]]; do
    if [[ "$line" =~ \\[[:space:]]*$ ]]; then
      command+="${line%\\*} "
      continue
    fi
    command+="$line"
    [[ "$command" =~ ^[[:space:]]*(#.*)?$ ]] || commands+=("$command")
    command=""
  done <"$body"
  [[ -n "${command// /}" ]] && commands+=("$command")
  for command in "${commands[@]}"; do
    command=$(sed 's/^[[:space:]]*//' <<<"$command")
    case "$command" in
      "sluice "*) rest=${command#sluice } ;;
      "build/tools/sluice "*) rest=${command#build/tools/sluice } ;;
      *)
        fail "$where: '$command' is not a sluice command (a runnable example holds only those;" \
          "mark the block \`sh not-run\` or split it)"
        continue
        ;;
    esac
    local bare
    bare=$(sed -e 's/[[:space:]]*#.*$//' -e 's/[[:space:]]*$//' -e 's/[[:space:]][[:space:]]*/ /g' \
      <<<"$rest")
    if out=$(cd "$doc_dir" && timeout 300 bash -c "\"\$0\" $rest" "$sluice" 2>&1 </dev/null); then
      echo "ok   $where: sluice $bare"
      ran=$((ran + 1))
    else
      fail "$where: sluice $bare"
      tail -n 20 <<<"$out" | sed 's/^/     | /' >&2
    fi
  done
}

# check_doc FILE: extracts and runs one document's examples.
check_doc() {
  local doc=$1 rel doc_dir n=0 start info first
  rel=${doc#"$source_dir"/}
  doc_dir="$work/$(tr '/' '_' <<<"$rel")"
  mkdir -p "$doc_dir"
  ln -s "$source_dir/examples" "$doc_dir/examples"
  ln -s "$source_dir/docs" "$doc_dir/docs"
  local blocks="$doc_dir.blocks"
  mkdir -p "$blocks"
  # One file per fenced block: line 1 "START_LINE INFO", then the body.
  awk -v out="$blocks" '
    !open && match($0, /^ ? ? ?(```+|~~~+)/) {
      fence = substr($0, RSTART, RLENGTH); sub(/^ +/, "", fence)
      info = substr($0, RSTART + RLENGTH); sub(/^[ \t]+/, "", info); sub(/[ \t]+$/, "", info)
      open = 1; ++n; file = sprintf("%s/%04d", out, n)
      print NR " " info > file
      next
    }
    open {
      line = $0; sub(/^ +/, "", line)
      if (index(line, fence) == 1 && line ~ /^(`+|~+)[ \t]*$/ && length(line) >= length(fence)) {
        open = 0; close(file); next
      }
      print $0 > file
    }
  ' "$doc"
  for block in "$blocks"/*; do
    [[ -e "$block" ]] || continue
    read -r start info <"$block"
    local where="$rel:$start"
    local lang=${info%% *} flags=" $info "
    first=$(tail -n +2 "$block" | grep -m1 -v '^[[:space:]]*$' || true)
    if [[ "$lang" == program ]]; then
      if [[ "$flags" == *" not-run "* ]]; then
        echo "skip $where: program marked not-run"
        skipped=$((skipped + 1))
        continue
      fi
      tail -n +2 "$block" >"$block.program"
      run_program "$where" "$block.program"
    elif [[ "$first" == sluice-program* ]]; then
      fail "$where: a program example fenced as '$info' (fence it as \`\`\`program)"
    elif [[ "$lang" == sh || "$lang" == bash || "$lang" == shell || "$lang" == console ]]; then
      local cmd=${first#"${first%%[![:space:]]*}"}
      if [[ "$cmd" != "sluice "* && "$cmd" != "build/tools/sluice "* ]]; then
        echo "skip $where: not a sluice command ($(cut -c1-40 <<<"$cmd")...)"
        skipped=$((skipped + 1))
      elif [[ "$flags" == *" not-run "* ]]; then
        echo "skip $where: shell example marked not-run"
        skipped=$((skipped + 1))
      else
        tail -n +2 "$block" >"$block.sh"
        run_shell "$where" "$doc_dir" "$block.sh"
      fi
    fi
  done
}

check_docs() {
  local doc
  for doc in "$@"; do
    check_doc "$doc"
  done
  echo "doc examples: ran $ran, skipped $skipped, failed $failures"
  if ((failures > 0)); then
    return 1
  fi
  if ((ran == 0)); then
    echo "FAIL no example ran" >&2
    return 1
  fi
  return 0
}

if ((self_test)); then
  # Each case: a document and whether the checker must accept it. The checker runs in a
  # child process of its own, so counts start from zero for each.
  cases="$work/self-test"
  mkdir -p "$cases"
  cat >"$cases/keep_dims.md" <<'EOF'
An attribute the op's schema does not have (reduce_sum's is `keepdim`):

```program
sluice-program 1
block 0 parent -1
var x dtype=f32 shape=[2,3] persistable=0 parameter=0 stop_gradient=1
var w dtype=f32 shape=[3] persistable=1 parameter=1 stop_gradient=0
var y dtype=f32 shape=[2,3] persistable=0 parameter=0 stop_gradient=0
var s dtype=f32 shape=[] persistable=0 parameter=0 stop_gradient=0
op add in X=x Y=w out Out=y attrs
op reduce_sum in X=y out Out=s attrs axes=v:0;1,keep_dims=i:0
end
```
EOF
  sed 's/keep_dims=i:0/keepdim=i:0/' "$cases/keep_dims.md" >"$cases/keepdim.md"
  printf '```\nsluice-program 1\nblock 0 parent -1\nend\n```\n' >"$cases/unmarked.md"
  printf '```sh\nbuild/tools/sluice run no-such.program\n```\n' >"$cases/bad_command.md"
  printf '```sh\nsluice selfcheck\nrm -rf /tmp/x\n```\n' >"$cases/mixed.md"
  printf '```sh not-run\nsluice demo --steps 1000000\n```\n' >"$cases/only_skipped.md"
  status=0
  for c in keep_dims:fail unmarked:fail bad_command:fail mixed:fail only_skipped:fail \
           keepdim:pass; do
    name=${c%%:*}
    want=${c#*:}
    if out=$(bash "$0" --sluice "$sluice" --source "$cases" "$cases/$name.md" 2>&1); then
      got=pass
    else
      got=fail
    fi
    if [[ "$got" == "$want" ]]; then
      echo "ok   self-test $name: the checker must $want, and did"
    else
      echo "FAIL self-test $name: expected the checker to $want, it did $got:" >&2
      sed 's/^/     | /' <<<"$out" >&2
      status=1
    fi
  done
  # The failing keep_dims run must fail for the attribute, not for something else.
  out=$(bash "$0" --sluice "$sluice" --source "$cases" "$cases/keep_dims.md" 2>&1)
  if ! grep -q "keep_dims" <<<"$out"; then
    echo "FAIL self-test keep_dims: the failure does not name the attribute" >&2
    status=1
  fi
  exit $status
fi

if ((${#files[@]} == 0)); then
  files=("$source_dir/README.md" "$source_dir"/docs/*.md)
fi
check_docs "${files[@]}"
