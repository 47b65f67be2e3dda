#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Wall time, CPU time and peak memory of a large modeled sweep (issue 31 item 8).

The sweep: DeepSeek-V3, all 61 layers, fp8 weights and activations (in bf16 the model no longer fits 8 H200s),
decode at the default context, the sim backend on its default hardware (h200-sxm), batch 1..2000 (every batch) x
EP 8/16/32/64/128 = 10,000 points, brief records, with its journal and report written as a sweep always writes them.
Each run is timed by /usr/bin/time -v (wall, user, sys, peak RSS); the load average is read before and after.
A smaller sweep of the same points at batch 1..200 (1,000 points) is run first: its peak RSS against the full
sweep's shows whether memory grows with the points. From the full sweep's journal: each point's own time
(sweep_point_s) by batch range, to show that a point costs about the same whatever the batch, and that every point
fits its GPUs.

    /usr/bin/python3 bench/sim_sweep_speed.py --out-dir results/<date>_sim-sweep-speed_cpu-local [--repeat 3]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

POINT_FLAGS = ["--backend", "sim", "--model", "deepseek-v3", "--dtype", "fp8", "--layers", "61",
               "--ep", "8,16,32,64,128", "--record", "brief", "--quiet"]


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def time_v(cmd):
    """Runs cmd under /usr/bin/time -v; returns (exit code, dict of wall_s, user_s, sys_s, max_rss_kib)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        rc = subprocess.call(["/usr/bin/time", "-v", "-o", tf.name] + cmd,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        text = tf.read()
    got = {}
    for key, pat in [("user_s", r"User time \(seconds\): ([\d.]+)"), ("sys_s", r"System time \(seconds\): ([\d.]+)"),
                     ("max_rss_kib", r"Maximum resident set size \(kbytes\): (\d+)")]:
        m = re.search(pat, text)
        got[key] = float(m.group(1)) if m else None
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    wall = 0.0
    for part in m.group(1).split(":"):
        wall = wall * 60 + float(part)
    got["wall_s"] = wall
    got["cpu_s"] = round(got["user_s"] + got["sys_s"], 2)
    return rc, got


def run_sweep(moebench, batches, work, jobs):
    out = os.path.join(work, "s.json")
    for p in (out, out[:-5] + ".jsonl"):
        if os.path.exists(p):
            os.remove(p)
    cmd = [moebench, "sweep"] + POINT_FLAGS + ["--batch", batches, "--out", out]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    before = loadavg()
    rc, t = time_v(cmd)
    after = loadavg()
    if rc != 0:
        sys.exit(f"sweep failed (exit {rc}): {' '.join(cmd)}")
    t.update({"loadavg_before": before, "loadavg_after": after,
              "journal_bytes": os.path.getsize(out[:-5] + ".jsonl"), "report_bytes": os.path.getsize(out)})
    return cmd, t, out[:-5] + ".jsonl"


def journal_stats(path):
    """Points, fits, and the points' own times by batch range, read line by line (the journal is ~250 MB)."""
    by_range = {}
    n = not_fitting = not_ok = 0
    paths = set()
    for line in open(path):
        e = json.loads(line)
        rec = e["record"]
        n += 1
        if rec.get("fits") is False:
            not_fitting += 1
        if rec.get("status", "ok") != "ok":
            not_ok += 1
        paths.add(rec.get("routing", {}).get("path"))
        b = rec["batch"]
        lo = 1 if b <= 10 else (11 if b <= 100 else (101 if b <= 1000 else 1001))
        by_range.setdefault(lo, []).append(rec["sweep_point_s"] * 1e3)
    ranges = []
    for lo in sorted(by_range):
        v = by_range[lo]
        hi = {1: 10, 11: 100, 101: 1000, 1001: 2000}[lo]
        ranges.append({"batch": f"{lo}..{hi}", "points": len(v), "median_ms": round(statistics.median(v), 3),
                       "p90_ms": round(sorted(v)[int(0.9 * (len(v) - 1))], 3)})
    return {"points": n, "not_ok": not_ok, "fits_false": not_fitting, "routing_paths": sorted(p for p in paths if p),
            "point_time_by_batch": ranges}


def keep_samples(journal, report, out_dir):
    """The journal's first line (one point's whole line) and the report without its runs (the sweep block: golden
    point, knees), next to the result; the 250 MB files themselves are not kept."""
    with open(journal) as f, open(os.path.join(out_dir, "journal_first_line.jsonl"), "w") as g:
        g.write(f.readline())
    with open(report) as f:
        text = f.read()
    start = text.index('\n  "runs": [')
    end = text.index('\n  ],', start)
    head = json.loads(text[:start] + '\n  "runs": [' + text[end + 3:])
    head["runs"] = f"({text.count(chr(10), start + 1, end)} records left out: see the journal)"
    with open(os.path.join(out_dir, "report_without_runs.json"), "w") as g:
        json.dump(head, g, indent=1)
        g.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moebench", default="build/moebench")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--repeat", type=int, default=3, help="runs of the 10,000-point sweep")
    ap.add_argument("--jobs", type=int, default=None, help="sweep --jobs (default: the sweep's own, this process's CPUs)")
    ap.add_argument("--work", default=None, help="where the sweeps write (default a temporary folder)")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    work = args.work or tempfile.mkdtemp(prefix="sim-sweep-speed-")
    os.makedirs(work, exist_ok=True)

    runs = []
    cmd_small, small, _ = run_sweep(args.moebench, "1..200:+1", work, args.jobs)
    print(f"1,000 points: wall {small['wall_s']:.2f} s, cpu {small['cpu_s']:.2f} s, "
          f"rss {small['max_rss_kib'] / 1024:.0f} MiB, load {small['loadavg_before'][0]}", flush=True)
    stats = None
    for i in range(args.repeat):
        cmd, t, journal = run_sweep(args.moebench, "1..2000:+1", work, args.jobs)
        runs.append(t)
        print(f"10,000 points run {i + 1}: wall {t['wall_s']:.2f} s, cpu {t['cpu_s']:.2f} s, "
              f"rss {t['max_rss_kib'] / 1024:.0f} MiB, load {t['loadavg_before'][0]} -> {t['loadavg_after'][0]}",
              flush=True)
        if i == args.repeat - 1:
            stats = journal_stats(journal)
            keep_samples(journal, journal[:-6] + ".json", args.out_dir)
    if args.work is None:
        shutil.rmtree(work)

    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip() != ""
    cpu_model = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    result = {
        "what": "wall, CPU and peak RSS of a 10,000-point modeled sweep with its journal (measured)",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git": git + ("-dirty" if dirty else ""),
        "machine": {"cpu": cpu_model, "cpus": os.cpu_count(), "kernel": platform.release(),
                    "mem_total_kib": int(open("/proc/meminfo").readline().split()[1])},
        "command": " ".join(cmd),
        "small_command": " ".join(cmd_small),
        "small_1000_points": small,
        "runs_10000_points": runs,
        "median_wall_s": round(statistics.median(r["wall_s"] for r in runs), 2),
        "median_cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 2),
        "max_rss_kib": max(r["max_rss_kib"] for r in runs),
        "journal": stats,
        "source": "measured",
    }
    with open(os.path.join(args.out_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({k: result[k] for k in ("median_wall_s", "median_cpu_s", "max_rss_kib")}))


if __name__ == "__main__":
    main()
