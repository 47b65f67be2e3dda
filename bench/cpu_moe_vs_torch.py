#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# The CPU backend's MoE block (moebench bench moe) against a transformers-style eager PyTorch MoE on identical layer
# shapes, threads and routing, fp32. Prints a table (moebench time, floor, ratios) and writes Markdown + JSON.
"""Usage: /usr/bin/python3 bench/cpu_moe_vs_torch.py [--moebench build/moebench] [--threads 0] [--out-md FILE]
          [--out-json FILE] [--points olmoe-1b-7b:decode:1,...] [--iters N]

Each point: `moebench bench moe --format json --dump-routing R.safetensors` runs the block (router_gemm .. unpermute_reduce)
and measures the ceilings; then PyTorch runs the block the way transformers' Mixtral/OLMoE sparse MoE blocks do
(router Linear, softmax, top-k, loop over experts with index_select, SwiGLU, index_add_), with the router's selection
replaced by the ids and weights moebench used (R.safetensors), on torch.set_num_threads(<moebench's threads>).
Both evict the last-level cache before each iteration (a real model's layers do not stay in the LLC).
Without torch (Debian: apt-get install python3-torch) it prints a skip line and exits 0."""
import argparse
import datetime
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time

# The 8 points, plus decode 256 (32 / 64 rows per expert: between the small-row and the prefill regimes).
DEFAULT_POINTS = [
    ("olmoe-1b-7b", "decode", 1), ("olmoe-1b-7b", "decode", 8), ("olmoe-1b-7b", "decode", 64),
    ("olmoe-1b-7b", "decode", 256), ("olmoe-1b-7b", "prefill", 4096),
    ("mixtral-8x7b", "decode", 1), ("mixtral-8x7b", "decode", 8), ("mixtral-8x7b", "decode", 64),
    ("mixtral-8x7b", "decode", 256), ("mixtral-8x7b", "prefill", 4096),
]


def read_safetensors(path):
    """Minimal reader (header + raw little-endian data): returns {name: (dtype, shape, bytes)}, metadata."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], data[b:e])
    return out, meta


def meminfo_available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def machine():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem / 2**30, 1), "kernel": platform.release()}


def torch_block(torch, F, cfg, ids, wts, threads, iters, warmup, flush_buf):
    """Transformers-style eager MoE (fp32). Returns per-iteration times in microseconds."""
    H, I, E, k = cfg["H"], cfg["I"], cfg["E"], cfg["k"]
    T = ids.shape[0]
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    x = torch.empty(T, H).uniform_(-1, 1, generator=g)
    router = torch.nn.Linear(H, E, bias=False)
    # One (gate, up, down) Linear triple per expert, as transformers stores them.
    experts = []
    for _ in range(E):
        w1 = torch.empty(I, H).uniform_(-0.02, 0.02, generator=g)  # gate
        w3 = torch.empty(I, H).uniform_(-0.02, 0.02, generator=g)  # up
        w2 = torch.empty(H, I).uniform_(-0.02, 0.02, generator=g)  # down
        experts.append((w1, w3, w2))
    ids_t = torch.from_numpy(ids).long() if hasattr(ids, "dtype") else ids
    wts_t = torch.from_numpy(wts) if hasattr(wts, "dtype") else wts
    times = []
    with torch.inference_mode():
        for it in range(warmup + iters):
            flush_buf.sum()  # evict the LLC, like moebench's default
            t0 = time.perf_counter()
            logits = router(x)
            probs = F.softmax(logits, dim=1, dtype=torch.float)
            _w, _sel = torch.topk(probs, k, dim=-1)
            sel, rw = ids_t, wts_t  # the routing moebench used (identical work)
            out = torch.zeros(T, H)
            mask = F.one_hot(sel.clamp(min=0), num_classes=E).permute(2, 1, 0)
            mask = mask * (sel >= 0).T.unsqueeze(0)  # dropped assignments (-1) select nothing
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero().flatten().tolist()
            for e in hit:
                idx, top_x = torch.where(mask[e])
                cur = x.index_select(0, top_x)
                w1, w3, w2 = experts[e]
                h = F.silu(F.linear(cur, w1)) * F.linear(cur, w3)
                y = F.linear(h, w2) * rw[top_x, idx, None]
                out.index_add_(0, top_x, y)
            t1 = time.perf_counter()
            if it >= warmup:
                times.append((t1 - t0) * 1e6)
    return times


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moebench", default=os.path.join(os.path.dirname(__file__), "..", "build", "moebench"))
    ap.add_argument("--threads", type=int, default=0, help="0 = all cores")
    ap.add_argument("--iters", type=int, default=0, help="0 = 10 for decode, 3 for prefill")
    ap.add_argument("--points", default="", help="model:mode:tokens,... (default: the issue's 8 points and decode 256)")
    ap.add_argument("--out-md", default="")
    ap.add_argument("--out-json", default="")
    args = ap.parse_args()

    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
        print("SKIP: PyTorch is not importable (%s); on Debian: apt-get install python3-torch" % e)
        return 0

    points = DEFAULT_POINTS
    if args.points:
        points = []
        for p in args.points.split(","):
            m, mode, t = p.split(":")
            points.append((m, mode, int(t)))
    threads = args.threads or os.cpu_count()
    tmp = tempfile.mkdtemp(prefix="moebench-vs-torch-")
    rows = []
    flush_buf = None
    for model, mode, tokens in points:
        iters = args.iters or (3 if mode == "prefill" else 10)
        warmup = 1 if mode == "prefill" else 2
        rpath = os.path.join(tmp, "routing-%s-%s-%d.safetensors" % (model, mode, tokens))
        cmd = [args.moebench, "bench", "moe", "--model", model, "--mode", mode, "--tokens", str(tokens),
               "--threads", str(threads), "--iters", str(iters), "--warmup", str(warmup), "--format", "json",
               "--dump-routing", rpath]
        row = {"model": model, "mode": mode, "tokens": tokens, "command": " ".join(cmd)}
        print("== %s %s %d: %s" % (model, mode, tokens, " ".join(cmd)), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            row["moebench_error"] = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
            print("   moebench did not run: " + row["moebench_error"], flush=True)
            rows.append(row)
            continue
        mj = json.loads(p.stdout)
        row["moebench"] = mj
        row["moebench_us"] = mj["time"]["block"]["p50_us"]
        row["floor_us"] = mj["floor"]["floor_us"]
        row["bound"] = mj["floor"]["bound"]
        row["ratio_floor"] = row["moebench_us"] / row["floor_us"]
        # Against the read passes next to each iteration (absent with --warm-cache or an older binary).
        adj = mj["ratio_to_floor"].get("adjacent_passes")
        if adj:
            row["ratio_adjacent"] = adj["p50"]
        # torch runs with the OpenBLAS kernels moebench ran with (torch's generic BLAS is OpenBLAS here).
        if mj.get("openblas_coretype_env") and "OPENBLAS_CORETYPE" not in os.environ:
            # OpenBLAS reads it when it loads; torch is imported already, so re-run this script once with it set.
            os.environ["OPENBLAS_CORETYPE"] = mj["openblas_coretype_env"]
            print("   re-executing with OPENBLAS_CORETYPE=%s so that torch's BLAS uses the same kernels"
                  % os.environ["OPENBLAS_CORETYPE"], flush=True)
            os.execv(sys.executable, [sys.executable] + sys.argv)
        tensors, meta = read_safetensors(rpath)
        dt, shape, raw = tensors["topk_ids"]
        ids = np.frombuffer(raw, dtype=np.int32).reshape(shape).copy()
        dt, shape, raw = tensors["topk_weights"]
        wts = np.frombuffer(raw, dtype=np.float32).reshape(shape).copy()
        cfg = {"H": int(meta["hidden_size"]), "I": int(meta["expert_intermediate_size"]),
               "E": int(meta["num_experts"]), "k": int(meta["top_k"])}
        need = 4.0 * cfg["E"] * 3 * cfg["H"] * cfg["I"] + 4.0 * tokens * (cfg["H"] * 4 + cfg["E"])
        need += 4.0 * tokens * cfg["k"] * (3 * cfg["I"] + 2 * cfg["H"])  # per-expert temporaries, upper bound
        avail = meminfo_available_bytes()
        if need > 0.85 * avail:
            row["torch_error"] = "does not fit: needs %.1f GiB, %.1f GiB available" % (need / 2**30, avail / 2**30)
            print("   torch: " + row["torch_error"], flush=True)
            rows.append(row)
            continue
        if flush_buf is None:
            flush_buf = torch.ones(int(1.0 * 2**30 / 4))  # 1 GiB, larger than the LLC
        t = torch_block(torch, F, cfg, ids, wts, threads, iters, warmup, flush_buf)
        row["torch_us"] = median(t)
        row["torch_ratio"] = row["torch_us"] / row["moebench_us"]
        print("   moebench %.1f ms, floor %.1f ms (%s), moebench/floor %.2f, torch %.1f ms, torch/moebench %.2f"
              % (row["moebench_us"] / 1e3, row["floor_us"] / 1e3, row["bound"], row["ratio_floor"],
                 row["torch_us"] / 1e3, row["torch_ratio"]), flush=True)
        rows.append(row)

    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    info = {"date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": machine(),
            "loadavg_at_end": load, "torch": torch.__version__, "threads": threads,
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""), "command": " ".join(sys.argv)}
    # The ceilings of each point's own run: on a shared machine they drift, and a ratio means something only
    # against them.
    # moebench/floor: against the run's best read pass; "next to each iteration": each iteration against the
    # evicting read passes just before and after it, which follows a neighbour's load (see bench/README.md).
    lines = ["| model | mode | tokens | moebench ms | floor ms (bound) | read GB/s, sgemm GFLOP/s | moebench/floor "
             "| moebench/floor, read next to each iteration | torch ms | torch/moebench |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if "moebench_us" not in r:
            lines.append("| %s | %s | %d | not run: %s | | | | | | |" % (r["model"], r["mode"], r["tokens"],
                                                                  r.get("moebench_error", "")))
            continue
        torch_cells = ("%.1f | %.2f" % (r["torch_us"] / 1e3, r["torch_ratio"])) if "torch_us" in r else \
            ("%s | " % r.get("torch_error", ""))
        ceil = r.get("moebench", {}).get("ceilings", {})
        rates = "%.1f, %.0f" % (ceil["read_bandwidth"]["value"] / 1e9, ceil["sgemm"]["value"] / 1e9) \
            if "read_bandwidth" in ceil and "sgemm" in ceil else ""
        adjacent = "%.2f" % r["ratio_adjacent"] if "ratio_adjacent" in r else ""
        lines.append("| %s | %s | %d | %.1f | %.1f (%s) | %s | %.2f | %s | %s |" % (
            r["model"], r["mode"], r["tokens"], r["moebench_us"] / 1e3, r["floor_us"] / 1e3, r["bound"], rates,
            r["ratio_floor"], adjacent, torch_cells))
    table = "\n".join(lines)
    print()
    print(table)
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump({"info": info, "points": rows}, f, indent=2)
            f.write("\n")
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write("# CPU MoE block: moebench vs PyTorch eager (fp32)\n\n")
            f.write("- date (UTC): %s\n- machine: %s, %s cores, %s GiB RAM, Linux %s\n" % (
                info["date_utc"], info["machine"]["cpu"], info["machine"]["cores"], info["machine"]["memory_gib"],
                info["machine"]["kernel"]))
            f.write("- threads: %d (moebench --threads and torch.set_num_threads); torch %s; OPENBLAS_CORETYPE=%s\n" % (
                threads, torch.__version__, info["openblas_coretype"] or "(unset)"))
            f.write("- load average at the end: %s\n- command: `%s`\n\n" % (" ".join(load), info["command"]))
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
