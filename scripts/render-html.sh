#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Renders a moebench HTML report in headless Chromium and saves a screenshot, to check it renders without errors
# and without network access. Usage: scripts/render-html.sh REPORT.html [OUT.png]
# (REPORT may also be a report .json: it is rendered to HTML first with build/moebench report --format html.)
# Installs Debian's chromium when missing (needs root and apt); exits 0 with "skipped: ..." when it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."
in="${1:?usage: scripts/render-html.sh REPORT.html|REPORT.json [OUT.png]}"
if [[ "$in" == *.json ]]; then
  html="${in%.json}.html"
  build/moebench report "$in" --format html -o "$html"
else
  html="$in"
fi
out="${2:-${html%.html}.png}"

browser=""
for b in chromium chromium-browser; do command -v "$b" >/dev/null 2>&1 && browser="$b" && break; done
if [ -z "$browser" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "render-html: installing Debian chromium ..." >&2
    (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; }) || true
  fi
  command -v chromium >/dev/null 2>&1 && browser=chromium
fi
if [ -z "$browser" ]; then
  echo "render-html: skipped: chromium is not installed and could not be installed" >&2
  exit 0
fi

# The report must not reference anything outside itself.
if grep -Eq '(src|href)="(https?:)?//' "$html" || grep -q '<script' "$html"; then
  echo "render-html: FAIL: $html has an external reference or a script" >&2
  exit 1
fi
profile="$(mktemp -d)"
log="$(mktemp)"
trap 'rm -rf "$profile" "$log"' EXIT
abs="$(realpath "$html")"
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$profile" \
  --screenshot="$(realpath -m "$out")" --window-size=1400,3000 "file://$abs" >"$log" 2>&1 || {
  cat "$log" >&2
  echo "render-html: FAIL: chromium exited with an error" >&2
  exit 1
}
if [ ! -s "$out" ]; then
  cat "$log" >&2
  echo "render-html: FAIL: no screenshot written" >&2
  exit 1
fi
echo "render-html: ok: $out ($(stat -c %s "$out") bytes)"
