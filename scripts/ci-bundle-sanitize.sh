#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CI's second tree: one build that proves two things at once.
# - The bundle build (what the GPU machine gets, scripts/device-bundle.sh): configured and built inside a private
#   mount namespace in which the system's CLI11, nlohmann-json, fmt, Catch2 and OpenBLAS (headers, CMake configs,
#   libraries) are hidden under empty folders and files, so only .device-deps/ can satisfy the build. Before building,
#   it checks that every file of those Debian packages is gone, and that configure without the bundle fails.
# - The sanitizer build, with clang: -DMOEBENCH_SANITIZE=address,undefined, CUDA off; then the CPU test executable
#   runs (with the CLI tests, whose moebench is instrumented too). Any sanitizer report, also from a child process
#   whose exit code a test ignores, fails the run (reports are written to files, printed at the end).
# - The fuzz build, in the same tree (-DMOEBENCH_FUZZ=ON: the layer libraries also carry libFuzzer's coverage hooks,
#   and the targets of fuzz/ link them): every target runs for a few seconds (MOEBENCH_SAN_FUZZ_SECONDS, default 4)
#   on its seeds and the regressions of tests/data/fuzz-regressions/ through scripts/fuzz.sh, beside the CPU tests; a
#   finding fails the run.
#   So a change that breaks the fuzz build or lets a fixed finding back in stops CI (the fuzz build once broke for
#   weeks unnoticed, when CUDA-only files joined src/comm/).
# Usage: scripts/ci-bundle-sanitize.sh [Catch2 test spec...]   as root (unshare -m, mount --bind; without them only
#   the sanitizer half runs, with a warning), on the Debian
#   dev machine or CI; env BUILD_DIR (default build-asan), JOBS (default nproc), MOEBENCH_SAN_TESTS (the Catch2 test
#   spec; default SLOW_SPEC below; arguments win over both), MOEBENCH_SAN_CXX (default clang++-14, else clang++),
#   MOEBENCH_SAN_FUZZ_SECONDS (0: build the fuzz targets but do not run them).
# Takes ~13 minutes from scratch on 2 cores (2026-12-02: build 8.4 min at -Og, CPU tests ~4 min).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${BUILD_DIR:-build-asan}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
# Packages whose system copies are hidden (with their -dev/runtime halves), as dpkg knows them.
HIDE_PKGS=(libcli11-dev nlohmann-json3-dev libfmt-dev libfmt9 catch2 libopenblas-dev libopenblas-pthread-dev
           libopenblas0 libopenblas0-pthread)
# Catch2 test spec under the sanitizers: the cases left out (tagged [slow]: 17 s each instrumented, measuring this
# machine's bandwidth or modeling whole large models in arithmetic; the normal CI tree runs them).
SLOW_SPEC="~[slow]"

die() { echo "ci-bundle-sanitize: error: $*" >&2; exit 1; }
say() { echo "ci-bundle-sanitize: [$(( $(date +%s) - T0 ))s] $*"; }
T0=${MOEBENCH_CI_T0:-$(date +%s)}

if [ "${1:-}" != "--inside-namespace" ]; then
    scripts/device-bundle.sh
    prefix=$(scripts/device-bundle.sh --unpack "$BUILD/deps")
    say "bundle unpacked: $prefix"
    export MOEBENCH_OUTER_MNTNS=$(readlink /proc/self/ns/mnt) MOEBENCH_CI_T0=$T0 MOEBENCH_DEPS_USR=$prefix
    # Without root or mount namespaces (some containers) the sanitizer half still runs; the hiding cannot, and
    # the run says that it proved less.
    if ns_err=$(unshare --mount --propagation private true 2>&1); then
        exec unshare --mount --propagation private "$0" --inside-namespace "$@"
    fi
    echo "ci-bundle-sanitize: warning: no private mount namespace here (unshare -m: ${ns_err:-failed}): the system's" \
         "packages stay visible, so this run does not prove that the bundle alone builds moebench" >&2
    MOEBENCH_NO_HIDE=1 exec "$0" --inside-namespace "$@"
fi
shift

# ---- inside the private mount namespace (or without one: MOEBENCH_NO_HIDE=1) ----
prefix=${MOEBENCH_DEPS_USR:?}
if [ -z "${MOEBENCH_NO_HIDE:-}" ]; then
    # Never bind over the system's /usr in the shared namespace (other builds run on this machine).
    [ "$(readlink /proc/self/ns/mnt)" != "${MOEBENCH_OUTER_MNTNS:-}" ] || die "not in a private mount namespace"
    multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    # Folders shared with other packages: a file directly in one is hidden on its own, anything deeper by hiding the
    # package's own folder right below it.
    SHARED_DIRS=(/usr/include "/usr/include/$multiarch" /usr/lib "/usr/lib/$multiarch" /usr/lib/cmake
                 "/usr/lib/$multiarch/cmake" "/usr/lib/$multiarch/pkgconfig" /usr/share /usr/share/cmake /usr/share/pkgconfig)
    empty_dir=$(mktemp -d /tmp/moebench-hidden-dir.XXXXXX)
    empty_file=$(mktemp /tmp/moebench-hidden-file.XXXXXX)
    trap 'rm -rf "$empty_dir" "$empty_file"' EXIT

    # The packages' files (not folders, links or docs).
    pkg_files() {
        for p in "${HIDE_PKGS[@]}"; do
            dpkg -L "$p" 2>/dev/null || true  # absent package: nothing to hide
        done | grep -E '^/usr/(include|lib|share/cmake|share/pkgconfig|share/Catch2)/' | sort -u |
            while read -r f; do [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"; done
    }

    # hide_unit FILE: the path to cover for FILE: the file itself, or its top folder below the deepest shared folder.
    hide_unit() {
        local f=$1 best="" d
        for d in "${SHARED_DIRS[@]}"; do
            case "$f" in "$d"/*) [ ${#d} -gt ${#best} ] && best=$d ;; esac
        done
        [ -n "$best" ] || { echo "$f"; return; }
        local rest=${f#"$best"/}
        case "$rest" in */*) echo "$best/${rest%%/*}" ;; *) echo "$f" ;; esac
    }

    mapfile -t files < <(pkg_files)
    ((${#files[@]} > 0)) || die "dpkg lists no files for ${HIDE_PKGS[*]}: nothing to hide (are they installed?)"
    mapfile -t units < <(for f in "${files[@]}"; do hide_unit "$f"; done | sort -u)
    for u in "${units[@]}"; do
        if [ -d "$u" ]; then mount --bind "$empty_dir" "$u"; else mount --bind "$empty_file" "$u"; fi
    done
    # Every file of those packages must now be gone or empty (an alternatives link resolves into a hidden folder).
    for f in "${files[@]}"; do
        [ ! -s "$f" ] || die "$f is still visible after hiding"
    done
    for h in /usr/include/nlohmann/json.hpp /usr/include/CLI/CLI.hpp /usr/include/fmt/format.h /usr/include/catch2/catch.hpp \
             "/usr/include/$multiarch/cblas.h" "/usr/lib/$multiarch/libopenblas.so" "/usr/lib/$multiarch/libfmt.so"; do
        [ ! -s "$h" ] || die "$h is still visible after hiding"
    done
    say "hid ${#files[@]} files of ${HIDE_PKGS[*]} (${#units[@]} bind mounts)"

    # The hiding bites: without the bundle, configure must stop at a missing package.
    probe=$(mktemp -d /tmp/moebench-nobundle.XXXXXX)
    if cmake -S . -B "$probe" -DMOEBENCH_CUDA=OFF -DMOEBENCH_MPI=OFF >"$probe.log" 2>&1; then
        cat "$probe.log"; die "configure without the bundle succeeded: the system packages are not hidden"
    fi
    grep -q "not found: install the Debian package" "$probe.log" || { cat "$probe.log"; die "configure failed for another reason"; }
    say "without the bundle configure fails as it should: $(grep -m1 -o '[A-Za-z0-9_]* not found: install[^(]*' "$probe.log")"
    rm -rf "$probe" "$probe.log"
fi

# clang (libFuzzer is clang's). -Og: with ASan + UBSan under gcc, report_reader.cpp compiled in 69 s at -O3, 23 s at
# -O1 and 15 s at -Og (18 s plain -O3, on a loaded 2-core machine); the whole tree at -O1 took 12 minutes of CI's 25,
# so -Og, optimised enough for the tests' arithmetic (clang reads -Og as -O1). clang 14 compiles this tree about a
# fifth slower than gcc 12 did and the coverage hooks add a tenth; compiling fmt once instead of header-only in every
# file (cmake/fmt_once.cpp) gives that back.
san_cxx=${MOEBENCH_SAN_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
[ -n "$san_cxx" ] || die "no clang++ here: install the Debian packages clang-14 and libclang-rt-14-dev (.ci/run does)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-Og -DNDEBUG" -DMOEBENCH_CUDA=OFF -DMOEBENCH_MPI=OFF \
      -DCMAKE_CXX_COMPILER="$san_cxx" -DMOEBENCH_SANITIZE=address,undefined -DMOEBENCH_FUZZ=ON \
      -DMOEBENCH_DEPS_PREFIX="$prefix" >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; die "configure failed"; }
grep 'moebench:' "$BUILD/configure.log" || true
say "building $BUILD with $san_cxx (-j$JOBS): moebench, the CPU tests, the fuzz targets"
if ! cmake --build "$BUILD" -j"$JOBS" --target moebench moebench_tests_cpu moebench_fuzz_all >"$BUILD/build.log" 2>&1; then
    grep -E -A4 'error|Error' "$BUILD/build.log" | head -n 60
    die "the build failed ($BUILD/build.log)"
fi
grep -iE 'warning:' "$BUILD/build.log" | sort -u | head -n 20 || true
say "built"

# Nothing from the bundle (or the hidden system copies) at run time: fmt compiled in, OpenBLAS static.
if ldd "$BUILD/moebench" | grep -E 'libfmt|libopenblas|libgfortran|libblas|not found'; then
    die "$BUILD/moebench needs a shared library it should not (above)"
fi

san_logs="$ROOT/$BUILD/sanitizer-logs"
rm -rf "$san_logs"
mkdir -p "$san_logs"
# Every fuzz target, briefly, on its seeds and past findings (scripts/fuzz.sh: its own sanitizer options, a summary
# line per target, exit 1 on a finding), beside the CPU tests: they keep about one core busy, the fuzz targets the
# other(s).
fuzz_s=${MOEBENCH_SAN_FUZZ_SECONDS:-4}
fuzz_pid=""
if [ "$fuzz_s" -gt 0 ]; then
    fuzz_jobs=$((JOBS > 1 ? JOBS - 1 : 1))
    say "fuzzing each target for ${fuzz_s}s (scripts/fuzz.sh, $fuzz_jobs at a time) beside the tests"
    env -u ASAN_OPTIONS -u UBSAN_OPTIONS FUZZ_BUILD_DIR="$BUILD" FUZZ_NICE=0 FUZZ_JOBS="$fuzz_jobs" FUZZ_BUILD_JOBS=1 \
        scripts/fuzz.sh "$fuzz_s" >"$BUILD/fuzz.log" 2>&1 &
    fuzz_pid=$!
fi
# halt_on_error: stop at the first report; allocator_may_return_null: a refused huge allocation throws bad_alloc as
# without ASan (tests check that moebench refuses such inputs cleanly); exit code 86/87 tells a sanitizer stop apart.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=1:exitcode=86:log_path=$san_logs/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=87:log_path=$san_logs/ubsan"
spec=("${MOEBENCH_SAN_TESTS-$SLOW_SPEC}")
[ $# -gt 0 ] && spec=("$@")
[ -n "${spec[0]}" ] || spec=()
say "running $BUILD/tests/moebench_tests_cpu ${spec[*]:-(all cases)}"
rc=0
"$BUILD/tests/moebench_tests_cpu" --reporter compact --durations yes "${spec[@]}" >"$BUILD/tests.log" 2>&1 || rc=$?
grep -vE '^[0-9.]+ s: ' "$BUILD/tests.log" | tail -n 40
echo "slowest cases:"; grep -E '^[0-9.]+ s: ' "$BUILD/tests.log" | sort -rn | head -n 12 || true
fuzz_rc=0
if [ -n "$fuzz_pid" ]; then
    say "tests done; waiting for the fuzz targets"
    wait "$fuzz_pid" || fuzz_rc=$?
    cat "$BUILD/fuzz.log"
fi
if compgen -G "$san_logs/*" >/dev/null; then
    for f in "$san_logs"/*; do echo "==== $f"; head -n 60 "$f"; done
    die "sanitizer reports above ($san_logs)"
fi
[ $rc -eq 0 ] || die "the CPU tests failed under the sanitizers (exit $rc; $BUILD/tests.log)"
[ $fuzz_rc -eq 0 ] || die "a fuzz target found something or did not build (exit $fuzz_rc; $BUILD/fuzz.log, $BUILD/logs/)"
if [ -z "${MOEBENCH_NO_HIDE:-}" ]; then
    say "ok: bundle-only build with address,undefined sanitizers, CPU tests pass, fuzz targets build and run clean"
else
    say "ok: build with address,undefined sanitizers, CPU tests pass, fuzz targets build and run clean (the bundle-only" \
        "proof did not run: see the warning)"
fi
