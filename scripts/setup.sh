#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Idempotent set-up: installs only the missing Debian packages, then configures and builds the moebench binary into
# build/ (scripts/test.sh builds and runs the tests).
# Usage: scripts/setup.sh [extra cmake args...]   (env BUILD_DIR, MOEBENCH_CUDA=AUTO|ON|OFF, MOEBENCH_EXTRA_PKGS)
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential cmake git pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev catch2 libopenblas-dev
      libopenmpi-dev openmpi-bin)  # OpenMPI: expert parallelism over processes (mpirun -np N moebench run --ep N)
# shellcheck disable=SC2206  # extra packages, space-separated (scripts/test.sh adds the tests' own)
pkgs+=(${MOEBENCH_EXTRA_PKGS:-})
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUILD_DIR=${BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)
# CUDA for this machine's GPU where one answers (native: one architecture, the fastest build); without a GPU the
# default list of CMakeLists.txt. An architecture given by the caller (CUDAARCHS, or an earlier configure) wins.
cuda_arch=()
if [ -z "${CUDAARCHS:-}" ] && ! grep -qs '^CMAKE_CUDA_ARCHITECTURES:' "$BUILD_DIR/CMakeCache.txt" &&
   command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  cuda_arch=(-DCMAKE_CUDA_ARCHITECTURES=native)
  echo "setup: a GPU answers: CUDA code for its architecture only (native)"
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMOEBENCH_CUDA="${MOEBENCH_CUDA:-AUTO}" "${cuda_arch[@]}" "$@" >/dev/null
# The tool only (scripts/test.sh builds the tests): the first report comes sooner.
cmake --build "$BUILD_DIR" -j"$jobs" --target moebench
echo "setup: built $BUILD_DIR/moebench"
