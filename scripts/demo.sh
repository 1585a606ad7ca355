#!/usr/bin/env bash
# The project's main job (the README's first command): installs what is missing, builds the
# `sluice` tool in build/ and runs `sluice demo`, which builds the demo model (Linear(16->1)
# + MSELoss + Adam), trains it for 100 steps and prints the loss falling. Extra arguments go to
# `sluice demo` (try --help). SLUICE_JOBS overrides the build parallelism (default 2).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=${SLUICE_JOBS:-2}

bash scripts/install_deps.sh
source scripts/configure_build.sh
configure_build build >/dev/null
cmake --build build -j"$jobs" --target sluice
build/tools/sluice demo "$@"
