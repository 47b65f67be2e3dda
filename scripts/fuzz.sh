#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/fuzz.sh [SECONDS] [TARGET...]: builds the libFuzzer targets (the top-level project with -DMOEBENCH_FUZZ=ON,
# clang, ASan + UBSan, into build-fuzz/) when needed and runs each (default: all) for SECONDS (default 60) with a 2 GB
# memory limit and a 10 s per-input timeout. Prints per target: executions, coverage (cov = edges, ft = features, from
# libFuzzer's final stats) and findings. Exit 1 when a target found a crash, leak, timeout or oversized allocation
# (reproducers in build-fuzz/findings/<target>/, logs in build-fuzz/logs/), 2 when the build failed. See
# docs/fuzzing.md.
#   FUZZ_KEEP_GOING=1   fork mode that carries on past findings (to see past a known bug; slower, for triage)
#   FUZZ_NICE=10        niceness of the build and the runs (the machine is shared)
#   FUZZ_JOBS=1         targets fuzzed side by side (each is one process: up to the number of cores)
#   FUZZ_WITH_REGRESSIONS=0   do not seed from tests/data/fuzz-regressions/<target>/ (default: seed, so fixes are re-checked)
#   FUZZ_BUILD_DIR=build-fuzz a build folder configured with -DMOEBENCH_FUZZ=ON (CI passes its sanitizer tree, which
#                       builds the targets beside the tests: scripts/ci-bundle-sanitize.sh); made when absent
#   CXX=clang++-14      compiler for the first configure (default clang++-14, else clang++)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${1:-60}
[[ $# -gt 0 ]] && shift
if ! [[ $seconds =~ ^[0-9]+$ ]] || [[ $seconds -lt 1 ]]; then
  echo "fuzz.sh: SECONDS must be a whole number >= 1 (got '$seconds'); usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
  exit 2
fi
build=${FUZZ_BUILD_DIR:-build-fuzz}
[[ $build == /* ]] || build=$root/$build
nice_n=${FUZZ_NICE:-10}
jobs_n=${FUZZ_JOBS:-1}
if ! [[ $jobs_n =~ ^[0-9]+$ ]] || [[ $jobs_n -lt 1 ]]; then
  echo "fuzz.sh: FUZZ_JOBS must be a whole number >= 1 (got '$jobs_n')" >&2
  exit 2
fi

# The target list lives in fuzz/CMakeLists.txt (and fuzz/readers.hpp).
mapfile -t all_targets < <(sed -n '/^set(MOEBENCH_FUZZ_TARGETS/,/)/p' fuzz/CMakeLists.txt |
                           sed 's/set(MOEBENCH_FUZZ_TARGETS//; s/)//' | tr ' ' '\n' | sed '/^$/d')
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  if ! printf '%s\n' "${all_targets[@]}" | grep -qx "$t"; then
    echo "fuzz.sh: unknown target '$t'; targets: ${all_targets[*]}" >&2
    exit 2
  fi
done

# ---- build (incremental) ----
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" 2>/dev/null; }
# A folder configured before fuzz/ joined the main project (cmake -S fuzz) is configured again, keeping its corpus
# and findings.
if [[ -f $build/CMakeCache.txt && $(realpath -m "$(cache_value CMAKE_HOME_DIRECTORY)") != $(realpath "$root") ]]; then
  echo "fuzz.sh: $build was configured from $(cache_value CMAKE_HOME_DIRECTORY); configuring it again from $root" >&2
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
if [[ ! -f $build/CMakeCache.txt ]]; then
  mkdir -p "$build"
  # -O1 -g with assertions: fast enough to fuzz, stacks that name the line.
  cxx=${CXX:-$(command -v clang++-14 || command -v clang++ || echo clang++)}  # Debian's clang-14 has no clang++
  if ! nice -n "$nice_n" cmake -S . -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DMOEBENCH_FUZZ=ON \
       -DMOEBENCH_SANITIZE=address,undefined -DMOEBENCH_TESTS=OFF -DMOEBENCH_CUDA=OFF -DMOEBENCH_MPI=OFF \
       -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >"$build/configure.log" 2>&1; then
    grep -E 'Error|error' -A3 "$build/configure.log" | head -20 >&2
    echo "fuzz.sh: configuring $build failed; full log: $build/configure.log" >&2
    exit 2
  fi
elif [[ $(cache_value MOEBENCH_FUZZ) != ON ]]; then
  echo "fuzz.sh: $build is not configured with -DMOEBENCH_FUZZ=ON; use another FUZZ_BUILD_DIR" >&2
  exit 2
fi
if ! nice -n "$nice_n" cmake --build "$build" -j"${FUZZ_BUILD_JOBS:-2}" --target moebench_fuzz_all >"$build/build.log" 2>&1; then
  grep -E 'error|Error' "$build/build.log" | head -20 >&2
  echo "fuzz.sh: the fuzz build failed; full log: $build/build.log" >&2
  exit 2
fi

# ---- seeds: in place where they are plain files, generated where they come from moebench's writers ----
rm -rf "$build/seeds"
"$build/fuzz_make_seeds" "$root" "$build/seeds"
seeds_for() {
  case $1 in
    model_json) echo configs/models tests/data/models ;;
    hf_config) echo tests/data/hf-configs ;;
    hardware) echo configs/hardware ;;
    run_config) echo configs/runs ;;
    sweep_config) echo configs/sweeps configs/runs ;;
    routing_spec | trace_text | npy) echo "fuzz/seeds/$1" ;;
    *) echo "$build/seeds/$1" ;;
  esac
  # Past findings seed their target, so a fix that regresses stops it at once (an unfixed one would stop it at its
  # first input: FUZZ_WITH_REGRESSIONS=0 then lets the rest be explored).
  [[ ${FUZZ_WITH_REGRESSIONS:-1} == 1 && -d tests/data/fuzz-regressions/$1 ]] && echo "tests/data/fuzz-regressions/$1"
  return 0
}
dict_for() {
  case $1 in
    routing_spec) echo fuzz/dicts/routing.dict ;;
    safetensors | trace_safetensors) echo fuzz/dicts/safetensors.dict ;;
    trace_text | trace_jsonl) echo fuzz/dicts/trace_text.dict ;;
    *) echo fuzz/dicts/json.dict ;;
  esac
}

# ---- run ----
scratch=$(mktemp -d "${TMPDIR:-/tmp}/moebench-fuzz-run.XXXXXX")
[[ -d /dev/shm && -w /dev/shm ]] && scratch_shm=$(mktemp -d /dev/shm/moebench-fuzz-run.XXXXXX) || scratch_shm=$scratch
trap 'rm -rf "$scratch" "$scratch_shm"' EXIT
mkdir -p "$build/logs"
mode_flags=()
[[ ${FUZZ_KEEP_GOING:-0} == 1 ]] && mode_flags=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)

# run_target T: fuzzes T for $seconds and writes its summary line to $scratch/summary-T (and $scratch/found-T when it
# found something), so that targets can run side by side and still print in order.
run_target() {
  local t=$1 findings=$build/findings/$1 corpus=$build/corpus/$1 log=$build/logs/$1.log
  mkdir -p "$findings" "$corpus"
  touch "$scratch/start-$t"
  # shellcheck disable=SC2046  # seed folders are plain words
  MOEBENCH_FUZZ_TMPDIR=$scratch_shm \
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    nice -n "$nice_n" "$build/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
      -print_final_stats=1 -artifact_prefix="$findings/" -dict="$(dict_for "$t")" "${mode_flags[@]}" \
      "$corpus" $(seeds_for "$t") >"$log" 2>&1 || true
  local execs last cov ft new n_corpus
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+:?[[:space:]].*cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  [[ -z $execs ]] && execs=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$last")
  new=$(find "$findings" -maxdepth 1 -type f -newer "$scratch/start-$t" \
        \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  n_corpus=$(find "$corpus" -type f | wc -l)
  if [[ -n $new ]]; then
    touch "$scratch/found-$t"
    printf '%-18s %10s %7s %7s %7s  %s (log: %s)\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$n_corpus" \
      "$(wc -l <<<"$new") new: $(xargs -n1 basename <<<"$new" | paste -sd' ')" "${log#"$root"/}" >"$scratch/summary-$t"
  else
    printf '%-18s %10s %7s %7s %7s  none\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$n_corpus" >"$scratch/summary-$t"
  fi
}

started=$(date +%s)
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_n)); do wait -n || true; done
  run_target "$t" &
done
wait
printf '%-18s %10s %7s %7s %7s  %s\n' target execs cov ft corpus findings
status=0
for t in "${targets[@]}"; do
  cat "$scratch/summary-$t" 2>/dev/null || echo "$t: no summary (the run was interrupted)"
  if [[ -e $scratch/found-$t || ! -e $scratch/summary-$t ]]; then status=1; fi
done
echo "$(( $(date +%s) - started )) s wall, $jobs_n target(s) at a time, $seconds s each"
[[ $status -ne 0 ]] && echo "reproducers: ${build#"$root"/}/findings/<target>/; replay one with ${build#"$root"/}/fuzz_<target> FILE" >&2
exit $status
