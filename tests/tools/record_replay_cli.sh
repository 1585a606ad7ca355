#!/usr/bin/env bash
# Every front end's record replays with its checksums, as recorded and across devices:
# `sluice demo --record` (static, compiled and unfused, eager, graph called from eager) and
# `sluice run --record` of a control-flow program (while + cond), each recorded on cpu and on
# sim:0, then `sluice replay --ops standard --check-sync` as recorded and with the device
# map moving cpu onto sim:0 or sim:0 onto cpu (where sim's copy-stream waits become cpu
# record events). A replay passes when it exits 0 and its JSON line has checksums > 0,
# mismatches 0 and sync_errors 0. The last check corrupts a record's checksum and expects
# the replay to fail, proving the check can.
#
#   tests/tools/record_replay_cli.sh SLUICE_BINARY SOURCE_DIR
set -uo pipefail

sluice=${1:?usage: record_replay_cli.sh SLUICE_BINARY SOURCE_DIR}
src=${2:?usage: record_replay_cli.sh SLUICE_BINARY SOURCE_DIR}
cf=$src/examples/control_flow
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
replays=0

# field NAME JSON: the integer value of "NAME" in the replay's JSON line.
field() { sed -nE "s/.*\"$1\":([0-9]+).*/\1/p" <<<"$2"; }

# replay LABEL FILE [ARGS...]: replays FILE and checks its summary.
replay() {
  local label=$1 file=$2 json
  shift 2
  replays=$((replays + 1))
  if ! json=$("$sluice" replay "$file" --ops standard --check-sync "$@" 2>"$tmp/err"); then
    echo "FAIL: $label: replay exited non-zero" >&2
    sed 's/^/  /' "$tmp/err" | tail -3 >&2
    failures=$((failures + 1))
    return
  fi
  json=$(tail -1 <<<"$json")
  if [[ $(field checksums "$json") == 0 || $(field mismatches "$json") != 0 ||
    $(field sync_errors "$json") != 0 ]]; then
    echo "FAIL: $label: $json" >&2
    failures=$((failures + 1))
    return
  fi
  echo "ok: $label: $json"
}

# record LABEL FILE ARGS...: runs sluice ARGS --record FILE.
record() {
  local label=$1 file=$2
  shift 2
  if ! "$sluice" "$@" --record "$file" >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: $label: recording run failed" >&2
    sed 's/^/  /' "$tmp/err" | tail -3 >&2
    failures=$((failures + 1))
    return 1
  fi
}

power_iteration=(run "$cf/power_iteration.program" --feed A="$cf/A.npy" --feed v0="$cf/v0.npy"
  --feed tol="$cf/tol.npy" --feed gap0="$cf/gap0.npy" --fetch lambda --fetch v)
for device in cpu sim:0; do
  if [[ $device == cpu ]]; then other=sim:0; else other=cpu; fi
  for front in static static_unfused eager graph control_flow; do
    case $front in
      static) args=(demo --steps 2 --device "$device" --streams 2) ;;
      static_unfused) args=(demo --steps 2 --device "$device" --no-compile) ;;
      eager) args=(demo --steps 2 --device "$device" --eager) ;;
      graph) args=(demo --steps 2 --device "$device" --graph) ;;
      control_flow) args=("${power_iteration[@]}" --device "$device") ;;
    esac
    file=$tmp/$front.${device/:/}.rec
    record "$front on $device" "$file" "${args[@]}" || continue
    replay "$front recorded on $device" "$file"
    replay "$front recorded on $device, replayed on $other" "$file" --device-map "$device=$other"
  done
done

# The check can fail: one stored checksum changed must fail the replay.
file=$tmp/eager.sim0.rec
if [[ -f $file ]]; then
  awk '!done && /^checksum / { $3 = ($3 == "0000000000000000" ? "0000000000000001" : "0000000000000000"); done = 1 } { print }' \
    "$file" >"$tmp/tampered.rec"
  if "$sluice" replay "$tmp/tampered.rec" --ops standard >"$tmp/out" 2>&1; then
    echo "FAIL: a replay with a changed checksum passed" >&2
    failures=$((failures + 1))
  elif ! grep -q '"mismatches":1' "$tmp/out"; then
    echo "FAIL: a changed checksum was not reported as one mismatch" >&2
    tail -2 "$tmp/out" >&2
    failures=$((failures + 1))
  else
    echo "ok: a changed checksum fails the replay"
  fi
fi

echo "$replays replays, $failures failures"
exit $((failures > 0))
