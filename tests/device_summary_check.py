#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The device check's summary (scripts/device_summary.py) without a GPU: the ratios it judges issue 17 by.

1. Hand-made reports whose ratios are computed here by hand (decode bytes floor, prefill GEMM rate, small-phase share,
   graph replay vs phase sum, the PyTorch peer, split vs tensor-core attention), plus a failed run, a file that is
   not JSON and a report of the wrong shape: each ratio, target and verdict as expected, nothing crashes.
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


def expect(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def report(mode, batch, phases_us, roofline, status="ok", info=None, check=None, num_tokens=None):
    run = {"status": status, "mode": mode, "batch": batch,
           "num_tokens": num_tokens if num_tokens is not None else batch,
           "latency": {"step": {"mean_us": sum(phases_us.values())},
                       "phases": {p: {"mean_us": t} for p, t in phases_us.items()}},
           "roofline": {"phases": roofline}, "backend_info": info or {}}
    if check:
        run["check"] = check
    return {"runs": [run]}


def tables(text):
    """Markdown rows of the summary: {run: [cells...]} for the first table, [(cells)] for the targets table."""
    runs, targets, section = {}, [], 0
    for line in text.splitlines():
        if line.startswith("## Targets"):
            section = 1
        elif line.startswith("## "):
            section = 2
        if not line.startswith("| ") or line.startswith("| run |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if section == 0:
            runs[cells[0]] = cells
        elif section == 1:
            targets.append(cells)
    return runs, targets


def target(targets, run, ratio_prefix):
    found = [t for t in targets if t[0] == run and t[1].startswith(ratio_prefix)]
    return found[0] if len(found) == 1 else None


def summarize(repo, out):
    r = subprocess.run([sys.executable, os.path.join(repo, "scripts", "device_summary.py"), out],
                       capture_output=True, text=True, timeout=60)
    expect(r.returncode == 0, "summary exits 0 (got %d: %s)" % (r.returncode, r.stderr[-500:]))
    expect(os.path.exists(os.path.join(out, "summary.md")), "summary.md is written")
    return tables(open(os.path.join(out, "summary.md")).read()) if os.path.exists(os.path.join(out, "summary.md")) \
        else ({}, [])


def hand_made(repo, out):
    os.makedirs(os.path.join(out, "reports"))
    w = lambda name, obj: json.dump(obj, open(os.path.join(out, "reports", name + ".json"), "w"))
    json.dump({"gpus": {"devices": [{"name": "Test GPU", "measured": {"copy_bw_bytes_per_s": 4e12,
                                                                       "bf16_gemm_flops": 1e15}}]}},
              open(os.path.join(out, "devices.json"), "w"))
    json.dump({"points": [{"shape": "mixtral-8x7b", "tokens": 4096, "eager_loop_us": 3000, "grouped_mm_us": 2000}]},
              open(os.path.join(out, "torch_peer.json"), "w"))
    # Decode batch 8: attention + MoE = 110 us; bytes moved 400 MB / 4 TB/s = 100 us -> 1.10x (meets);
    # weights 300 MB -> 75 us -> 1.47x. Graph: phase sum 102 us over replay 100 us -> +2.0% (meets).
    w("decode-mixtral-8x7b-b8-gemv", report(
        "decode", 8, {"qkv_proj": 5, "attention": 10, "router_gemm": 1, "topk": 1, "permute": 2, "expert_up": 60,
                      "expert_down": 30, "unpermute_reduce": 1},
        {"qkv_proj": {"bytes": 20e6, "weight_bytes": 20e6}, "attention": {"bytes": 100e6, "weight_bytes": 0},
         "expert_up": {"bytes": 190e6, "weight_bytes": 180e6}, "expert_down": {"bytes": 90e6, "weight_bytes": 100e6}},
        info={"kernel_variant": {"expert_gemm": "gemv (auto: 2 rows per expert)", "attention": "split(decode)"},
              "cuda_graph": {"replays": 10, "replay_us_mean": 100.0, "phase_sum_us_mean": 102.0,
                             "phase_event_overhead": {"runs": 32, "overhead_fraction": 0.01, "overhead_us": 1.0}}}))
    # Decode batch 256: outside the 1-64 target (info only); small phases 12 of 100 us of MoE -> 12.0% (misses);
    # graph phase sum 104 / replay 100 -> +4.0% (misses).
    w("decode-mixtral-8x7b-b256-auto", report(
        "decode", 256, {"attention": 20, "router_gemm": 3, "topk": 3, "permute": 3, "expert_up": 50, "expert_down": 38,
                        "unpermute_reduce": 3},
        {"attention": {"bytes": 80e6, "weight_bytes": 0}, "expert_up": {"bytes": 300e6, "weight_bytes": 280e6}},
        info={"cuda_graph": {"replays": 10, "replay_us_mean": 100.0, "phase_sum_us_mean": 104.0,
                             "phase_event_overhead": {"runs": 0}}}))
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
                              check={"passed": True, "rel_l2_error": 1e-3, "ids_mismatched": 0, "ids_near_tie": 0}))
    w("decode-deepseek-v3-b1-loop", report("decode", 1, {"expert_up": 10}, {}, status="error"))
    w("weird", {"runs": "not a list of runs"})
    open(os.path.join(out, "reports", "broken.json"), "w").write("{ not json")

    runs, targets = summarize(repo, out)
    expect(set(runs) == {"decode-mixtral-8x7b-b8-gemv", "decode-mixtral-8x7b-b256-auto",
                         "prefill-mixtral-8x7b-4096-grouped", "prefill-mixtral-8x7b-4096-grouped-attnsplit",
                         "check-mixtral", "decode-deepseek-v3-b1-loop", "weird", "broken"},
           "one row per report (got %s)" % sorted(runs))
    expect(runs.get("broken", [None, None])[1] == "unreadable", "a file that is not JSON is 'unreadable'")
    expect(runs.get("weird", [None, ""])[1].startswith("not understood"), "a report of the wrong shape is 'not understood'")
    expect(runs.get("decode-deepseek-v3-b1-loop", [None, None])[1] == "error", "a failed run keeps its status")
    expect(runs.get("decode-mixtral-8x7b-b8-gemv", [""] * 11)[8] == "gemv", "expert_gemm variant, first word")
    expect(runs.get("decode-mixtral-8x7b-b8-gemv", [""] * 11)[9] == "split", "attention kernel, first word")
    expect(runs.get("check-mixtral", [""] * 11)[10] == "pass rel_l2=1.00e-03 ids_mismatched=0 near_tie=0",
           "the --check result in the row")
    expect(not [t for t in targets if t[0] in ("check-mixtral", "decode-deepseek-v3-b1-loop", "weird", "broken")],
           "no target from a --check run, a failed run or an unreadable report")

    t = target(targets, "decode-mixtral-8x7b-b8-gemv", "decode:")
    expect(t == ["decode-mixtral-8x7b-b8-gemv", "decode: (attention + MoE block) / (bytes moved / copy bandwidth)",
                 "1.10x (weights only: 1.47x)", "<= 1.15x", "meets"], "decode bytes floor at batch 8: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b8-gemv", "phase sum")
    expect(t is not None and t[2:] == ["+2.0%", "within 3%", "meets"], "graph vs phase sum at batch 8: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b8-gemv", "phase events")
    expect(t is not None and t[2] == "+1.0% (1.0 us)", "phase events' cost: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b256-auto", "decode:")
    expect(t is not None and t[3] == "(info: batch > 64)" and t[4] == "", "batch 256 is outside the decode target: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b256-auto", "router + topk")
    expect(t is not None and t[2:] == ["12.0%", "<= 10%", "MISSES"], "small-phase share at batch 256: %s" % t)
    t = target(targets, "decode-mixtral-8x7b-b256-auto", "phase sum")
    expect(t is not None and t[2:] == ["+4.0%", "within 3%", "MISSES"], "graph vs phase sum at batch 256: %s" % t)
    expect(target(targets, "decode-mixtral-8x7b-b256-auto", "phase events") is None,
           "no phase-event cost without runs")
    t = target(targets, "prefill-mixtral-8x7b-4096-grouped", "prefill:")
    expect(t is not None and t[2:] == ["0.85", ">= 0.80", "meets"], "prefill GEMM rate: %s" % t)
    t = target(targets, "prefill-mixtral-8x7b-4096-grouped", "MoE block: torch")
    expect(t is not None and t[2:] == ["1.25", ">= 1.0 (prefill)", "meets"], "PyTorch peer at 4096 tokens: %s" % t)
    t = target(targets, "prefill-mixtral-8x7b-4096-grouped", "qkv_proj + attention")
    expect(t is not None and t[2] == "2.00x", "split vs tensor-core attention: %s" % t)
    expect(not [t for t in targets if t[0].endswith("-attnsplit")], "the -attnsplit run feeds no target of its own")


def from_sim(moebench, repo, out):
    os.makedirs(os.path.join(out, "reports"))
    json.dump({"gpus": {"devices": [{"name": "Test GPU", "measured": {"copy_bw_bytes_per_s": 4.3e12,
                                                                       "bf16_gemm_flops": 7.9e14}}]}},
              open(os.path.join(out, "devices.json"), "w"))
    runs = {"decode-mixtral-8x7b-b8-auto": {"model": "mixtral-8x7b", "mode": "decode", "batch": 8, "context": 1024,
                                            "layers": 1},
            "decode-deepseek-v3-b256-auto": {"model": "deepseek-v3", "mode": "decode", "batch": 256, "context": 1024,
                                             "layers": 4},
            "prefill-mixtral-8x7b-1024-auto": {"model": "mixtral-8x7b", "mode": "prefill", "batch": 1,
                                               "seq_len": 1024, "layers": 1}}
    for name, cfg in runs.items():
        cfg = dict(cfg, backend="sim", warmup=1, iters=3)
        path = os.path.join(out, name + ".cfg.json")
        json.dump(cfg, open(path, "w"))
        r = subprocess.run([moebench, "run", "--config", path, "--out", os.path.join(out, "reports", name + ".json")],
                           capture_output=True, text=True, timeout=300)
        expect(r.returncode == 0, "sim run %s (exit %d: %s)" % (name, r.returncode, r.stderr[-400:]))
    rows, targets = summarize(repo, out)
    for name in runs:
        expect(rows.get(name, [None, None])[1] == "ok", "sim report %s has an ok row: %s" % (name, rows.get(name)))
    for run, prefix in [("decode-mixtral-8x7b-b8-auto", "decode:"), ("decode-deepseek-v3-b256-auto", "decode:"),
                        ("decode-deepseek-v3-b256-auto", "router + topk"), ("prefill-mixtral-8x7b-1024-auto", "prefill:")]:
        t = target(targets, run, prefix)
        expect(t is not None and t[2] not in ("", "0.00", "0.00x"), "sim report %s gives '%s': %s" % (run, prefix, t))


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    moebench, repo = argv[1], argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        hand_made(repo, os.path.join(tmp, "hand"))
        from_sim(moebench, repo, os.path.join(tmp, "sim"))
    print("device_summary_check: %s" % ("%d failure(s)" % len(FAILS) if FAILS else "all passed"))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
