#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The tree's C++ and CUDA sources in .clang-format's layout: scripts/format.sh rewrites them; --check lists the files
# that differ and exits 1. clang-format 14 (Debian's clang-format-14) wrote the tree; other versions break lines
# differently, so the check is not in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$cf" ] || { echo "format.sh: clang-format not found; apt install clang-format-14" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    "$cf" --style=file "$f" | cmp -s - "$f" || { echo "$f"; bad=1; }
  done
  exit "$bad"
fi
"$cf" -i --style=file "${files[@]}"
