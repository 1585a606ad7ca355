#!/usr/bin/env bash
# Builds abseil with -fsanitize=thread and installs it (static libraries) into PREFIX, for the
# ThreadSanitizer build (.ci/run).
#
# Why: Debian's libabsl is not instrumented, so TSan sees neither absl::Mutex nor
# absl::Notification and reports a data race on every field they protect. An instrumented
# abseil makes their happens-before edges visible.
#
# The source is Debian's own abseil source package, the version libabsl-dev comes from when
# the archive still has it (the newest one otherwise), fetched with `apt-get source` through a
# private apt configuration in a temporary directory: no root, no change to the system's apt
# sources. The mirrors are those the system's apt already uses for this release.
#
#   scripts/build_tsan_absl.sh PREFIX    idempotent: does nothing when PREFIX is up to date
#
# SLUICE_JOBS sets the build parallelism (default: nproc).
set -euo pipefail

if (( $# != 1 )); then
  echo "usage: $0 PREFIX" >&2
  exit 2
fi
prefix=$(realpath -m "$1")
jobs=${SLUICE_JOBS:-$(nproc)}
stamp=$prefix/.sluice-tsan-absl

# "abseil=20220623.1-1+deb12u2": the source package and version of the installed abseil.
wanted=$(dpkg-query -W -f='${source:Package}=${source:Version}' libabsl-dev)
if [[ -f "$stamp" && "$(<"$stamp")" == "$wanted" ]]; then
  echo "build_tsan_absl: $prefix is up to date ($wanted)"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-tsan-absl.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/{lists/partial,cache/archives/partial,sources.list.d,src}

# deb-src lines for the Debian suites of this release, on the mirrors the system uses.
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:?}")
signed_by=""
if [[ -f /usr/share/keyrings/debian-archive-keyring.gpg ]]; then
  signed_by="[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
fi
# shellcheck disable=SC2016  # apt's own $(FIELD) placeholders, not shell
apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null \
  | awk -v c="$codename" '$2 == c || $2 == c "-updates" || $2 == c "-security"' | sort -u \
  | while read -r uri suite; do
      echo "deb-src ${signed_by}${uri} ${suite} main"
    done >"$work/sources.list"
if [[ ! -s "$work/sources.list" ]]; then
  cat >"$work/sources.list" <<LIST
deb-src ${signed_by}http://deb.debian.org/debian ${codename} main
deb-src ${signed_by}http://deb.debian.org/debian ${codename}-updates main
deb-src ${signed_by}http://deb.debian.org/debian-security ${codename}-security main
LIST
fi

apt=(apt-get -q
  -o Dir::Etc::SourceList="$work/sources.list"
  -o Dir::Etc::SourceParts="$work/sources.list.d"
  -o Dir::State::Lists="$work/lists"
  -o Dir::Cache="$work/cache"
  -o APT::Sandbox::User="$(id -un)")
echo "build_tsan_absl: fetching the Debian source of $wanted"
"${apt[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
(
  cd "$work/src"
  "${apt[@]}" source --download-only "$wanted" >>"$work/apt.log" 2>&1 \
    || { echo "build_tsan_absl: $wanted is no longer in the archive; taking the newest abseil"
         "${apt[@]}" source --download-only "${wanted%%=*}" >>"$work/apt.log" 2>&1; }
) || { cat "$work/apt.log" >&2; exit 1; }
dsc=$(find "$work/src" -maxdepth 1 -name '*.dsc' -print -quit)
# apt checked the files against the signed archive index; the maintainer's own signature
# on the .dsc cannot be checked without their key, hence a harmless warning kept in the log.
dpkg-source -x "$dsc" "$work/absl" >>"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }

# -O1 -g1 as CI's sanitizer builds (.ci/run); ccache where present.
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
echo "build_tsan_absl: building $(basename "$dsc" .dsc) with -fsanitize=thread into $prefix"
# C++17 and static libraries as Debian builds it; the options in absl/base/options.h are
# fixed, so the ABI is the same for the C++20 code that uses it.
generator="Unix Makefiles"
if command -v ninja >/dev/null; then generator=Ninja; fi  # many small libraries: no idle core between them
cmake -S "$work/absl" -B "$work/build" -G "$generator" -Wno-dev \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  ${launcher[@]+"${launcher[@]}"} \
  -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_TESTING=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" >"$work/build.log" 2>&1 \
  || { tail -n 50 "$work/build.log" >&2; exit 1; }
# The build log is long (-Wtsan notes on fences); show it only on failure.
cmake --build "$work/build" -j"$jobs" >>"$work/build.log" 2>&1 \
  || { grep -B5 -A20 -m5 'error' "$work/build.log" >&2 || tail -n 50 "$work/build.log" >&2; exit 1; }
rm -rf "$prefix"
cmake --install "$work/build" >>"$work/build.log" 2>&1 || { tail -n 50 "$work/build.log" >&2; exit 1; }
echo "$wanted" >"$stamp"
echo "build_tsan_absl: done"
