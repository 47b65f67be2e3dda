#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Developer build into build/ (shared by everyone working in this tree: serialised with a lock). Extra args go to the build tool.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 9>/tmp/moebench-build.lock
flock 9
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
fi
cmake --build build -j2 -- -k "$@" 2>&1 | grep -vE '^\[ *[0-9]+%\]|^make|Consolidate compiler' || true
test -x build/moebench && test -x build/tests/moebench_tests_cpu
