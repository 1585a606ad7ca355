#!/usr/bin/env bash
# Proves that an embedder can use an installed Sluice: configures, builds and installs Sluice
# (libraries only: tests, benchmarks and the tool off) into a temporary prefix, then builds
# examples/consumer against that prefix with find_package(Sluice) and runs it. Also checks
# that the install holds no internal/ folder and that every installed (non-cuda) header
# compiles from the installed tree alone. Then builds the C API example (examples/c_api)
# against the prefix twice, (a) with CMake's find_package(Sluice) and Sluice::c and (b) with
# `cc -std=c11 -Wall -Werror $(pkg-config --cflags --libs sluice)`, and runs both on the
# linear regression program files.
#
#   scripts/install_test.sh [-DSOME_SLUICE_OPTION=...]   extra args go to Sluice's configure
#   scripts/install_test.sh --from-build DIR             install DIR, an existing build
#
# --from-build installs a tree that is already built (CI passes build/, the test stage's
# Release build: `cmake --install DIR --prefix PREFIX`) instead of configuring and building
# the libraries again; everything after the install is the same. The libraries-only
# configuration is still built on every run of the test stage, by `pip install .`.
#
# SLUICE_JOBS sets the build parallelism (default: nproc). The work directory is removed on
# success and kept (its path is printed) on failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${SLUICE_JOBS:-$(nproc)}
work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-install-test.XXXXXX")
prefix=$work/prefix
on_exit() {
  local rc=$?
  if (( rc == 0 )); then
    rm -rf "$work"
  else
    echo "install_test: FAILED (exit $rc); work directory kept: $work" >&2
  fi
}
trap on_exit EXIT

if [[ ${1:-} == --from-build ]]; then
  from=${2:?--from-build needs a build directory}
  if [[ ! -f $from/CMakeCache.txt ]]; then
    echo "install_test: --from-build $from: no CMakeCache.txt there (not a configured build)" >&2
    exit 2
  fi
  if ! grep -q '^SLUICE_BUILD_C_API:BOOL=ON$' "$from/CMakeCache.txt"; then
    echo "install_test: --from-build $from: built without the C API (SLUICE_BUILD_C_API=OFF)" >&2
    exit 2
  fi
  echo "install_test: installing the build in $from into $prefix"
  cmake --build "$from" -j"$jobs" --target sluice_c  # up to date: nothing to do
  cmake --install "$from" --prefix "$prefix" >/dev/null
else
  echo "install_test: building and installing Sluice into $prefix"
  cmake -S "$root" -B "$work/build" -G "Unix Makefiles" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCHMARKS=OFF -DSLUICE_BUILD_TOOLS=OFF \
    "$@"
  cmake --build "$work/build" -j"$jobs"
  cmake --install "$work/build"
fi

echo "install_test: the installed headers are the public ones, and each compiles as installed"
if internal=$(find "$prefix/include" -type d -name internal | head -1) && [[ -n "$internal" ]]; then
  echo "install_test: the install ships a private header folder: $internal" >&2
  exit 1
fi
# One translation unit that includes every installed header (cuda ones need the toolkit's
# headers: left out). A public header that includes an uninstalled one fails here.
all_headers=$work/all_headers.cc
(cd "$prefix/include/sluice" && find . -name '*.h' -not -path '*/cuda/*' | sort |
  sed 's|^\./\(.*\)$|#include "\1"|') >"$all_headers"
echo "int main() { return 0; }" >>"$all_headers"
echo "install_test: compiling $(grep -c '^#include' "$all_headers") installed headers"
"${CXX:-c++}" -std=c++20 -fsyntax-only -I"$prefix/include/sluice" "$all_headers"

echo "install_test: building examples/consumer against $prefix"
# No package registry: the consumer must find Sluice through CMAKE_PREFIX_PATH alone.
cmake -S "$root/examples/consumer" -B "$work/consumer" -G "Unix Makefiles" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
sluice_dir=$(sed -n 's/^Sluice_DIR:[A-Z]*=//p' "$work/consumer/CMakeCache.txt")
if [[ "$sluice_dir" != "$prefix"/* ]]; then
  echo "install_test: the consumer found Sluice at '$sluice_dir', not under $prefix" >&2
  exit 1
fi
cmake --build "$work/consumer" -j"$jobs"

echo "install_test: running the consumer"
output=$("$work/consumer/consumer")
echo "$output"
if [[ "$output" != "OK" ]]; then
  echo "install_test: expected the consumer to print OK" >&2
  exit 1
fi
echo "install_test: building examples/c_api against $prefix with find_package(Sluice)"
cmake -S "$root/examples/c_api" -B "$work/c_api" -G "Unix Makefiles" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
cmake --build "$work/c_api" -j"$jobs"
libdir=$(dirname "$(find "$prefix" -name 'libsluice_c.so' | head -1)")
if [[ ! -f "$libdir/pkgconfig/sluice.pc" ]]; then
  echo "install_test: no sluice.pc next to libsluice_c.so (in $libdir/pkgconfig)" >&2
  exit 1
fi
exported=$(nm -D --defined-only "$libdir/libsluice_c.so" | awk '{print $3}' | grep -v '^sluice_' || true)
if [[ -n "$exported" ]]; then
  echo "install_test: libsluice_c.so exports more than the sluice_* functions:" >&2
  echo "$exported" | head >&2
  exit 1
fi

echo "install_test: building examples/c_api with pkg-config (PKG_CONFIG_PATH=$libdir/pkgconfig)"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs sluice)
# shellcheck disable=SC2086  # the flags are words
"${CC:-cc}" -std=c11 -Wall -Werror "$root/examples/c_api/main.c" -o "$work/c_api_pkg_config" \
  $flags

for example in "$work/c_api/c_api_example" "$work/c_api_pkg_config"; do
  echo "install_test: running $example"
  LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$example" "$root/examples/linear_regression"
done
echo "install_test: OK"
