#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The device check's summary (scripts/device-check.sh, last step): one row per report, then the ratios of issue 17,
each from numbers measured in the same run (the floors come from devices.json: `devices --measure`).

Usage: scripts/device_summary.py OUT_DIR
Reads OUT_DIR/reports/*.json, OUT_DIR/devices.json and OUT_DIR/torch_peer.json; writes OUT_DIR/summary.md and prints
it. A report it cannot read or understand becomes a row saying so; the summary is always written.
Tested without a GPU by tests/device_summary_check.py (hand-made reports with known ratios, and sim-backend reports).
"""
import glob
import json
import os
import sys

ATTN = ["attn_norm", "qkv_proj", "attention", "o_proj"]
MOE = ["ffn_norm", "router_gemm", "topk", "permute", "expert_up", "activation", "expert_down", "shared_expert",
       "unpermute_reduce"]
SMALL = ["router_gemm", "topk", "permute", "unpermute_reduce"]
DECODE_TARGET_MAX_BATCH = 64  # issue 17: "Decode batch 1-64"


def get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def verdict(ok):
    return "meets" if ok else "MISSES"


class Floors:
    """The measured ceilings of the device (devices.json) and the PyTorch peer's times (torch_peer.json)."""

    def __init__(self, out):
        devices = load(os.path.join(out, "devices.json")) or {}
        devs = get(devices, "gpus", "devices") or get(devices, "devices") or [{}]
        self.dev0 = devs[0] if isinstance(devs, list) and devs and isinstance(devs[0], dict) else {}
        self.copy_bw = get(self.dev0, "measured", "copy_bw_bytes_per_s")
        self.gemm = get(self.dev0, "measured", "bf16_gemm_flops")
        self.peer = load(os.path.join(out, "torch_peer.json")) or {}
        points = self.peer.get("points", []) if isinstance(self.peer, dict) else []
        self.peer_at = {(p.get("shape"), p.get("tokens")): p for p in points if isinstance(p, dict)}


def summarize_run(name, rep, floors, rows, ratios, attn_us):
    """One report: its row, and the ratios it feeds (appended to rows / ratios; attn_us[name] for the attention
    comparison)."""
    run = (rep.get("runs") or [{}])[0]
    ph = get(run, "latency", "phases") or {}
    roof = get(run, "roofline", "phases") or {}

    def mean(p):
        return (ph.get(p) or {}).get("mean_us") or 0.0

    def counted(p, key):
        return (roof.get(p) or {}).get(key) or 0.0

    step = get(run, "latency", "step", "mean_us")
    moe = sum(mean(p) for p in MOE)
    small = sum(mean(p) for p in SMALL)
    info = get(run, "backend_info") or {}
    variant = (get(info, "kernel_variant", "expert_gemm") or "").split(" ")[0]
    attn_kernel = (get(info, "kernel_variant", "attention") or "").split(" ")[0].split("(")[0]
    chk = get(run, "check") or get(rep, "check")
    chk_s = ""
    if isinstance(chk, dict):
        rel = chk.get("rel_l2_error")
        chk_s = "%s rel_l2=%s ids_mismatched=%s near_tie=%s" % (
            "pass" if chk.get("passed") else "FAIL", "%.2e" % rel if isinstance(rel, (int, float)) else "?",
            chk.get("ids_mismatched", "?"), chk.get("ids_near_tie", "?"))
    mode, batch, status = run.get("mode", ""), run.get("batch", 0) or 0, run.get("status", "?")
    rows.append((name, status, mode, batch, "%.1f" % step if step else "", "%.1f" % moe,
                 "%.1f" % (mean("expert_up") + mean("expert_down")), ("%.1f%%" % (100 * small / moe)) if moe else "",
                 variant, attn_kernel, chk_s))
    if status != "ok":
        return
    attn_us[name] = mean("qkv_proj") + mean("attention")  # MLA's expansion sits in qkv_proj
    # The -attnsplit runs only feed the attention comparison, not the targets (a non-default kernel); --check runs
    # copy tensors to the host and are not timed for the targets.
    if name.startswith("check-") or name.endswith("-attnsplit"):
        return
    shape = "mixtral-8x7b" if "mixtral" in name else "deepseek-v3" if "deepseek-v3" in name else None
    if mode == "decode" and "coldl2" not in name and floors.copy_bw:
        # The floor counts every byte the block must move (the roofline's counted `bytes`: weights, the KV cache the
        # attention reads, activations): weight bytes alone would charge the KV-cache reads (~9% of a Mixtral
        # layer at batch 64, context 1024) to the kernels. The weight-only ratio is shown beside it.
        all_bytes = sum(counted(p, "bytes") for p in ATTN + MOE)
        weight_bytes = sum(counted(p, "weight_bytes") for p in ATTN + MOE)
        t = sum(mean(p) for p in ATTN + MOE)
        floor_us = all_bytes / floors.copy_bw * 1e6
        if floor_us > 0 and weight_bytes > 0:
            in_range = batch <= DECODE_TARGET_MAX_BATCH
            ratios.append((name, "decode: (attention + MoE block) / (bytes moved / copy bandwidth)",
                           "%.2fx (weights only: %.2fx)" % (t / floor_us, t / (weight_bytes / floors.copy_bw * 1e6)),
                           "<= 1.15x" if in_range else "(info: batch > %d)" % DECODE_TARGET_MAX_BATCH,
                           verdict(t / floor_us <= 1.15) if in_range else ""))
    if mode == "prefill" and floors.gemm:
        t = mean("expert_up") + mean("expert_down")
        f = counted("expert_up", "flops") + counted("expert_down", "flops")
        if t > 0 and f > 0:
            r = f / (t * 1e-6) / floors.gemm
            ratios.append((name, "prefill: expert GEMM rate / dense cuBLAS bf16 rate", "%.2f" % r, ">= 0.80",
                           verdict(r >= 0.8)))
    tokens = run.get("num_tokens") or (batch if mode == "decode" else None)
    p = floors.peer_at.get((shape, tokens))
    if p and p.get("grouped_mm_us") and moe > 0:
        r = p["grouped_mm_us"] / moe
        ratios.append((name, "MoE block: torch._grouped_mm time / moebench time (same shape, %s tokens)" % tokens,
                       "%.2f" % r, ">= 1.0 (prefill)" if mode == "prefill" else "(info)",
                       verdict(r >= 1.0) if mode == "prefill" else ""))
    if mode == "decode" and batch >= 128 and moe > 0:
        ratios.append((name, "router + topk + permute + combine / MoE block", "%.1f%%" % (100 * small / moe),
                       "<= 10%", verdict(small / moe <= 0.10)))
    g = info.get("cuda_graph")
    if isinstance(g, dict) and g.get("replays"):
        replay_us, sum_us = g.get("replay_us_mean") or 0, g.get("phase_sum_us_mean") or 0
        if replay_us > 0:
            d = sum_us / replay_us - 1
            ratios.append((name, "phase sum / graph replay - 1", "%+.1f%%" % (100 * d), "within 3%",
                           verdict(abs(d) <= 0.03)))
        o = g.get("phase_event_overhead") or {}
        if o.get("runs"):
            ratios.append((name, "phase events' cost (graph with / without them - 1)",
                           "%+.1f%% (%.1f us)" % (100 * o.get("overhead_fraction", 0), o.get("overhead_us", 0)),
                           "(info)", ""))


def write_summary(out, floors, rows, ratios):
    peer, dev0 = floors.peer if isinstance(floors.peer, dict) else {}, floors.dev0
    lines = ["# moebench device check", "",
             "Device: %s. Measured copy bandwidth: %s GB/s; bf16 GEMM: %s TFLOP/s (source: measured)." % (
                 dev0.get("name", "unknown"), "%.0f" % (floors.copy_bw / 1e9) if floors.copy_bw else "n/a",
                 "%.0f" % (floors.gemm / 1e12) if floors.gemm else "n/a"), "",
             "Times are means over measured steps (CUDA events, us). moe = the MoE phases of all layers run; "
             "small = router_gemm + topk + permute + unpermute_reduce as a share of moe.", "",
             "| run | status | mode | batch | step_us | moe_us | expert_gemm_us | small/moe | expert_gemm | attention "
             "| check |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    lines += ["", "## Targets (issue 17), from this run's measurements", "",
              "| run | ratio | value | target | verdict |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in ratios]
    if not ratios:
        lines.append("| (none: no ok run with its floor measured) | | | | |")
    lines += ["", "## PyTorch peers (same shapes and routing semantics)", ""]
    if peer.get("skipped"):
        lines.append("skipped: %s" % peer["skipped"])
    elif floors.peer_at:
        lines += ["| shape | tokens | eager_loop_us | grouped_mm_us |", "|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s |" % (p.get("shape"), p.get("tokens"), p.get("eager_loop_us"),
                                            p.get("grouped_mm_us")) for p in floors.peer_at.values()]
    else:
        lines.append("no result")
    lines += ["", "Steps: see steps.log.", ""]
    text = "\n".join(lines)
    tmp = os.path.join(out, "summary.md.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(out, "summary.md"))
    return text


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: scripts/device_summary.py OUT_DIR (a folder holding reports/*.json)", file=sys.stderr)
        return 2
    out = argv[1]
    floors = Floors(out)
    rows, ratios, attn_us = [], [], {}  # attn_us: run -> mean qkv_proj + attention (the split vs tensor-core runs)
    for path in sorted(glob.glob(os.path.join(out, "reports", "*.json"))):
        name = os.path.basename(path)[:-len(".json")]
        rep = load(path)
        if not isinstance(rep, dict):
            rows.append((name, "unreadable"))
            continue
        try:
            summarize_run(name, rep, floors, rows, ratios, attn_us)
        except (TypeError, ValueError, AttributeError, IndexError, KeyError) as e:
            rows.append((name, "not understood: %s: %s" % (type(e).__name__, e)))
    for name in sorted(attn_us):
        base = name[:-len("-attnsplit")] if name.endswith("-attnsplit") else None
        if base and attn_us.get(base) and attn_us[name]:
            ratios.append((base, "qkv_proj + attention: split-context time / tensor-core kernel time (same run "
                           "otherwise)", "%.2fx" % (attn_us[name] / attn_us[base]), "(info)", ""))
    print(write_summary(out, floors, rows, ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
