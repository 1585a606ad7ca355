#!/usr/bin/env bash
# Installs the Debian 12 packages Sluice needs to build, test and lint. Idempotent: it asks
# dpkg what is already installed and runs apt-get (update once, then install) only for what
# is missing, so it is fast and silent when everything is present. Uses sudo only when not
# root and sudo exists.
set -euo pipefail

packages=(
  build-essential cmake git
  libabsl-dev libtbb-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang-format ccache pkg-config ninja-build lld
  clang libclang-rt-14-dev
  python3 python3-dev python3-venv
  openmpi-bin libopenmpi-dev
  libonnx-dev libprotobuf-dev
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install_deps: dpkg-query not found; this script targets Debian 12." >&2
  echo "install_deps: install these yourself: ${packages[*]}" >&2
  exit 1
fi

# One dpkg-query for all packages; it exits 1 when some are unknown, which is expected here.
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${packages[@]}" 2>/dev/null \
  | awk '$2 == "installed" { print $1 }' || true)
missing=()
for pkg in "${packages[@]}"; do
  if ! grep -qxF -- "$pkg" <<<"$installed"; then
    missing+=("$pkg")
  fi
done
if (( ${#missing[@]} == 0 )); then
  exit 0
fi

sudo=()
if (( EUID != 0 )); then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install_deps: missing ${missing[*]}; run as root (sudo is not available)." >&2
    exit 1
  fi
fi

echo "install_deps: installing ${missing[*]}"
# `env VAR=value` rather than a bare assignment: sudo's env_reset would drop it.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
