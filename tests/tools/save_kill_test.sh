#!/usr/bin/env bash
# `sluice run --save DIR` killed with SIGKILL at random moments of its save: DIR must always
# hold a complete set, the old one or the new one, never a mix and never a missing file.
#
#   tests/tools/save_kill_test.sh SLUICE_BINARY [TRIALS]
#
# The program has 40 persistables of 1 MiB each, so a save takes a noticeable time. Two
# startup programs (seeds 1 and 2) give two sets, A and B, saved once as references. Each
# trial starts a save of the set DIR does not hold and kills it after a random delay spread
# over the span from the end of the run to the end of the save (measured first); then DIR is
# compared file by file with the references. The check itself is shown to catch a mixed
# directory, a missing file and a truncated one before the trials start. A trial that left a
# sibling directory behind (.params.saving-*) was killed inside the save; the next save
# removes it, which the end checks.
set -uo pipefail

sluice=${1:?usage: save_kill_test.sh SLUICE_BINARY [TRIALS]}
trials=${2:-50}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
vars=40
elements=262144  # 1 MiB of f32

die() {
  echo "FAIL: $*" >&2
  exit 1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# The programs: main declares the persistables (and runs no op); startup_S fills them with
# uniform_random seeded S + i.
{
  echo "sluice-program 2"
  echo "block 0 parent -1"
  for ((i = 0; i < vars; i++)); do
    echo "var p$i dtype=f32 shape=[$elements] persistable=1 parameter=1 stop_gradient=0"
  done
  echo "end"
} >"$tmp/main.program"
for seed in 1 2; do
  {
    head -n -1 "$tmp/main.program"
    for ((i = 0; i < vars; i++)); do
      echo "op uniform_random in out Out=p$i attrs dtype=s:f32,max=f:1,min=f:-1,seed=i:$((seed * 1000 + i)),shape=v:$elements"
    done
    echo "end"
  } >"$tmp/startup_$seed.program"
done

# save SEED DIR: a complete save of set SEED into DIR.
save() {
  "$sluice" run "$tmp/main.program" --startup "$tmp/startup_$1.program" --save "$2" \
    >"$tmp/out" 2>&1 || die "saving set $1 into $2 failed: $(cat "$tmp/out")"
}

# The checksums of every .npy file in DIR, sorted, one line each.
sums() { (cd "$1" && find . -maxdepth 1 -name '*.npy' -type f -exec md5sum {} + | sort -k2); }

save 1 "$tmp/ref_1"
save 2 "$tmp/ref_2"
sums "$tmp/ref_1" >"$tmp/sums_1"
sums "$tmp/ref_2" >"$tmp/sums_2"
[[ $(wc -l <"$tmp/sums_1") == "$vars" ]] || die "set 1 has $(wc -l <"$tmp/sums_1") files, not $vars"
# Every file must differ between the sets, or a mix could pass for one of them.
common=$(comm -12 <(cut -d' ' -f1 "$tmp/sums_1" | sort) <(cut -d' ' -f1 "$tmp/sums_2" | sort) | wc -l)
((common == 0)) || die "$common files are equal in both sets"

# check DIR: prints 1 or 2 (the set DIR holds completely) or "bad".
check() {
  local got
  got=$(sums "$1" 2>/dev/null)
  if [[ $got == "$(cat "$tmp/sums_1")" ]]; then
    echo 1
  elif [[ $got == "$(cat "$tmp/sums_2")" ]]; then
    echo 2
  else
    echo bad
  fi
}

echo "---- the check catches a mixed set, a missing file and a truncated file"
cp -r "$tmp/ref_1" "$tmp/mixed" && cp "$tmp/ref_2/p7.npy" "$tmp/mixed/p7.npy"
cp -r "$tmp/ref_2" "$tmp/missing" && rm "$tmp/missing/p39.npy"
cp -r "$tmp/ref_1" "$tmp/truncated" && truncate -s 4096 "$tmp/truncated/p0.npy"
for dir in mixed missing truncated; do
  [[ $(check "$tmp/$dir") == bad ]] || die "the check accepted the $dir directory"
done
[[ $(check "$tmp/ref_1") == 1 && $(check "$tmp/ref_2") == 2 ]] || die "the check rejected a reference"

echo "---- timing"
dir="$tmp/work/params"
save 1 "$dir"
median() { sort -n | sed -n 2p; }
run_ms=$(for _ in 1 2 3; do
  t=$(now_ms)
  "$sluice" run "$tmp/main.program" --startup "$tmp/startup_2.program" >/dev/null 2>&1
  echo $(($(now_ms) - t))
done | median)
save_ms=$(for s in 2 1 2; do
  t=$(now_ms)
  save "$s" "$dir"
  echo $(($(now_ms) - t))
done | median)
# Kill between (most of) the run's end and a little past the save's end: those that land
# after the swap find the new set.
lo=$((run_ms * 9 / 10))
hi=$((save_ms + (save_ms - run_ms) / 10 + 1))
echo "run without --save: ${run_ms} ms; with --save: ${save_ms} ms; kills spread over ${lo}..${hi} ms"

echo "---- $trials trials"
holds=$(check "$dir")
[[ $holds == 2 ]] || die "$dir does not hold set 2 before the trials"
old=0 new=0 mid=0 before_swap=0
siblings() { find "$tmp/work" -maxdepth 1 -name '.params.saving-*' | sort; }
for ((trial = 1; trial <= trials; trial++)); do
  want=$((3 - holds))
  siblings >"$tmp/siblings_before"
  delay=$((lo + RANDOM % (hi - lo + 1)))
  "$sluice" run "$tmp/main.program" --startup "$tmp/startup_$want.program" --save "$dir" \
    >/dev/null 2>&1 &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  got=$(check "$dir")
  # Siblings this trial's save left (earlier ones may remain when it was killed early).
  left=$(comm -13 "$tmp/siblings_before" <(siblings) | wc -l)
  if [[ $got == bad ]]; then
    echo "trial $trial (killed after $delay ms): $dir holds neither set" >&2
    diff <(sums "$dir") "$tmp/sums_$holds" | head -5 >&2
    die "a killed save left a mixed or incomplete set"
  fi
  if [[ $got == "$holds" ]]; then
    old=$((old + 1))
    ((left > 0)) && before_swap=$((before_swap + 1))
  else
    new=$((new + 1))
  fi
  ((left > 0)) && mid=$((mid + 1))
  holds=$got
done
echo "old set: $old, new set: $new; killed inside the save (a sibling left behind): $mid," \
  "of which before the swap: $before_swap"
# Without kills inside the save, the trials proved nothing.
((mid >= trials / 10)) || die "only $mid of $trials kills landed inside the save"

echo "---- a complete save removes the siblings killed saves left"
save 1 "$dir"
[[ $(check "$dir") == 1 ]] || die "$dir does not hold set 1 after a complete save"
left=$(siblings | wc -l)
((left == 0)) || die "$left sibling directories are left after a complete save"
echo "all trials left a complete set"
