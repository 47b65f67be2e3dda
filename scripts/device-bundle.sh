#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The build's Debian dependencies, bundled for a machine that reaches no package registry (the GPU machine).
#
#   scripts/device-bundle.sh                 on a Debian 12 development machine (apt): downloads the .deb files into
#                                            .device-deps/ (git-ignored) with a MANIFEST; idempotent; prints the size.
#   scripts/device-bundle.sh --unpack DIR    anywhere (no apt; dpkg-deb or python3): checks the MANIFEST's sha256 and
#                                            unpacks every .deb as `dpkg -x` does into DIR; prints DIR/usr, the value
#                                            for cmake -DMOEBENCH_DEPS_PREFIX=... (scripts/device-check.sh and
#                                            scripts/ci-bundle-sanitize.sh do both steps themselves).
#
# What travels is .device-deps/ (carry it with the run): ~6 MB of .deb files, against a 24 MiB allowance.
# Chosen because it is the smallest form that needs no carried shared library on the device:
# - CLI11, nlohmann/json, Catch2 are header-only; a bundle build compiles fmt's implementation in (cmake/fmt_once.cpp).
#   libfmt9 comes along only because fmt's CMake config checks that its .so exists.
# - OpenBLAS is linked statically from libopenblas-pthread-dev's libopenblas.a: the BLAS part moebench calls
#   (cblas_sgemm, openblas_*) needs neither libgfortran5 nor libquadmath0 (checked: a static cblas_sgemm program
#   links with -lpthread -lm only and ldd shows libc alone), so those and libopenblas0-pthread are not bundled.
# - Unpacked, libopenblas.a is 58 MB (the shared library 36 MB): too big to carry, so the .deb files (xz inside)
#   travel and are unpacked on the machine that builds (about a second), into the build folder, never into /.
# Debian's CMake configs of CLI11, nlohmann_json, fmt and Catch2 are relocatable; OpenBLAS's holds absolute /usr
# paths, which cmake/MoebenchDeps.cmake rebases onto the unpack folder.
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=${DEVICE_DEPS:-.device-deps}  # another folder for the tests of scripts/device-check.sh (tests/device_check_check.py)
MAX_BYTES=$((24 * 1024 * 1024))
PKGS=(libcli11-dev nlohmann-json3-dev libfmt-dev libfmt9 catch2 libopenblas-pthread-dev)
# A file each package must provide (checked in the .deb listings, so a renamed package fails here, not on the GPU).
NEEDS=(./usr/share/cmake/CLI11/CLI11Config.cmake ./usr/include/nlohmann/json.hpp ./usr/include/fmt/format.h
       ./usr/lib/x86_64-linux-gnu/cmake/fmt/fmt-config.cmake ./usr/include/catch2/catch.hpp
       ./usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.a
       ./usr/lib/x86_64-linux-gnu/openblas-pthread/cmake/openblas/OpenBLASConfig.cmake
       ./usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h)

die() { echo "device-bundle: error: $*" >&2; exit 2; }

# unpack_deb DEB DIR: dpkg -x, or (no dpkg on the machine) the same with python3: a .deb is an ar archive whose
# data.tar.* member holds the files.
unpack_deb() {
    if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$1" "$2"
        return
    fi
    command -v python3 >/dev/null || die "neither dpkg-deb nor python3 is here to unpack $1"
    python3 - "$1" "$2" <<'PY'
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
raw = open(deb, "rb").read()
assert raw[:8] == b"!<arch>\n", deb + ": not a .deb (ar) file"
pos = 8
while pos + 60 <= len(raw):
    name, size = raw[pos:pos + 16].decode().strip().rstrip("/"), int(raw[pos + 48:pos + 58])
    body = raw[pos + 60:pos + 60 + size]
    pos += 60 + size + (size & 1)
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
            if hasattr(tarfile, "tar_filter"):
                tar.extractall(dest, filter="tar")
            else:
                tar.extractall(dest)
        sys.exit(0)
sys.exit(deb + ": no data.tar member")
PY
}

if [ "${1:-}" = "--unpack" ]; then
    dest=${2:?usage: scripts/device-bundle.sh --unpack DIR}
    [ -f "$BUNDLE/MANIFEST" ] || die "$BUNDLE/MANIFEST is missing: run scripts/device-bundle.sh on a machine with apt first"
    stamp="$dest/.bundle-manifest"
    if [ -f "$stamp" ] && cmp -s "$stamp" "$BUNDLE/MANIFEST"; then
        echo "$(cd "$dest" && pwd)/usr"
        exit 0
    fi
    # Only ever replace a folder this script made (or an empty one).
    if [ -d "$dest" ] && [ ! -f "$stamp" ] && [ -n "$(ls -A "$dest")" ]; then
        die "$dest exists and is not an unpacked bundle: give an empty or new folder"
    fi
    rm -rf "$dest"
    mkdir -p "$dest"
    while read -r pkg version sha file; do
        [ -f "$BUNDLE/$file" ] || die "$BUNDLE/$file ($pkg) is missing: rerun scripts/device-bundle.sh"
        echo "$sha  $BUNDLE/$file" | sha256sum -c --quiet - >/dev/null 2>&1 ||
            die "$BUNDLE/$file does not match its MANIFEST sha256: rerun scripts/device-bundle.sh"
        unpack_deb "$BUNDLE/$file" "$dest"
    done <"$BUNDLE/MANIFEST"
    rm -rf "$dest/usr/share/doc" "$dest/usr/share/lintian"
    cp "$BUNDLE/MANIFEST" "$stamp"
    echo "$(cd "$dest" && pwd)/usr"
    exit 0
fi
[ $# -eq 0 ] || die "unknown argument '$1' (usage: scripts/device-bundle.sh [--unpack DIR])"

command -v apt-get >/dev/null || die "apt-get is not here: make the bundle on a Debian 12 machine and carry $BUNDLE/"
mkdir -p "$BUNDLE"
missing=()
for p in "${PKGS[@]}"; do
    ok=""
    for f in "$BUNDLE/${p}"_*.deb; do
        [ -f "$f" ] && dpkg-deb --info "$f" >/dev/null 2>&1 && ok=1
    done
    [ -n "$ok" ] || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "device-bundle: downloading ${missing[*]}"
    # As root apt cannot hand the download to its _apt user in a folder it cannot write: download as root.
    get() { (cd "$BUNDLE" && apt-get download -q -o APT::Sandbox::User=root "${missing[@]}" >/dev/null); }
    get || { echo "device-bundle: apt-get download failed; refreshing the package lists once"; apt-get update -qq && get; } ||
        die "apt-get download ${missing[*]} failed"
fi

# One .deb per package (the newest if several versions were downloaded over time), listed in the MANIFEST.
: >"$BUNDLE/MANIFEST.new"
for p in "${PKGS[@]}"; do
    best="" best_v=""
    for f in "$BUNDLE/${p}"_*.deb; do
        [ "$(dpkg-deb -f "$f" Package)" = "$p" ] || continue
        v=$(dpkg-deb -f "$f" Version)
        if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best_v"; then best=$f best_v=$v; fi
    done
    [ -n "$best" ] || die "no .deb for $p in $BUNDLE/"
    echo "$p $best_v $(sha256sum "$best" | cut -d' ' -f1) $(basename "$best")" >>"$BUNDLE/MANIFEST.new"
done
for f in "$BUNDLE"/*.deb; do
    grep -q " $(basename "$f")\$" "$BUNDLE/MANIFEST.new" || { echo "device-bundle: removing stale $f"; rm -f "$f"; }
done
mv "$BUNDLE/MANIFEST.new" "$BUNDLE/MANIFEST"

listing=$(for f in "$BUNDLE"/*.deb; do dpkg-deb -c "$f"; done | awk '{print $6}')
for need in "${NEEDS[@]}"; do
    grep -qxF "$need" <<<"$listing" || die "no package in $BUNDLE/ provides ${need#.} (Debian changed a package?)"
done

bytes=$(du -sb "$BUNDLE" | cut -f1)
echo "device-bundle: $BUNDLE/ holds $(wc -l <"$BUNDLE/MANIFEST") packages, $((bytes / 1024)) KiB (limit $((MAX_BYTES / 1024)) KiB):"
awk '{printf "  %s %s (%s)\n", $1, $2, $4}' "$BUNDLE/MANIFEST"
[ "$bytes" -le "$MAX_BYTES" ] || die "$BUNDLE/ is larger than $((MAX_BYTES / 1024 / 1024)) MiB"
