#!/usr/bin/env bash
# Installs every system and Python dependency tqc needs. Idempotent: packages
# already present are left alone, so a second run is quick.
set -euo pipefail

APT_PACKAGES=(
  cmake ninja-build g++ python3 python3-pip python3-venv python3-dev patch
  pkg-config
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools lld-22 clang-22
  libclang-rt-22-dev
  libgtest-dev libsqlite3-dev
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
else
  echo "bootstrap: system packages present"
fi

# Python packages: lit ships with llvm-22-tools; the tqc package's build and
# test requirements (python/requirements.txt, pinned) go into a virtual
# environment under the build directory, which the ctest `python` creates
# (python/tests/run-ctest.sh), not into Debian's externally managed python3.
