#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sets up (scripts/setup.sh), builds the tests, then runs every test with CTest. GPU tests report "skipped" without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# numpy: tests/dump_check.py recomputes dumped MoE blocks with scripts/check_moe_dump.py (skipped without it).
MOEBENCH_EXTRA_PKGS="python3-numpy" scripts/setup.sh
cmake --build "${BUILD_DIR:-build}" -j"$(nproc 2>/dev/null || echo 2)"   # the test executables too
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900
