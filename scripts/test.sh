#!/usr/bin/env bash
# The project's test command (the README points here): configures a Release build in
# build/, builds it and runs every ctest test, including those labelled `gpu` (they
# GTEST_SKIP() when no GPU is present); then installs the Python package into a fresh
# virtual environment with `pip install .` and runs its pytest suite
# (scripts/python_test.sh). Extra arguments are passed to ctest, e.g.
# `scripts/test.sh -R ep_tests`. SLUICE_JOBS overrides the parallelism (default 2).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=${SLUICE_JOBS:-2}

bash scripts/install_deps.sh

# The compilers by the names the Python build (scripts/python_test.sh: scikit-build-core,
# which finds g++) uses too: ccache keys include the compiler's name, and with /usr/bin/c++
# here the pip build missed the cache for every source it shares with this build.
export CC=${CC:-gcc} CXX=${CXX:-g++}
# A new build/ is a Ninja unity build, as the Python package's is (configure_build.sh).
source scripts/configure_build.sh
configure_build build
cmake --build build -j"$jobs"
# --no-tests=error: a build that registers no tests must not look like a passing one.
ctest --test-dir build --output-on-failure -j"$jobs" --no-tests=error "$@"

bash scripts/python_test.sh
