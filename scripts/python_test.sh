#!/usr/bin/env bash
# Builds and installs the Python package the way a user does — `pip install .` into a fresh
# virtual environment (build/venv) — then runs the pytest suite (tests/python) against the
# installed package, with the installed `sluice` command on PATH. Extra arguments go to
# pytest (`scripts/python_test.sh -k interrupt`). SLUICE_JOBS sets the build parallelism
# (default 2). The package's CMake build keeps its tree in build-python-<tag>/, so a
# second run rebuilds only what changed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=${SLUICE_JOBS:-2}
venv=build/venv

bash scripts/install_deps.sh

echo "python_test: a fresh virtual environment in $venv"
python3 -m venv --clear "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
echo "python_test: pip install .[test] (builds the engine and the extension)"
# The compilers scripts/test.sh names: the same ccache keys as build/ (see there).
export CC=${CC:-gcc} CXX=${CXX:-g++}
CMAKE_BUILD_PARALLEL_LEVEL=$jobs "$venv/bin/python" -m pip install ".[test]"

echo "python_test: pytest tests/python"
# Run from outside the checkout so that `import sluice` finds the installed package, not
# the source tree; the installed `sluice` command is required by the tests that compare
# with it.
tests=$PWD/tests/python
cd "$venv"
PATH="$PWD/bin:$PATH" SLUICE_REQUIRE_CLI=1 "$PWD/bin/python" -m pytest "$tests" -q "$@"
