#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sets up (scripts/setup.sh), then runs every test with CTest. GPU tests report "skipped" without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900
