#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The device check's summary (scripts/device_summary.py) without a GPU: the verdicts it judges issue 17 by.

1. Hand-made reports whose ratios are computed here by hand: P1 against the weight-byte floor at the card's measured
   copy bandwidth (medians, not means; a whole step with dense layers for information, the MoE layer alone judged;
   fewer than 30 iterations and another card than devices.json's give no verdict), P3, P4 from the replay pairs with /
   without phase events, the eager run against the graph run of its shape, a graph run lost and rerun eagerly, the
   prefill GEMM rate, the PyTorch peer, split vs tensor-core attention; a failed run, a file that is not JSON and a
   report of the wrong shape: each ratio, target and verdict as expected, nothing crashes. Hand-made logs: the GPU
   tests' and conformance results, compute-sanitizer's findings (sanitizer.txt), a build failure's tail.
2. Reports of the sim backend (the real report schema) under the device check's run names: every run gets a row and
   the ratios it should feed.
Usage: tests/device_summary_check.py MOEBENCH REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

FAILS = []
H100 = "NVIDIA H100 80GB HBM3"


def expect(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def report(mode, batch, p50_us, roofline, status="ok", info=None, check=None, num_tokens=None, iters=30,
           card=H100, kinds=("moe",), first_layer=0, step_p50=None):
    """One run; every phase's mean is twice its median, so a summary reading means is caught."""
    info = dict(info or {})
    if card:
        info["device"] = {"name": card}
    run = {"status": status, "mode": mode, "batch": batch, "model": "mixtral-8x7b",
           "num_tokens": num_tokens if num_tokens is not None else batch,
           "axes": {"first_layer": first_layer},
           "layers": {"run": list(range(first_layer, first_layer + len(kinds))), "kinds": list(kinds)},
           "iterations": {"measured": iters},
           "latency": {"step": {"mean_us": 2 * sum(p50_us.values()),
                                "p50_us": step_p50 if step_p50 is not None else sum(p50_us.values())},
                       "phases": {p: {"mean_us": 2 * t, "p50_us": t} for p, t in p50_us.items()}},
           "roofline": {"phases": roofline}, "backend_info": info}
    if check:
        run["check"] = check
    return {"runs": [run]}


def graph(replay, phase_sum, with_us=None, without_us=None, pairs=32, why=None):
    o = {"runs": pairs, "replay_with_phase_events_us_median": with_us, "replay_without_phase_events_us_median": without_us,
         "replay_with_phase_events_us_mean": 999.0, "replay_without_phase_events_us_mean": 1.0} if pairs else \
        {"runs": 0, "why": why}
    return {"replays": 40, "replay_us_median": replay, "replay_us_mean": 999.0, "phase_sum_us_median": phase_sum,
            "phase_sum_us_mean": 1.0, "phase_event_overhead": o}


def tables(text):
    """Markdown rows of the summary: {run: [cells...]} for the first table, [(cells)] for the targets table."""
    runs, targets, section = {}, [], 0
    for line in text.splitlines():
        if line.startswith("## Targets"):
            section = 1
        elif line.startswith("## "):
            section = 2
        if not line.startswith("| ") or line.startswith("| run |") or line.startswith("| shape |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if section == 0:
            runs[cells[0]] = cells
        elif section == 1:
            targets.append(cells)
    return runs, targets


def target(targets, run, ratio_prefix):
    """The targets row of `run` whose ratio starts with `ratio_prefix`: [run, card, ratio, value, target, verdict]."""
    found = [t for t in targets if t[0] == run and t[2].startswith(ratio_prefix)]
    return found[0] if len(found) == 1 else None


def summarize(repo, out):
    r = subprocess.run([sys.executable, os.path.join(repo, "scripts", "device_summary.py"), out],
                       capture_output=True, text=True, timeout=60)
    expect(r.returncode == 0, "summary exits 0 (got %d: %s)" % (r.returncode, r.stderr[-500:]))
    path = os.path.join(out, "summary.md")
    expect(os.path.exists(path), "summary.md is written")
    text = open(path).read() if os.path.exists(path) else ""
    return tables(text) + (text,)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def hand_made(repo, out):
    os.makedirs(os.path.join(out, "reports"))
    w = lambda name, obj: json.dump(obj, open(os.path.join(out, "reports", name + ".json"), "w"))
    json.dump({"gpus": {"devices": [{"name": H100, "measured": {"copy_bw_bytes_per_s": 3e12, "bf16_gemm_flops": 1e15}}]}},
              open(os.path.join(out, "devices.json"), "w"))
    json.dump({"points": [{"shape": "mixtral-8x7b", "tokens": 4096, "eager_loop_us": 3000, "grouped_mm_us": 2000}]},
              open(os.path.join(out, "torch_peer.json"), "w"))
    # Decode batch 8 (graph): attention + MoE medians = 110 us; weight bytes 300 MB / 3 TB/s = 100 us -> 1.10x (meets);
    # every byte 440 MB -> 146.7 us -> 0.75x. P4: medians 101 / 100 -> +1.0% (meets); phase sum 102 / replay 100 (info).
    b8_phases = {"qkv_proj": 5, "attention": 10, "router_gemm": 1, "topk": 1, "permute": 2, "expert_up": 60,
                 "expert_down": 30, "unpermute_reduce": 1}
    b8_roof = {"qkv_proj": {"bytes": 20e6, "weight_bytes": 20e6}, "attention": {"bytes": 120e6, "weight_bytes": 0},
               "expert_up": {"bytes": 200e6, "weight_bytes": 180e6}, "expert_down": {"bytes": 100e6, "weight_bytes": 100e6}}
    w("decode-mixtral-8x7b-b8-gemv", report(
        "decode", 8, b8_phases, b8_roof,
        info={"kernel_variant": {"expert_gemm": "gemv (auto: 2 rows per expert)", "attention": "split(decode)"},
              "cuda_graph": graph(100.0, 102.0, 101.0, 100.0)}))
    # The eager run of the same shape (auto chose gemv): step median 130 us against the replay's 100 -> 1.30x (info).
    w("decode-mixtral-8x7b-b8-eager", report("decode", 8, b8_phases, b8_roof, step_p50=130.0,
                                             info={"kernel_variant": {"expert_gemm": "gemv (auto)"}}))
    # Fewer than 30 iterations: no verdict.
    w("decode-mixtral-8x7b-b1-loop", report("decode", 1, b8_phases, b8_roof, iters=10,
                                            info={"kernel_variant": {"expert_gemm": "loop"}}))
    # Another card than the one devices.json measured: no verdict.
    w("decode-mixtral-8x7b-b64-gemv", report("decode", 64, b8_phases, b8_roof, card="NVIDIA H200",
                                             info={"kernel_variant": {"expert_gemm": "gemv"}}))
    # DeepSeek-V3 whole step (3 dense + 1 MoE layers, dense_mlp counted in time and bytes): for information only;
    # its MoE layer alone (--first-layer 3): 240 us over 600 MB / 3 TB/s = 200 us -> 1.20x (misses).
    w("decode-deepseek-v3-step-b8-auto", report(
        "decode", 8, dict(b8_phases, dense_mlp=90), dict(b8_roof, dense_mlp={"bytes": 300e6, "weight_bytes": 300e6}),
        kinds=("dense", "dense", "dense", "moe"), info={"kernel_variant": {"expert_gemm": "gemv"}}))
    w("decode-deepseek-v3-moe-b8-gemv", report(
        "decode", 8, {"attention": 40, "expert_up": 150, "expert_down": 50},
        {"attention": {"bytes": 50e6, "weight_bytes": 0}, "expert_up": {"bytes": 400e6, "weight_bytes": 400e6},
         "expert_down": {"bytes": 200e6, "weight_bytes": 200e6}},
        kinds=("moe",), first_layer=3, info={"kernel_variant": {"expert_gemm": "gemv"}}))
    # Decode batch 256: outside the 1-64 P1 target (info); small phases 12 of 100 us of MoE -> 12.0% (P3 misses);
    # P4: 104 / 100 -> +4.0% (misses).
    w("decode-mixtral-8x7b-b256-auto", report(
        "decode", 256, {"attention": 20, "router_gemm": 3, "topk": 3, "permute": 3, "expert_up": 50, "expert_down": 38,
                        "unpermute_reduce": 3},
        {"attention": {"bytes": 80e6, "weight_bytes": 0}, "expert_up": {"bytes": 300e6, "weight_bytes": 280e6}},
        info={"cuda_graph": graph(100.0, 104.0, 104.0, 100.0)}))
    # A cold-L2 graph run measures no pairs: P4 says why, no verdict.
    w("decode-mixtral-8x7b-b64-coldl2", report("decode", 64, b8_phases, b8_roof,
                                               info={"cuda_graph": graph(100.0, 101.0, pairs=0, why="not with --cold-l2")}))
    # A graph run that failed, rerun eagerly: P1 from the rerun, labelled; its P4 lost.
    w("decode-mixtral-8x7b-b64-grouped-eager-rerun", report("decode", 64, b8_phases, b8_roof,
                                                            info={"kernel_variant": {"expert_gemm": "grouped"}}))
    # Prefill 4096: 1.275 TFLOP in 1500 us = 850 TFLOP/s / 1000 -> 0.85 (meets); peer 2000 us / MoE 1600 us -> 1.25.
    prefill_phases = {"qkv_proj": 100, "attention": 300, "router_gemm": 20, "topk": 20, "permute": 30,
                      "expert_up": 1000, "expert_down": 500, "unpermute_reduce": 30}
    w("prefill-mixtral-8x7b-4096-grouped", report(
        "prefill", 1, prefill_phases, {"expert_up": {"flops": 0.85e12}, "expert_down": {"flops": 0.425e12}},
        num_tokens=4096))
    # The same run with the split attention: qkv_proj + attention 800 us against 400 -> 2.00x (info).
    w("prefill-mixtral-8x7b-4096-grouped-attnsplit", report(
        "prefill", 1, dict(prefill_phases, attention=700), {"expert_up": {"flops": 0.85e12}}, num_tokens=4096))
    w("check-mixtral", report("decode", 16, {"expert_up": 10}, {"expert_up": {"bytes": 1e6, "weight_bytes": 1e6}},
                              iters=3, check={"passed": True, "rel_l2_error": 1e-3, "ids_mismatched": 0,
                                              "ids_near_tie": 0}))
    w("decode-deepseek-v3-b1-loop", report("decode", 1, {"expert_up": 10}, {}, status="error"))
    w("weird", {"runs": "not a list of runs"})
    write(os.path.join(out, "reports", "broken.json"), "{ not json")
    # Logs: steps, the GPU tests, conformance (3 --check cases, one failed; 2 step cases, one failed), sanitizers.
    write(os.path.join(out, "machine.txt"), "os: Ubuntu 24.04.1 LTS; Linux 6.18.44 x86_64\ncompiler: c++ (Ubuntu 13.2.0) "
          "13.2.0; nvcc release 13.0\ndriver: 580.159.04\ncard: %s\nmemory: 81559 MiB\nnproc: 16\n" % H100)
    write(os.path.join(out, "steps.log"),
          "[10:00:01 +60s] ok    gpu-tests (20s)\n[10:00:30 +90s] FAIL  conformance: exit 1 (30s; last lines below)\n"
          "[10:01:00 +120s] FAIL  sanitize-memcheck: exit 97 (25s)\n"
          "[10:01:30 +150s] FAIL  sanitize-racecheck: timed out after 45s (log: logs/sanitize-racecheck.log)\n")
    write(os.path.join(out, "logs", "gpu-tests.log"), "moebench_tests_cuda: NVIDIA H100\n...\n"
          "===============================================================================\n"
          "All tests passed (1234 assertions in 25 test cases)\n")
    write(os.path.join(out, "logs", "conformance.log"),
          "conformance-check backend=cuda model=tiny-mixtral-8x7b variant=decode passed=1 rel_l2=2.000e-03 "
          "tolerance=1.0e-02 ids_mismatched=0 ids_near_tie=0\n"
          "conformance-check backend=cuda model=tiny-mixtral-8x7b variant=prefill passed=1 rel_l2=4.000e-03 "
          "tolerance=1.0e-02 ids_mismatched=0 ids_near_tie=1\n"
          "conformance-check backend=cuda model=tiny-dbrx variant=zipf passed=0 rel_l2=3.000e-01 tolerance=1.0e-02 "
          "ids_mismatched=0 ids_near_tie=0\n"
          "conformance-step backend=cuda reference=cpu model=tiny-dbrx variant=decode passed=1 moe_in_rel_l2=3.000e-03 "
          "moe_out_rel_l2=5.000e-03 tolerance=2.0e-02 tokens=16 excused=0 near_ties=0 ids_mismatched=0\n"
          "conformance-step backend=cuda reference=cpu model=tiny-grok-1 variant=prefill passed=0 moe_in_rel_l2=9.000e-02 "
          "moe_out_rel_l2=8.000e-02 tolerance=2.0e-02 tokens=24 excused=0 near_ties=0 ids_mismatched=0 failure=layer 0: "
          "moe_in relative L2 error 0.09 exceeds 0.02\n"
          "../tests/conformance_cases.hpp:99: warning:\n  conformance: cuda skips tiny-minimax-m1: backend (--backend)...\n"
          "test cases: 2 | 0 passed | 2 failed\nassertions: 300 | 298 passed | 2 failed\n")
    write(os.path.join(out, "logs", "sanitize-memcheck.log"),
          "========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n"
          "=========     at permute_scatter+0x1f0 in moe.cu:412\n"
          "=========     by thread (3,0,0) in block (0,0,0)\n========= \n========= ERROR SUMMARY: 1 error\n")
    write(os.path.join(out, "logs", "sanitize-racecheck.log"), "========= COMPUTE-SANITIZER\nrmsnorm...\n")

    runs, targets, text = summarize(repo, out)
    expect(set(runs) == {"decode-mixtral-8x7b-b8-gemv", "decode-mixtral-8x7b-b8-eager", "decode-mixtral-8x7b-b1-loop",
                         "decode-mixtral-8x7b-b64-gemv", "decode-deepseek-v3-step-b8-auto",
                         "decode-deepseek-v3-moe-b8-gemv", "decode-mixtral-8x7b-b256-auto",
                         "decode-mixtral-8x7b-b64-coldl2", "decode-mixtral-8x7b-b64-grouped-eager-rerun",
                         "prefill-mixtral-8x7b-4096-grouped", "prefill-mixtral-8x7b-4096-grouped-attnsplit",
                         "check-mixtral", "decode-deepseek-v3-b1-loop", "weird", "broken"},
           "one row per report (got %s)" % sorted(runs))
    expect("Card: %s (devices.json)" % H100 in text and "copy bandwidth 3000 GB/s" in text,
           "the card and its measured copy bandwidth head the summary")
    expect("Machine: os: Ubuntu 24.04.1 LTS; Linux 6.18.44 x86_64; compiler: c++ (Ubuntu 13.2.0) 13.2.0; nvcc release "
           "13.0; driver: 580.159.04; memory: 81559 MiB (machine.txt)." in text, "OS, compiler and driver in the summary")
    expect(runs.get("broken", [None, None])[1] == "unreadable", "a file that is not JSON is 'unreadable'")
    expect(runs.get("weird", [None, ""])[1].startswith("not understood"), "a report of the wrong shape is 'not understood'")
    expect(runs.get("decode-deepseek-v3-b1-loop", [None, None])[1] == "error", "a failed run keeps its status")
    row = runs.get("decode-mixtral-8x7b-b8-gemv", [""] * 14)
    expect(row[2] == H100, "every row names its card: %s" % row)
    expect(row[7] == "110.0" and row[8] == "95.0", "step and MoE times are medians: %s" % row)
    expect(row[11] == "gemv" and row[12] == "split", "expert_gemm variant and attention kernel, first word: %s" % row)
    expect(runs.get("decode-deepseek-v3-moe-b8-gemv", [""] * 6)[5] == "1 from 3", "the layers run and where they start")
    expect(runs.get("check-mixtral", [""] * 14)[13] == "pass rel_l2=1.00e-03 ids_mismatched=0 near_tie=0",
           "the --check result in the row")
    expect(not [t for t in targets if t[0] in ("check-mixtral", "decode-deepseek-v3-b1-loop", "weird", "broken")],
           "no target from a --check run, a failed run or an unreadable report")
    expect(all(len(t) == 6 and t[1] for t in targets), "every target names its card")

    t = target(targets, "decode-mixtral-8x7b-b8-gemv", "P1 decode:")
    expect(t is not None and t[1:] == [H100, "P1 decode: (attention + MoE block) / (weight bytes / copy bandwidth)",
                                       "1.10x (every byte moved: 0.75x)", "<= 1.15x", "meets"],
           "P1 against the weight bytes at batch 8: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b8-gemv", "P4:")
    expect(t is not None and t[3:] == ["+1.0% (101.0 / 100.0 us, 32 pairs)", "within 3%", "meets"],
           "P4 from the pairs' medians: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b8-gemv", "phase sum")
    expect(t is not None and t[3:] == ["+2.0%", "(info)", ""], "phase sum against the replay is information: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b8-eager", "eager step / graph replay")
    expect(t is not None and "decode-mixtral-8x7b-b8-gemv" in t[2] and t[3] == "1.30x (130.0 / 100.0 us)",
           "the eager run against the graph run of its shape: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b8-eager", "P1 decode:")
    expect(t is not None and "(eager)" in t[2] and t[5] == "meets", "an eager run's P1 says it is eager: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b1-loop", "P1 decode:")
    expect(t is not None and t[5] == "no verdict: 10 < 30 iterations", "fewer than 30 iterations: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b64-gemv", "P1 decode:")
    expect(t is not None and t[1] == "NVIDIA H200" and t[5].startswith("no verdict: run on NVIDIA H200, floor measured on"),
           "a run on another card than the measured floor's: %s" % t)
    t = target(targets, "decode-deepseek-v3-step-b8-auto", "P1 decode:")
    # whole step body: 110 + 90 us over (300 + 300) MB -> 200 / 200 = 1.00x; every byte (440 + 300) MB -> 0.81x
    expect(t is not None and t[3] == "1.00x (every byte moved: 0.81x)" and
           t[4] == "(info: 3 dense + 1 MoE layers; P1 is judged on the MoE layer alone)" and t[5] == "",
           "the whole DeepSeek-V3 step is information: %s" % t)
    t = target(targets, "decode-deepseek-v3-moe-b8-gemv", "P1 decode:")
    expect(t is not None and t[3] == "1.20x (every byte moved: 1.11x)" and t[4:] == ["<= 1.15x", "MISSES"],
           "the DeepSeek-V3 MoE layer alone is judged: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b256-auto", "P1 decode:")
    expect(t is not None and t[4] == "(info: batch > 64)" and t[5] == "", "batch 256 is outside P1: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b256-auto", "P3:")
    expect(t is not None and t[3:] == ["12.0%", "<= 10%", "MISSES"], "P3 at batch 256: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b256-auto", "P4:")
    expect(t is not None and t[3].startswith("+4.0%") and t[5] == "MISSES", "P4 at batch 256: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b64-coldl2", "P4:")
    expect(t is not None and t[3] == "not measured: not with --cold-l2" and t[5] == "", "P4 unmeasured says why: %s" % t)
    expect(target(targets, "decode-mixtral-8x7b-b64-coldl2", "P1") is None, "a cold-L2 run feeds no P1")
    t = target(targets, "decode-mixtral-8x7b-b64-grouped-eager-rerun", "P1 decode:")
    expect(t is not None and "(eager rerun: the graph run failed)" in t[2], "the rerun's P1 is labelled: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b64-grouped", "P4:")
    expect(t is not None and t[5] == "LOST" and "rerun eagerly as decode-mixtral-8x7b-b64-grouped-eager-rerun" in t[3],
           "the failed graph run's P4 is lost, and says so: %s" % t)
    t = target(targets, "prefill-mixtral-8x7b-4096-grouped", "prefill:")
    expect(t is not None and t[3:] == ["0.85", ">= 0.80", "meets"], "prefill GEMM rate: %s" % t)
    t = target(targets, "prefill-mixtral-8x7b-4096-grouped", "MoE block: torch")
    expect(t is not None and t[3:] == ["1.25", ">= 1.0 (prefill)", "meets"], "PyTorch peer at 4096 tokens: %s" % t)
    t = target(targets, "prefill-mixtral-8x7b-4096-grouped", "qkv_proj + attention")
    expect(t is not None and t[3] == "2.00x", "split vs tensor-core attention: %s" % t)
    expect(not [t for t in targets if t[0].endswith("-attnsplit")], "the -attnsplit run feeds no target of its own")

    expect("All tests passed (1234 assertions in 25 test cases) (ok gpu-tests (20s))" in text,
           "the GPU tests' Catch2 result and step status")
    expect("--check against the fp32 reference: 3 cases, 2 passed, 1 failed; worst rel_l2 3.00e-01" in text,
           "the conformance --check cases counted")
    expect("FAIL tiny-dbrx zipf" in text, "a failed --check case is named")
    expect("whole step against the cpu step: 2 cases, 1 passed, 1 failed; worst moe_out_rel_l2 8.00e-02" in text,
           "the whole-step cases counted")
    expect("FAIL tiny-grok-1 prefill: layer 0: moe_in relative L2 error 0.09 exceeds 0.02" in text,
           "a failed whole-step case says why")
    expect("skipped models (the backend refuses them by name): tiny-minimax-m1" in text, "skipped models listed")
    expect("- memcheck: ERROR SUMMARY: 1 error; 3 finding lines" in text, "memcheck's summary: %s" %
           [l for l in text.splitlines() if "memcheck" in l])
    expect("- racecheck: no summary line (timed out" in text and "timed out after 45s" in text,
           "a racecheck that timed out says so")
    san = open(os.path.join(out, "sanitizer.txt")).read() if os.path.exists(os.path.join(out, "sanitizer.txt")) else ""
    expect("Invalid __global__ read of size 4 bytes" in san and "moe.cu:412" in san, "sanitizer.txt holds the findings")
    expect("## Build FAILED" not in text, "no build section without a build failure")


def build_failed(repo, out):
    os.makedirs(os.path.join(out, "reports"))
    write(os.path.join(out, "build-error.txt"),
          "configure failed (exit 1)\nCMake Error at CMakeLists.txt:40 (find_package):\n  Could not find a package "
          "configuration file provided by \"CLI11\"\n")
    runs, targets, text = summarize(repo, out)
    expect("## Build FAILED" in text and "Could not find a package configuration file provided by \"CLI11\"" in text,
           "a build failure's CMake error tail is in the summary")
    expect("- memcheck: did not run" in text and "did not run" in text, "what did not run says so")


def from_sim(moebench, repo, out):
    os.makedirs(os.path.join(out, "reports"))
    json.dump({"gpus": {"devices": [{"name": "Test GPU", "measured": {"copy_bw_bytes_per_s": 4.3e12,
                                                                       "bf16_gemm_flops": 7.9e14}}]}},
              open(os.path.join(out, "devices.json"), "w"))
    runs = {"decode-mixtral-8x7b-b8-auto": {"model": "mixtral-8x7b", "mode": "decode", "batch": 8, "context": 1024,
                                            "layers": 1},
            "decode-deepseek-v3-moe-b256-auto": {"model": "deepseek-v3", "mode": "decode", "batch": 256,
                                                 "context": 1024, "layers": 1, "first_layer": 3},
            "prefill-mixtral-8x7b-1024-auto": {"model": "mixtral-8x7b", "mode": "prefill", "batch": 1,
                                               "seq_len": 1024, "layers": 1}}
    for name, cfg in runs.items():
        # The layer the device check runs on one GPU, modeled alone: the whole model would not fit one GPU, which
        # the sim refuses unless told (allow_no_fit).
        cfg = dict(cfg, backend="sim", warmup=1, iters=3, allow_no_fit=True)
        path = os.path.join(out, name + ".cfg.json")
        json.dump(cfg, open(path, "w"))
        r = subprocess.run([moebench, "run", "--config", path, "--out", os.path.join(out, "reports", name + ".json")],
                           capture_output=True, text=True, timeout=300)
        expect(r.returncode == 0, "sim run %s (exit %d: %s)" % (name, r.returncode, r.stderr[-400:]))
    rows, targets, _ = summarize(repo, out)
    for name in runs:
        expect(rows.get(name, [None, None])[1] == "ok", "sim report %s has an ok row: %s" % (name, rows.get(name)))
    expect(rows.get("decode-deepseek-v3-moe-b256-auto", [""] * 6)[5] == "1 from 3", "the sim run of layer 3 alone")
    for run, prefix in [("decode-mixtral-8x7b-b8-auto", "P1 decode:"), ("decode-deepseek-v3-moe-b256-auto", "P1 decode:"),
                        ("decode-deepseek-v3-moe-b256-auto", "P3:"), ("prefill-mixtral-8x7b-1024-auto", "prefill:")]:
        t = target(targets, run, prefix)
        expect(t is not None and t[3] not in ("", "0.00", "0.00x", "n/a"), "sim report %s gives '%s': %s" % (run, prefix, t))
        # A sim report measures no iteration: never a verdict.
        expect(t is not None and t[5] in ("", "no verdict: 0 < 30 iterations"), "no verdict on modeled steps: %s" % t)


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    moebench, repo = argv[1], argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        hand_made(repo, os.path.join(tmp, "hand"))
        build_failed(repo, os.path.join(tmp, "build"))
        from_sim(moebench, repo, os.path.join(tmp, "sim"))
    print("device_summary_check: %s" % ("%d failure(s)" % len(FAILS) if FAILS else "all passed"))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
