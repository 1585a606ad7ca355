#!/usr/bin/env bash
# Installs what is missing, builds the
# `sluice` tool in build/ and runs `sluice selfcheck`, which creates every execution
# provider, streams work through each device and prints a summary. Extra arguments go to
# `sluice selfcheck` (try --help). SLUICE_JOBS overrides the build parallelism (default 2).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=${SLUICE_JOBS:-2}

bash scripts/install_deps.sh
source scripts/configure_build.sh
configure_build build >/dev/null
cmake --build build -j"$jobs" --target sluice
build/tools/sluice selfcheck "$@"
