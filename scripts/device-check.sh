#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One-call GPU check for one NVIDIA GPU: the device tool's default machine is an H100 (~78 GiB, HBM3 ~3.35 TB/s), an
# H200 on request; every result names the card it ran on and is judged against that card's copy bandwidth as
# `devices --measure` measures it in the same call. Call it with timeout_s 600 (the deadline below is 480 s) and
# carry [".device-deps"]. In order, each step with its own timeout:
#  0. the dependency bundle, first: without .device-deps/ (and without the packages on the machine) configure would
#     stop at CLI11, so the script stops at once, naming the exact line to run (exit 2);
#  1. the machine: OS, compiler, driver, card (machine.txt), nvidia-smi;
#  2. the build for sm_90 (moebench, moebench_tests_cuda); a configure or build failure ends the script with the
#     CMake error tail in build-error.txt (exit 1);
#  3. `devices --measure` (the card, its copy bandwidth and bf16 GEMM rate: the floors of the verdicts);
#  4. the GPU tests, then the conformance list (every tiny model x every variant: cuda --check against the fp32
#     reference through run_point, and the whole cuda step against the cpu step);
#  5. --check on three families; decode batch 1/8/64 under --cuda-graph for every expert variant (Mixtral-8x7B's
#     layer; DeepSeek-V3's first MoE layer alone, --first-layer 3 --layers 1) and batch 256, 30 iterations each (P1,
#     P3, P4); a graph run that fails is rerun with the same configuration eagerly (NAME-eager-rerun, said in
#     steps.log; after 3 graph-only failures the rest run eagerly at once); then compute-sanitizer memcheck and
#     racecheck over the [sanitize] tests (small shapes; findings in sanitizer.txt); one eager run per decode shape;
#     the DeepSeek-V3 whole step (3 dense + 1 MoE layers) beside its MoE layer; prefill 4096 (grouped, loop, tiled);
#     cold L2; the PyTorch peers; the split-context attention if time is left;
#  6. the summary (scripts/device_summary.py: medians, >= 30 iterations per verdict) and the pack: summary.md,
#     steps.log, machine.txt, devices.json, torch_peer.json, sanitizer.txt, build-error.txt and runs.tar.gz (the
#     reports, run configs and step logs): at most 8 files come back.
# Usage: scripts/device-check.sh [OUT_DIR]   (default: $OUT when set, else results/device-<UTC date>/)
# Every step has its own timeout and the whole script a deadline (CHECK_BUDGET_S, default 480 s): a step that would
# not fit is skipped and logged. A failing step is logged (steps.log, logs/<step>.log) and the script goes on.
# Without a GPU (nvidia-smi lists none) every GPU step is skipped with the reason, so the control flow can be tried
# on any machine; tests/device_check_check.py does so with stand-in cmake, nvidia-smi and binaries.
# Dependencies on a machine without a package registry: .device-deps/ (made by scripts/device-bundle.sh on a Debian
# machine, ~6 MB) is unpacked into $BUILD/deps and configure gets -DMOEBENCH_DEPS_PREFIX=$BUILD/deps/usr (the bundle
# first and only; fmt compiled in once, OpenBLAS static, so the binary needs no carried shared library: ldd shows it).
# NCCL: NCCL_HOME, next to the toolkit, or Python's nvidia-nccl wheel (cmake/MoebenchNccl.cmake; its lib folder goes
# on LD_LIBRARY_PATH), else the build goes without it (MOEBENCH_HAS_NCCL=0, said in the probe).
# Environment: BUILD_DIR (default build-device), JOBS, CHECK_BUDGET_S, DEVICE_DEPS (the bundle folder, default
# .device-deps), DEVICE_CHECK_SYSTEM_PREFIXES (where the packages are looked for without a bundle, default
# "/usr /usr/local").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
OUT_DIR=${1:-${OUT:-results/device-$(date -u +%Y%m%d-%H%M%S)}}
mkdir -p "$OUT_DIR/reports" "$OUT_DIR/configs" "$OUT_DIR/logs"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
BUILD=${BUILD_DIR:-build-device}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
DEPS=${DEVICE_DEPS:-.device-deps}
case "$DEPS" in /*) ;; *) DEPS="$ROOT/$DEPS" ;; esac
export DEVICE_DEPS="$DEPS"  # for scripts/device-bundle.sh --unpack
JOBS=${JOBS:-$(nproc)}
BIN="$BUILD/moebench"
TESTS="$BUILD/tests/moebench_tests_cuda"
STEPS="$OUT_DIR/steps.log"
: >"$STEPS"
START=$(date +%s)
BUDGET_S=${CHECK_BUDGET_S:-480}
SUMMARY_RESERVE_S=20
LAST_RC=0

log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$STEPS"; }

# step NAME TIMEOUT_S CMD...: runs CMD with a timeout (capped by what is left of the budget), output to
# logs/NAME.log, status to steps.log, the exit status in LAST_RC (-1: skipped for time). Never stops the script.
step() {
    local name=$1 limit=$2
    shift 2
    local left=$(( START + BUDGET_S - SUMMARY_RESERVE_S - $(date +%s) ))
    if [ "$left" -lt 10 ]; then
        log "SKIP  $name: no time left in the ${BUDGET_S}s budget"
        LAST_RC=-1
        return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    log "start $name (limit ${limit}s)"
    local t0=$(date +%s)
    timeout --kill-after=5 "$limit" "$@" >"$OUT_DIR/logs/$name.log" 2>&1
    local rc=$?
    LAST_RC=$rc
    local dt=$(( $(date +%s) - t0 ))
    if [ $rc -eq 0 ]; then
        log "ok    $name (${dt}s)"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        log "FAIL  $name: timed out after ${limit}s (log: logs/$name.log)"
        tail -n 5 "$OUT_DIR/logs/$name.log" | sed 's/^/        /' | tee -a "$STEPS"
    elif [ $rc -eq 77 ]; then
        log "SKIP  $name (rc 77; log: logs/$name.log)"
        tail -n 3 "$OUT_DIR/logs/$name.log" | sed 's/^/        /' | tee -a "$STEPS"
    else
        log "FAIL  $name: exit $rc (${dt}s; last lines below; log: logs/$name.log)"
        tail -n 8 "$OUT_DIR/logs/$name.log" | sed 's/^/        /' | tee -a "$STEPS"
    fi
    return 0
}

# finish EXIT_CODE: the summary, the pack (at most 8 files come back: the reports, run configs and step logs go into
# one tarball beside summary.md, steps.log, machine.txt, devices.json, torch_peer.json, sanitizer.txt,
# build-error.txt), then exit.
finish() {
    SUMMARY_RESERVE_S=0
    BUDGET_S=$(( BUDGET_S + 30 ))  # the summary always runs
    step summary 30 python3 "$ROOT/scripts/device_summary.py" "$OUT_DIR"
    log "done in $(( $(date +%s) - START ))s; results in $OUT_DIR"
    { echo; echo '```'; cat "$STEPS"; echo '```'; } >>"$OUT_DIR/summary.md" 2>/dev/null || true
    cat "$OUT_DIR/logs/summary.log" 2>/dev/null || true
    if tar -C "$OUT_DIR" -czf "$OUT_DIR/runs.tar.gz" reports configs logs 2>/dev/null; then
        rm -rf "$OUT_DIR/reports" "$OUT_DIR/configs" "$OUT_DIR/logs"
    fi
    ls -la "$OUT_DIR"
    exit "$1"
}

# stop WHY...: the script cannot do anything useful here; every line goes to the terminal, steps.log and summary.md.
stop() {
    local line
    for line in "$@"; do log "STOP  $line"; done
    { echo "# moebench device check: STOPPED before the build"; echo; for line in "$@"; do echo "$line"; echo; done; } \
        >"$OUT_DIR/summary.md"
    exit 2
}

log "output: $OUT_DIR"

# 0. The dependency bundle, before anything else: a missing one would spend the loan on a configure that stops.
BUNDLE_LINE="Run on the development machine (Debian 12, apt): scripts/device-bundle.sh   then call the device tool with carry [\".device-deps\"] and command scripts/device-check.sh"
DEPS_ARGS=()
if [ -f "$DEPS/MANIFEST" ]; then
    step bundle-unpack 60 "$ROOT/scripts/device-bundle.sh" --unpack "$BUILD/deps"
    if [ "$LAST_RC" -ne 0 ] || [ ! -d "$BUILD/deps/usr/include" ]; then
        stop "the dependency bundle $DEPS/ does not unpack: $(tail -n 1 "$OUT_DIR/logs/bundle-unpack.log")" \
             "$BUNDLE_LINE"
    fi
    DEPS_ARGS=(-DMOEBENCH_DEPS_PREFIX="$BUILD/deps/usr")
    log "bundle: $DEPS/ ($(cut -d' ' -f1,2 "$DEPS/MANIFEST" | tr '\n' ' ')) unpacked into $BUILD/deps"
else
    # No bundle: the machine's own packages, if it has every one (a development machine with a GPU).
    missing=()
    for need in "CLI11:include/CLI/CLI.hpp" "nlohmann-json:include/nlohmann/json.hpp" "fmt:include/fmt/format.h" \
                "Catch2:include/catch2/catch.hpp" "OpenBLAS:include/cblas.h include/*/cblas.h include/*/*/cblas.h"; do
        found=""
        for prefix in ${DEVICE_CHECK_SYSTEM_PREFIXES:-/usr /usr/local}; do
            for rel in ${need#*:}; do
                for f in "$prefix"/$rel; do [ -e "$f" ] && found=1; done
            done
        done
        [ -n "$found" ] || missing+=("${need%%:*}")
    done
    if ((${#missing[@]})); then
        stop "no dependency bundle ($DEPS/ was not carried) and this machine lacks ${missing[*]}: configure would stop at ${missing[0]}." \
             "$BUNDLE_LINE"
    fi
    log "bundle: none; the machine has CLI11, nlohmann-json, fmt, Catch2 and OpenBLAS"
fi

# 1. The machine: OS, compiler, driver, card (machine.txt; the summary heads with them), then nvidia-smi in full.
GPU_LIST=$(timeout 20 nvidia-smi -L 2>&1)
if [ $? -eq 0 ] && grep -q '^GPU ' <<<"$GPU_LIST"; then
    HAVE_GPU=1
    CARD=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    NO_GPU=""
else
    HAVE_GPU=""
    CARD="none"
    NO_GPU="no GPU here (nvidia-smi -L: $(head -n 1 <<<"$GPU_LIST"))"
fi
CUDA_BIN=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
SANITIZER=$(command -v compute-sanitizer 2>/dev/null || { [ -x "$CUDA_BIN/compute-sanitizer" ] && echo "$CUDA_BIN/compute-sanitizer"; })
{
    echo "os: $( (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") || echo unknown); $(uname -srm)"
    echo "compiler: $(c++ --version 2>/dev/null | head -n 1 || echo 'no c++'); nvcc $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'not on PATH')"
    echo "driver: $(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)"
    echo "card: $CARD"
    echo "memory: $(timeout 20 nvidia-smi --query-gpu=memory.total --format=csv,noheader 2>/dev/null | head -n 1 || true)"
    echo "cmake: $(cmake --version 2>/dev/null | head -n 1)  ninja: $(command -v ninja || echo none)  nproc: $(nproc)"
    echo "tools: compute-sanitizer=${SANITIZER:-none} ncu=$(command -v ncu || echo none)"
    echo "nccl: NCCL_HOME=${NCCL_HOME:-unset}; toolkit: $(ls "$(dirname "$CUDA_BIN")/include/nccl.h" 2>/dev/null || echo "no nccl.h")"
    echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)"
    echo "git: $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) uncommitted files"
} >"$OUT_DIR/machine.txt" 2>&1
sed 's/^/        /' "$OUT_DIR/machine.txt" | tee -a "$STEPS"
if [ -n "$HAVE_GPU" ]; then
    log "card: $CARD"
    step machine 30 bash -c 'nvidia-smi; echo; nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.max.sm,clocks.sm --format=csv'
    cat "$OUT_DIR/logs/machine.log"
else
    log "SKIP  every GPU step: $NO_GPU"
fi

# 2. The build (sm_90 only, all cores; the shared dev build dir is not touched). Ninja when there (the device has it
# from Python packages; make may be absent), keeping on past a failed object (-k 0) so that moebench is built even if
# a test file is not. MPI off: one GPU, and an MPI that came with mpi4py would make a build unlike the one tested here.
GEN_ARGS=()
KEEP_GOING=()
if command -v ninja >/dev/null 2>&1 && { [ ! -f "$BUILD/CMakeCache.txt" ] || grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD/CMakeCache.txt"; }; then
    GEN_ARGS=(-G Ninja)  # not over a tree configured with another generator (cmake would refuse)
    KEEP_GOING=(-- -k 0)
fi
# build_error WHAT LOG PATTERN: build-error.txt = what failed, the matching lines (CMake's errors, the compiler's),
# then the log's tail.
build_error() {
    { echo "$1 (log: logs/$(basename "$2"))"; echo; echo "---- errors ----"
      grep -E -A6 "$3" "$2" 2>/dev/null | head -n 80; echo; echo "---- last 30 lines ----"; tail -n 30 "$2" 2>/dev/null
    } >"$OUT_DIR/build-error.txt"
    sed 's/^/        /' "$OUT_DIR/build-error.txt" | tail -n 40 | tee -a "$STEPS"
}
step build-configure 120 cmake -S . -B "$BUILD" "${GEN_ARGS[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMOEBENCH_CUDA=ON -DMOEBENCH_TESTS=ON -DMOEBENCH_MPI=OFF "${DEPS_ARGS[@]}"
if [ "$LAST_RC" -ne 0 ]; then
    build_error "configure failed (exit $LAST_RC)" "$OUT_DIR/logs/build-configure.log" "CMake Error|Could not|not found|error"
    finish 1
fi
grep -E 'moebench:|NCCL' "$OUT_DIR/logs/build-configure.log" | tee -a "$STEPS"
step build 300 cmake --build "$BUILD" -j"$JOBS" --target moebench moebench_tests_cuda "${KEEP_GOING[@]}"
if [ "$LAST_RC" -ne 0 ]; then
    build_error "build failed (exit $LAST_RC)$([ -x "$BIN" ] && echo '; moebench was built, the runs go on')" \
                "$OUT_DIR/logs/build.log" "error|FAILED:|Error [0-9]|CMake Error"
fi
echo "---- build log (last 25 lines) ----"
tail -n 25 "$OUT_DIR/logs/build.log" 2>/dev/null || echo "(no build log)"
echo "-----------------------------------"
if [ ! -x "$BIN" ]; then
    log "moebench was not built: nothing can run (build-error.txt)"
    [ -f "$OUT_DIR/build-error.txt" ] || build_error "moebench is missing after the build" "$OUT_DIR/logs/build.log" "error|FAILED:"
    finish 1
fi
# NCCL from Python's wheel is not on the loader's path (the build-tree RUNPATH has it; this covers a copied binary).
NCCL_LIB=$(sed -n 's/^NCCL_LIBRARY:FILEPATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
if [ -n "$NCCL_LIB" ] && [ -f "$NCCL_LIB" ]; then
    export LD_LIBRARY_PATH="$(dirname "$NCCL_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# What the binaries load, and from where (a "not found" here explains any failure below).
for b in "$BIN" "$TESTS"; do
    [ -x "$b" ] && { echo "== $b"; ldd "$b"; }
done >"$OUT_DIR/logs/ldd.log" 2>&1
grep -E 'not found|nccl|cublas|openblas|fmt|gfortran' "$OUT_DIR/logs/ldd.log" | sort -u | sed 's/^/        ldd: /' | tee -a "$STEPS"

# gpu_step NAME TIMEOUT_S CMD...: a step that needs the GPU (skipped with the reason without one).
gpu_step() {
    if [ -z "$HAVE_GPU" ]; then
        log "SKIP  $1: $NO_GPU"
        LAST_RC=-1
        return 0
    fi
    step "$@"
}

# 3. The card and its measured ceilings (copy / read bandwidth, dense bf16 GEMM rate): the floors of the verdicts.
gpu_step devices 60 "$BIN" devices --measure --format json --out "$OUT_DIR/devices.json"

# 4. Correctness: the GPU tests, then the conformance list on the GPU (compute-sanitizer comes after the graph runs).
if [ -x "$TESTS" ]; then
    gpu_step gpu-tests 100 "$TESTS" "~[conformance]" --reporter compact --durations yes
    gpu_step conformance 120 "$TESTS" "[conformance]" --reporter compact
else
    log "SKIP  gpu-tests, conformance, sanitize-*: $TESTS was not built (build-error.txt)"
fi
# sanitize: compute-sanitizer memcheck and racecheck over the [sanitize] tests (small shapes), findings to sanitizer.txt
# (by the summary). They name the kernel of an asynchronous fault, which a run reports only at its step's final sync.
sanitize() {
    [ -x "$TESTS" ] || return 0
    if [ -z "$SANITIZER" ]; then
        log "SKIP  sanitize-memcheck, sanitize-racecheck: compute-sanitizer is not on this machine"
        return 0
    fi
    local tool
    for tool in memcheck racecheck; do
        gpu_step "sanitize-$tool" 45 "$SANITIZER" --tool "$tool" --error-exitcode 97 --print-limit 100 \
            "$TESTS" "[sanitize]" --reporter compact
    done
}

# run_cfg NAME TIMEOUT_S JSON [extra moebench run flags...]: writes the run config and runs it; report ->
# reports/NAME.json (flags: --config, --out, --check; src/cli/run.cpp). A run under "cuda_graph": true that fails is
# rerun eagerly as NAME-eager-rerun and steps.log says so; after GRAPH_FAIL_LIMIT graph failures whose eager rerun
# passed, the graph runs left go eagerly at once (the failure is the capture's, not the configuration's).
GRAPH_FAILS=0
GRAPH_FAIL_LIMIT=3
run_cfg() {
    local name=$1 limit=$2 cfg=$3
    shift 3
    if [ -z "$HAVE_GPU" ]; then
        echo "$cfg" >"$OUT_DIR/configs/$name.json"
        log "SKIP  run-$name: $NO_GPU"
        return 0
    fi
    local graph=""
    grep -q '"cuda_graph": true' <<<"$cfg" && graph=1
    if [ -n "$graph" ] && [ "$GRAPH_FAILS" -ge "$GRAPH_FAIL_LIMIT" ]; then
        echo "$cfg" >"$OUT_DIR/configs/$name.json"
        log "RERUN $name eagerly at once: $GRAPH_FAILS graph runs failed before it; its P4 is lost (report $name-eager-rerun)"
        run_eager "$name" "$limit" "$cfg" "$@"
        return 0
    fi
    echo "$cfg" >"$OUT_DIR/configs/$name.json"
    step "run-$name" "$limit" "$BIN" run --config "$OUT_DIR/configs/$name.json" --out "$OUT_DIR/reports/$name.json" "$@"
    if [ -n "$graph" ] && [ "$LAST_RC" -ne 0 ] && [ "$LAST_RC" -ne -1 ]; then
        log "RERUN $name eagerly: the graph run failed (exit $LAST_RC: $(grep -m1 -iE 'error|graph' "$OUT_DIR/logs/run-$name.log" | cut -c1-200)); its P4 is lost, its other targets come from $name-eager-rerun"
        run_eager "$name" "$limit" "$cfg" "$@"
        # Only a failure the eager run does not share is the graph's.
        [ "$LAST_RC" -eq 0 ] && GRAPH_FAILS=$((GRAPH_FAILS + 1))
    fi
}
run_eager() {
    local name=$1 limit=$2 cfg=$3
    shift 3
    local eager="${cfg//\"cuda_graph\": true/\"cuda_graph\": false}"
    echo "$eager" >"$OUT_DIR/configs/$name-eager-rerun.json"
    step "run-$name-eager-rerun" "$limit" "$BIN" run --config "$OUT_DIR/configs/$name-eager-rerun.json" \
        --out "$OUT_DIR/reports/$name-eager-rerun.json" "$@"
}
# decode_cfg MODEL_FIELDS BATCH EXTRA: a decode run config, 30 measured iterations.
decode_cfg() {
    echo "{$1, \"backend\": \"cuda\", \"mode\": \"decode\", \"batch\": $2, \"context\": 1024$3, \"warmup\": 2, \"iters\": 30}"
}
MIXTRAL='"model": "mixtral-8x7b", "layers": 1'
DSV3_MOE='"model": "deepseek-v3", "first_layer": 3, "layers": 1'  # layers 0-2 are dense: its first MoE layer alone
DSV3_STEP='"model": "deepseek-v3", "layers": 4'                   # the whole step up to it (3 dense + 1 MoE)

# 5. --check first (correctness before speed): softmax top-k (Mixtral), sigmoid group-limited + shared expert
#    (DeepSeek-V3 through its 3 dense layers; --check copies only the routed experts), MLA attention (DeepSeek-V2-Lite;
#    layer 0 dense). Batch 16: the gemv kernel (auto at these shapes).
run_cfg check-mixtral 60 '{"model": "mixtral-8x7b", "backend": "cuda", "mode": "decode", "batch": 16, "context": 512, "layers": 1, "warmup": 1, "iters": 3}' --check
run_cfg check-deepseek-v3 90 '{"model": "deepseek-v3", "backend": "cuda", "mode": "decode", "batch": 16, "context": 512, "layers": 4, "warmup": 1, "iters": 3}' --check
run_cfg check-deepseek-v2-lite 60 '{"model": "deepseek-v2-lite", "backend": "cuda", "mode": "decode", "batch": 16, "context": 512, "layers": 2, "warmup": 1, "iters": 3}' --check

# 6. Decode under --cuda-graph, every expert variant, 30 iterations: P1 (batch 1-64), P3 (batch 256), P4 (all).
for batch in 1 8 64; do
    for variant in gemv grouped loop; do
        run_cfg "decode-mixtral-8x7b-b$batch-$variant" 40 "$(decode_cfg "$MIXTRAL" $batch ", \"expert_gemm\": \"$variant\", \"cuda_graph\": true")"
        run_cfg "decode-deepseek-v3-moe-b$batch-$variant" 40 "$(decode_cfg "$DSV3_MOE" $batch ", \"expert_gemm\": \"$variant\", \"cuda_graph\": true")"
    done
done
run_cfg decode-mixtral-8x7b-b256-auto 40 "$(decode_cfg "$MIXTRAL" 256 ', "cuda_graph": true')"
run_cfg decode-deepseek-v3-moe-b256-auto 40 "$(decode_cfg "$DSV3_MOE" 256 ', "cuda_graph": true')"
sanitize
# One eager run per decode shape (auto): the graph's gain, and P1 without a graph.
for batch in 1 8 64 256; do
    run_cfg "decode-mixtral-8x7b-b$batch-eager" 40 "$(decode_cfg "$MIXTRAL" $batch "")"
    run_cfg "decode-deepseek-v3-moe-b$batch-eager" 40 "$(decode_cfg "$DSV3_MOE" $batch "")"
done
# The DeepSeek-V3 whole step beside its MoE layer (information: P1 is judged on the MoE layer alone).
for batch in 1 8 64; do
    run_cfg "decode-deepseek-v3-step-b$batch-auto" 60 "$(decode_cfg "$DSV3_STEP" $batch ', "cuda_graph": true')"
done

# 7. Prefill 4096 with the cuBLAS variants and the tensor-core kernel; cold L2 at batch 64.
for model in mixtral-8x7b deepseek-v3; do
    fields=$MIXTRAL name=$model
    [ "$model" = deepseek-v3 ] && fields=$DSV3_MOE name=deepseek-v3-moe
    for variant in grouped loop tiled; do
        run_cfg "prefill-$name-4096-$variant" 60 "{$fields, \"backend\": \"cuda\", \"mode\": \"prefill\", \"batch\": 1, \"seq_len\": 4096, \"expert_gemm\": \"$variant\", \"warmup\": 1, \"iters\": 30}"
    done
    run_cfg "decode-$name-b64-coldl2" 40 "$(decode_cfg "$fields" 64 ', "cold_l2": true')"
done

# 8. PyTorch peers on the same shapes and routing semantics (skips cleanly without torch or a GPU).
gpu_step torch-peer 90 python3 bench/torch_moe_peer.py --iters 30 --tokens 1,8,64,256,4096 --out "$OUT_DIR/torch_peer.json"

# 9. If time is left: the split-context attention (CUDA cores), for the tensor-core kernels' gain in the summary:
#    DeepSeek-V3 decode (latent kernel), the prefills (flash; DeepSeek: MLA absorbed, not expanded).
run_cfg "decode-deepseek-v3-moe-b64-gemv-attnsplit" 40 "$(decode_cfg "$DSV3_MOE" 64 ', "expert_gemm": "gemv", "attention_kernel": "split", "cuda_graph": true')"
for model in mixtral-8x7b deepseek-v3; do
    fields=$MIXTRAL name=$model
    [ "$model" = deepseek-v3 ] && fields=$DSV3_MOE name=deepseek-v3-moe
    run_cfg "prefill-$name-4096-grouped-attnsplit" 60 "{$fields, \"backend\": \"cuda\", \"mode\": \"prefill\", \"batch\": 1, \"seq_len\": 4096, \"expert_gemm\": \"grouped\", \"attention_kernel\": \"split\", \"warmup\": 1, \"iters\": 30}"
done

finish 0
