#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One-call GPU check (one H200, < 7 minutes including the build): probe, build for sm_90, GPU tests, devices --measure,
# --check on three families, decode 1/8/64 under --cuda-graph with every expert variant (gemv, grouped, loop) and
# batch 256, prefill 4096 (grouped, loop, tiled), cold L2, the PyTorch peers, DeepSeek-V3 decode and the prefills
# again with the split-context attention if time is left, a summary with the ratios of issue 17;
# the reports, configs and logs packed into runs.tar.gz (at most 8 files come back).
# Usage: scripts/device-check.sh [OUT_DIR]   (default: $OUT when set, else results/device-<UTC date>/)
# Every step has its own timeout and the whole script a deadline (CHECK_BUDGET_S, default 420 s): a step that would
# not fit is skipped and logged. A failing step is logged (steps.log, logs/<step>.log) and the script goes on.
# Dependencies on a machine without a package registry: carry .device-deps/ (made by scripts/device-bundle.sh on a
# Debian machine, ~6 MB). When it is there, it is unpacked into $BUILD/deps and configure gets
# -DMOEBENCH_DEPS_PREFIX=$BUILD/deps/usr (the bundle first and only; fmt header-only, OpenBLAS static, so the binary
# needs no carried shared library: the probe's ldd shows it). Without it the system's packages are used.
# NCCL: NCCL_HOME, next to the toolkit, or Python's nvidia-nccl wheel (found by cmake/MoebenchNccl.cmake; its lib
# folder goes on LD_LIBRARY_PATH), else the build goes without it (MOEBENCH_HAS_NCCL=0, said in the probe).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT_DIR=${1:-${OUT:-results/device-$(date -u +%Y%m%d-%H%M%S)}}
mkdir -p "$OUT_DIR/reports" "$OUT_DIR/configs" "$OUT_DIR/logs"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
BUILD=${BUILD_DIR:-build-device}
JOBS=${JOBS:-$(nproc)}
BIN="$ROOT/$BUILD/moebench"
STEPS="$OUT_DIR/steps.log"
: >"$STEPS"
START=$(date +%s)
BUDGET_S=${CHECK_BUDGET_S:-420}
SUMMARY_RESERVE_S=20

log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$STEPS"; }

# step NAME TIMEOUT_S CMD...: runs CMD with a timeout (capped by what is left of the budget), output to
# logs/NAME.log, status to steps.log. Never stops the script.
step() {
    local name=$1 limit=$2
    shift 2
    local left=$(( START + BUDGET_S - SUMMARY_RESERVE_S - $(date +%s) ))
    if [ "$left" -lt 10 ]; then
        log "SKIP  $name: no time left in the ${BUDGET_S}s budget"
        return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    log "start $name (limit ${limit}s)"
    local t0=$(date +%s)
    timeout --kill-after=5 "$limit" "$@" >"$OUT_DIR/logs/$name.log" 2>&1
    local rc=$?
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

# run_cfg NAME TIMEOUT_S JSON [extra moebench run flags...]: writes the run config and runs it; report ->
# reports/NAME.json. Flags used: --config, --out, --check (src/cli/run.cpp).
run_cfg() {
    local name=$1 limit=$2 cfg=$3
    shift 3
    echo "$cfg" >"$OUT_DIR/configs/$name.json"
    if [ ! -x "$BIN" ]; then
        log "SKIP  run-$name: $BIN was not built"
        return 0
    fi
    step "run-$name" "$limit" "$BIN" run --config "$OUT_DIR/configs/$name.json" --out "$OUT_DIR/reports/$name.json" "$@"
}

# 0. Probe (~10 s): GPU, toolkit, the dependency bundle, NCCL; then the machine in full (nvidia-smi to the terminal).
log "output: $OUT_DIR"
PROBE='
echo "gpu:      $(nvidia-smi -L 2>&1 | head -n 4 | tr "\n" " ")"
echo "toolkit:  $(command -v nvcc || echo "nvcc not on PATH") $(nvcc --version 2>/dev/null | grep -o "release [0-9.]*")"
echo "cmake:    $(cmake --version 2>/dev/null | head -n 1)  ninja: $(command -v ninja || echo none)  nproc: $(nproc)"
if [ -f .device-deps/MANIFEST ]; then
    echo "bundle:   .device-deps/ $(du -sh .device-deps | cut -f1): $(cut -d" " -f1,2 .device-deps/MANIFEST | tr "\n" " ")"
else
    echo "bundle:   none (.device-deps/ not carried): the system must have CLI11, nlohmann-json, fmt, Catch2, OpenBLAS"
fi
for p in "/usr/include/CLI/CLI.hpp" "/usr/include/nlohmann/json.hpp" "/usr/include/fmt/format.h" "/usr/include/catch2/catch.hpp"; do
    [ -e "$p" ] && echo "system:   $p is present"
done
echo "nccl:     NCCL_HOME=${NCCL_HOME:-unset}; toolkit: $(ls $(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x)")")/include/nccl.h 2>/dev/null || echo "no nccl.h")"
echo "nccl:     python: $(timeout 8 python3 -c "import nvidia.nccl as m, os; d = list(m.__path__)[0]; print(d, sorted(os.listdir(os.path.join(d, \"lib\"))))" 2>&1 | tail -n 1)"
echo "tools:    $(for t in compute-sanitizer ncu nsys ldd; do printf "%s=%s " $t "$(command -v $t >/dev/null && echo yes || echo no)"; done)"
true
'
step probe 20 bash -c "$PROBE"
cat "$OUT_DIR/logs/probe.log"
step machine 30 bash -c 'nvidia-smi; echo; nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.max.sm,clocks.sm --format=csv; echo; nvcc --version | tail -n 2; cmake --version | head -n 1; echo "nproc: $(nproc)"'
cat "$OUT_DIR/logs/machine.log"
{
    echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname)"
    echo "git: $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) uncommitted files"
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || echo "nvidia-smi: not available"
    nvcc --version 2>/dev/null | tail -n 2 || echo "nvcc: not on PATH"
    cat "$OUT_DIR/logs/probe.log" 2>/dev/null
} >"$OUT_DIR/machine.txt" 2>&1

# 1. Build (sm_90 only, all cores; the shared dev build dir is not touched). The log tail goes to the terminal.
DEPS_ARGS=()
if [ -f .device-deps/MANIFEST ]; then
    step bundle-unpack 30 scripts/device-bundle.sh --unpack "$BUILD/deps"
    [ -d "$BUILD/deps/usr/include" ] && DEPS_ARGS=(-DMOEBENCH_DEPS_PREFIX="$ROOT/$BUILD/deps/usr")
fi
# Ninja when there (the device has it from Python packages; make may be absent). MPI off: one GPU, and an MPI that
# came with mpi4py would make a build unlike the one tested here.
GEN_ARGS=()
if command -v ninja >/dev/null 2>&1 && { [ ! -f "$BUILD/CMakeCache.txt" ] || grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD/CMakeCache.txt"; }; then
    GEN_ARGS=(-G Ninja)  # not over a tree configured with another generator (cmake would refuse)
fi
step build-configure 90 cmake -S . -B "$BUILD" "${GEN_ARGS[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMOEBENCH_CUDA=ON -DMOEBENCH_TESTS=ON -DMOEBENCH_MPI=OFF "${DEPS_ARGS[@]}"
grep -E 'moebench:|NCCL' "$OUT_DIR/logs/build-configure.log" | tee -a "$STEPS"
step build 300 cmake --build "$BUILD" -j"$JOBS" --target moebench moebench_tests_cuda
# NCCL from Python's wheel is not on the loader's path (the build-tree RUNPATH has it; this covers a copied binary).
NCCL_LIB=$(sed -n 's/^NCCL_LIBRARY:FILEPATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
if [ -n "$NCCL_LIB" ] && [ -f "$NCCL_LIB" ]; then
    export LD_LIBRARY_PATH="$(dirname "$NCCL_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# What the binaries load, and from where (a "not found" here explains any failure below).
for b in "$BIN" "$ROOT/$BUILD/tests/moebench_tests_cuda"; do
    [ -x "$b" ] && { echo "== $b"; ldd "$b"; }
done >"$OUT_DIR/logs/ldd.log" 2>&1
grep -E 'not found|nccl|cublas|openblas|fmt|gfortran' "$OUT_DIR/logs/ldd.log" | sort -u | sed 's/^/        ldd: /' | tee -a "$STEPS"
echo "---- build log (last 25 lines) ----"
tail -n 25 "$OUT_DIR/logs/build.log" 2>/dev/null || echo "(no build log)"
echo "-----------------------------------"
if [ ! -x "$BIN" ]; then
    log "moebench was not built: the runs below are skipped (see logs/build-configure.log, logs/build.log)"
fi

# 2. GPU tests (exit 77 = skipped, with the reason in the log).
if [ -x "$ROOT/$BUILD/tests/moebench_tests_cuda" ]; then
    step gpu-tests 100 "$ROOT/$BUILD/tests/moebench_tests_cuda" --reporter compact --durations yes
else
    log "SKIP  gpu-tests: $BUILD/tests/moebench_tests_cuda was not built"
fi

# 3. Devices and measured ceilings (copy / read bandwidth, dense bf16 GEMM rate): the floors of the summary's ratios.
if [ -x "$BIN" ]; then
    step devices 60 "$BIN" devices --measure --format json --out "$OUT_DIR/devices.json"
fi

# 4. --check first (correctness before speed): softmax top-k (Mixtral), sigmoid group-limited + shared expert
#    (DeepSeek-V3: layers 0-2 are dense, so 4 layers reach the first MoE layer; --check copies only the routed experts),
#    MLA attention (DeepSeek-V2-Lite; layer 0 dense). Batch 16: the gemv kernel (auto at these shapes). The cuBLAS
#    variants are checked against the same host reference by the GPU tests (a DeepSeek --check costs ~20 s).
run_cfg check-mixtral 60 '{"model": "mixtral-8x7b", "backend": "cuda", "mode": "decode", "batch": 16, "context": 512, "layers": 1, "warmup": 1, "iters": 3}' --check
run_cfg check-deepseek-v3 90 '{"model": "deepseek-v3", "backend": "cuda", "mode": "decode", "batch": 16, "context": 512, "layers": 4, "warmup": 1, "iters": 3}' --check
run_cfg check-deepseek-v2-lite 60 '{"model": "deepseek-v2-lite", "backend": "cuda", "mode": "decode", "batch": 16, "context": 512, "layers": 2, "warmup": 1, "iters": 3}' --check

# 5. Decode 1/8/64 under --cuda-graph with every expert variant, then batch 256 (auto) for the router/data-movement
#    share; prefill 4096 with both cuBLAS variants; cold L2 at batch 64. Ratios: see the summary.
for model in mixtral-8x7b deepseek-v3; do
    layers=1
    [ "$model" = deepseek-v3 ] && layers=4
    for batch in 1 8 64; do
        for variant in gemv grouped loop; do
            run_cfg "decode-$model-b$batch-$variant" 40 "{\"model\": \"$model\", \"backend\": \"cuda\", \"mode\": \"decode\", \"batch\": $batch, \"context\": 1024, \"layers\": $layers, \"expert_gemm\": \"$variant\", \"cuda_graph\": true, \"warmup\": 2, \"iters\": 10}"
        done
    done
    run_cfg "decode-$model-b256-auto" 40 "{\"model\": \"$model\", \"backend\": \"cuda\", \"mode\": \"decode\", \"batch\": 256, \"context\": 1024, \"layers\": $layers, \"cuda_graph\": true, \"warmup\": 2, \"iters\": 10}"
done
for model in mixtral-8x7b deepseek-v3; do
    layers=1
    [ "$model" = deepseek-v3 ] && layers=4
    for variant in grouped loop tiled; do
        run_cfg "prefill-$model-4096-$variant" 60 "{\"model\": \"$model\", \"backend\": \"cuda\", \"mode\": \"prefill\", \"batch\": 1, \"seq_len\": 4096, \"layers\": $layers, \"expert_gemm\": \"$variant\", \"warmup\": 1, \"iters\": 5}"
    done
    run_cfg "decode-$model-b64-coldl2" 40 "{\"model\": \"$model\", \"backend\": \"cuda\", \"mode\": \"decode\", \"batch\": 64, \"context\": 1024, \"layers\": $layers, \"cold_l2\": true, \"warmup\": 3, \"iters\": 10}"
done

# 6. PyTorch peers on the same shapes and routing semantics (skips cleanly without torch or a GPU).
step torch-peer 90 python3 bench/torch_moe_peer.py --iters 10 --tokens 1,8,64,256,4096 --out "$OUT_DIR/torch_peer.json"

# 6b. If time is left: runs again with the split-context attention (CUDA cores), for the tensor-core kernels' gain
#     in the summary: DeepSeek-V3 decode (latent kernel), the prefills (flash; DeepSeek: MLA absorbed, not expanded).
run_cfg "decode-deepseek-v3-b64-gemv-attnsplit" 40 '{"model": "deepseek-v3", "backend": "cuda", "mode": "decode", "batch": 64, "context": 1024, "layers": 4, "expert_gemm": "gemv", "attention_kernel": "split", "cuda_graph": true, "warmup": 2, "iters": 10}'
for model in mixtral-8x7b deepseek-v3; do
    layers=1
    [ "$model" = deepseek-v3 ] && layers=4
    run_cfg "prefill-$model-4096-grouped-attnsplit" 60 "{\"model\": \"$model\", \"backend\": \"cuda\", \"mode\": \"prefill\", \"batch\": 1, \"seq_len\": 4096, \"layers\": $layers, \"expert_gemm\": \"grouped\", \"attention_kernel\": \"split\", \"warmup\": 1, \"iters\": 5}"
done

# 7. Summary table (always runs: its time is reserved in the budget).
SUMMARY_RESERVE_S=0
step summary 20 python3 scripts/device_summary.py "$OUT_DIR"

log "done in $(( $(date +%s) - START ))s; results in $OUT_DIR"
{ echo; echo '```'; cat "$STEPS"; echo '```'; } >>"$OUT_DIR/summary.md" 2>/dev/null || true
cat "$OUT_DIR/logs/summary.log" 2>/dev/null || true
# At most 8 files come back from the device machine: the reports, run configs and step logs go into one tarball beside
# summary.md, steps.log, machine.txt, devices.json and torch_peer.json.
if tar -C "$OUT_DIR" -czf "$OUT_DIR/runs.tar.gz" reports configs logs 2>/dev/null; then
    rm -rf "$OUT_DIR/reports" "$OUT_DIR/configs" "$OUT_DIR/logs"
fi
ls -la "$OUT_DIR"
exit 0
