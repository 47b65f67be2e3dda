#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The device check's summary (scripts/device-check.sh, last step): the card, one row per report, the targets of
issue 17 judged from numbers measured in the same run on that card, then the conformance, sanitizer and build results.

Usage: scripts/device_summary.py OUT_DIR
Reads OUT_DIR/reports/*.json, OUT_DIR/machine.txt (OS, compiler, driver), OUT_DIR/devices.json (`devices --measure`: the card and its measured copy bandwidth),
OUT_DIR/torch_peer.json, OUT_DIR/steps.log, OUT_DIR/logs/{conformance,gpu-tests,sanitize-*}.log and
OUT_DIR/build-error.txt; writes OUT_DIR/summary.md (and prints it) and, when a sanitizer ran, OUT_DIR/sanitizer.txt.
A report it cannot read or understand becomes a row saying so; the summary is always written.

How the targets are judged (each verdict needs >= 30 measured iterations, times are medians (p50), and the floor is
the copy bandwidth devices.json measured on the card the report names):
- P1, decode batch 1-64: (attention + MoE block) median time / (the weight bytes those phases read / copy bandwidth)
  <= 1.15x, judged on runs whose layers are all MoE layers (DeepSeek-V3: --first-layer 3 --layers 1). A run that also
  holds dense layers (the whole step) is shown beside, for information, with its dense MLPs in time and bytes. The
  ratio to every byte moved (weights, KV cache, activations) is shown beside each.
- P3, decode batch >= 128: router + top-k + permute + combine <= 10% of the MoE block.
- P4, CUDA graph: the replay with phase events against the replay of the same step captured without them
  (backend_info.cuda_graph.phase_event_overhead: 32 pairs, medians) within 3%; one eager run per decode shape is
  compared with the graph replay for information. A graph run that failed and was rerun eagerly (NAME-eager-rerun)
  loses its P4 (a row says so); its P1 / P3 come from the eager rerun, labelled.
- prefill: expert GEMM rate / the measured dense bf16 GEMM rate >= 0.80; the PyTorch peer's time / moebench's.
Tested without a GPU by tests/device_summary_check.py (hand-made reports and logs with known results, sim reports).
"""
import glob
import json
import os
import re
import sys

ATTN = ["attn_norm", "qkv_proj", "attention", "o_proj"]
MOE = ["ffn_norm", "router_gemm", "topk", "permute", "expert_up", "activation", "expert_down", "shared_expert",
       "unpermute_reduce"]
BODY = ATTN + MOE + ["dense_mlp"]  # every layer phase: a whole step's dense layers run dense_mlp
SMALL = ["router_gemm", "topk", "permute", "unpermute_reduce"]
DECODE_TARGET_MAX_BATCH = 64  # issue 17: "Decode batch 1-64"
MIN_ITERS = 30                # a verdict needs at least this many measured iterations (or replay pairs)
RERUN = "-eager-rerun"        # scripts/device-check.sh: a graph run that failed, rerun without cuda_graph


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


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


class Floors:
    """The card devices.json measured (name, copy bandwidth, dense bf16 GEMM rate) and the PyTorch peer's times."""

    def __init__(self, out):
        devices = load(os.path.join(out, "devices.json")) or {}
        devs = get(devices, "gpus", "devices") or get(devices, "devices") or [{}]
        self.dev0 = devs[0] if isinstance(devs, list) and devs and isinstance(devs[0], dict) else {}
        self.card = self.dev0.get("name") if isinstance(self.dev0.get("name"), str) else None
        self.copy_bw = num(get(self.dev0, "measured", "copy_bw_bytes_per_s"))
        self.gemm = num(get(self.dev0, "measured", "bf16_gemm_flops"))
        self.peer = load(os.path.join(out, "torch_peer.json")) or {}
        points = self.peer.get("points", []) if isinstance(self.peer, dict) else []
        self.peer_at = {(p.get("shape"), p.get("tokens")): p for p in points if isinstance(p, dict)}


class Run:
    """What the summary reads of one report's first run."""

    def __init__(self, name, rep):
        self.name = name
        self.rerun = name.endswith(RERUN)
        self.base = name[:-len(RERUN)] if self.rerun else name  # the configuration's own name
        run = (rep.get("runs") or [{}])[0]
        self.run = run
        self.status = run.get("status", "?")
        self.mode, self.batch = run.get("mode", ""), run.get("batch", 0) or 0
        self.model = run.get("model") or get(run, "axes", "model") or ""
        self.first_layer = get(run, "axes", "first_layer") or 0
        kinds = get(run, "layers", "kinds")
        self.kinds = kinds if isinstance(kinds, list) else []
        self.iters = num(get(run, "iterations", "measured")) or 0
        self.phases = get(run, "latency", "phases") or {}
        self.roof = get(run, "roofline", "phases") or {}
        self.info = get(run, "backend_info") or {}
        dev = self.info.get("device")
        self.card = dev.get("name") if isinstance(dev, dict) and isinstance(dev.get("name"), str) else None
        self.variant = (get(self.info, "kernel_variant", "expert_gemm") or "").split(" ")[0]
        self.attn_kernel = (get(self.info, "kernel_variant", "attention") or "").split(" ")[0].split("(")[0]
        self.graph = self.info.get("cuda_graph") if isinstance(self.info.get("cuda_graph"), dict) else None
        self.step_p50 = num(get(run, "latency", "step", "p50_us"))
        self.check = run.get("check") or rep.get("check")

    def p50(self, p):
        ph = self.phases.get(p) or {}
        v = num(ph.get("p50_us"))
        return v if v is not None else (num(ph.get("mean_us")) or 0.0)

    def counted(self, p, key):
        return num((self.roof.get(p) or {}).get(key)) or 0.0

    def moe_us(self):
        return sum(self.p50(p) for p in MOE)

    def small_us(self):
        return sum(self.p50(p) for p in SMALL)

    def shape_key(self):
        """Runs of the same decode shape (the eager run and the graph run it is compared with)."""
        return (self.model, self.mode, self.batch, self.first_layer, len(self.kinds), self.variant)


def judge(run, floors, ok, needs_floor=True):
    """A verdict: meets / MISSES, or why there is none (too few iterations, another card than devices.json's)."""
    if run.iters < MIN_ITERS:
        return "no verdict: %d < %d iterations" % (run.iters, MIN_ITERS)
    if needs_floor and floors.card and run.card and run.card != floors.card:
        return "no verdict: run on %s, floor measured on %s" % (run.card, floors.card)
    return "meets" if ok else "MISSES"


def summarize_run(r, floors, rows, ratios):
    """One report: its row, and the targets it feeds (appended to rows / ratios)."""
    card = r.card or "?"
    chk_s = ""
    if isinstance(r.check, dict):
        rel = r.check.get("rel_l2_error")
        chk_s = "%s rel_l2=%s ids_mismatched=%s near_tie=%s" % (
            "pass" if r.check.get("passed") else "FAIL", "%.2e" % rel if num(rel) is not None else "?",
            r.check.get("ids_mismatched", "?"), r.check.get("ids_near_tie", "?"))
    moe = r.moe_us()
    layers = "%d from %d" % (len(r.kinds), r.first_layer) if r.kinds else ""
    rows.append((r.name, r.status, card, r.mode, r.batch, layers, r.iters,
                 "%.1f" % r.step_p50 if r.step_p50 else "", "%.1f" % moe,
                 "%.1f" % (r.p50("expert_up") + r.p50("expert_down")), ("%.1f%%" % (100 * r.small_us() / moe)) if moe else "",
                 r.variant, r.attn_kernel, chk_s))
    if r.status != "ok":
        return
    # The -attnsplit runs only feed the attention comparison, not the targets (a non-default kernel); --check runs
    # copy tensors to the host and are not timed for the targets.
    if r.base.startswith("check-") or r.base.endswith("-attnsplit"):
        return
    label = " (eager rerun: the graph run failed)" if r.rerun else "" if r.graph else " (eager)"
    if r.mode == "decode" and "coldl2" not in r.base:
        decode_floor(r, floors, card, label, ratios)
    if r.mode == "prefill" and floors.gemm:
        t = r.p50("expert_up") + r.p50("expert_down")
        f = r.counted("expert_up", "flops") + r.counted("expert_down", "flops")
        if t > 0 and f > 0:
            x = f / (t * 1e-6) / floors.gemm
            ratios.append((r.name, card, "prefill: expert GEMM rate / dense cuBLAS bf16 rate", "%.2f" % x, ">= 0.80",
                           judge(r, floors, x >= 0.8)))
    tokens = r.run.get("num_tokens") or (r.batch if r.mode == "decode" else None)
    p = floors.peer_at.get((r.model, tokens))
    if p and num(p.get("grouped_mm_us")) and moe > 0:
        x = p["grouped_mm_us"] / moe
        prefill = r.mode == "prefill"
        ratios.append((r.name, card, "MoE block: torch._grouped_mm time / moebench time (same shape, %s tokens)" % tokens,
                       "%.2f" % x, ">= 1.0 (prefill)" if prefill else "(info)",
                       judge(r, floors, x >= 1.0, needs_floor=False) if prefill else ""))
    if r.mode == "decode" and r.batch >= 128 and moe > 0:
        x = r.small_us() / moe
        ratios.append((r.name, card, "P3: router + topk + permute + combine / MoE block" + label, "%.1f%%" % (100 * x),
                       "<= 10%", judge(r, floors, x <= 0.10, needs_floor=False)))
    if r.graph:
        graph_targets(r, floors, card, ratios)


def decode_floor(r, floors, card, label, ratios):
    """P1: the decode step body against the weight bytes it reads at the card's measured copy bandwidth."""
    t = sum(r.p50(p) for p in BODY)
    weight_bytes = sum(r.counted(p, "weight_bytes") for p in BODY)
    all_bytes = sum(r.counted(p, "bytes") for p in BODY)
    what = "P1 decode: (attention + MoE block) / (weight bytes / copy bandwidth)" + label
    if not floors.copy_bw:
        ratios.append((r.name, card, what, "n/a", "<= 1.15x", "no verdict: devices.json has no measured copy bandwidth"))
        return
    if not (t > 0 and weight_bytes > 0):
        return
    floor_w = weight_bytes / floors.copy_bw * 1e6
    value = "%.2fx" % (t / floor_w)
    if all_bytes > 0:
        value += " (every byte moved: %.2fx)" % (t / (all_bytes / floors.copy_bw * 1e6))
    dense = sum(1 for k in r.kinds if k == "dense")
    if r.batch > DECODE_TARGET_MAX_BATCH:
        ratios.append((r.name, card, what, value, "(info: batch > %d)" % DECODE_TARGET_MAX_BATCH, ""))
    elif dense:
        ratios.append((r.name, card, what.replace("(attention + MoE block)", "whole step body"), value,
                       "(info: %d dense + %d MoE layers; P1 is judged on the MoE layer alone)" % (
                           dense, len(r.kinds) - dense), ""))
    else:
        ratios.append((r.name, card, what, value, "<= 1.15x", judge(r, floors, t / floor_w <= 1.15)))


def graph_targets(r, floors, card, ratios):
    """P4 from the replay pairs with / without phase events; the phase sum against the replay, for information."""
    g = r.graph
    o = g.get("phase_event_overhead") or {}
    pairs = num(o.get("runs")) or 0
    with_us, without_us = num(o.get("replay_with_phase_events_us_median")), num(o.get("replay_without_phase_events_us_median"))
    what = "P4: graph replay with phase events / without - 1 (medians)"
    if pairs and with_us and without_us:
        d = with_us / without_us - 1
        verdict = ("no verdict: %d < %d replay pairs" % (pairs, MIN_ITERS)) if pairs < MIN_ITERS else \
            ("meets" if abs(d) <= 0.03 else "MISSES")
        ratios.append((r.name, card, what, "%+.1f%% (%.1f / %.1f us, %d pairs)" % (100 * d, with_us, without_us, pairs),
                       "within 3%", verdict))
    elif num(g.get("replays")):
        ratios.append((r.name, card, what, "not measured: %s" % (o.get("why") or "no pairs"), "within 3%", ""))
    replay = num(g.get("replay_us_median")) or num(g.get("replay_us_mean"))
    phase_sum = num(g.get("phase_sum_us_median")) or num(g.get("phase_sum_us_mean"))
    if replay and phase_sum:
        ratios.append((r.name, card, "phase sum / graph replay - 1 (the same replay; info)",
                       "%+.1f%%" % (100 * (phase_sum / replay - 1)), "(info)", ""))


def eager_vs_graph(runs, ratios):
    """Each eager run against the graph run of its shape that ran the same expert kernel: the graph's gain (info)."""
    graphs = {r.shape_key(): r for r in runs.values() if r.status == "ok" and r.graph and num(r.graph.get("replays"))}
    for r in runs.values():
        if r.status != "ok" or r.graph or r.rerun or not r.name.endswith("-eager") or not r.step_p50:
            continue
        g = graphs.get(r.shape_key())
        replay = g and (num(g.graph.get("replay_us_median")) or num(g.graph.get("replay_us_mean")))
        if replay:
            ratios.append((r.name, r.card or "?", "eager step / graph replay of %s (medians; info)" % g.name,
                           "%.2fx (%.1f / %.1f us)" % (r.step_p50 / replay, r.step_p50, replay), "(info)", ""))


def lost_graph_runs(runs, ratios):
    for r in runs.values():
        if r.rerun:
            base = r.name[:-len(RERUN)]
            ratios.append((base, r.card or "?", "P4: graph replay with phase events / without - 1 (medians)",
                           "lost: the graph run failed (steps.log, logs/run-%s.log); rerun eagerly as %s" % (base, r.name),
                           "within 3%", "LOST"))


# ---- the GPU tests, conformance, sanitizer and build ------------------------------------------------------------------

CATCH_RESULT = re.compile(r"^(All tests passed.*|test cases:.*|assertions:.*|moebench_tests_cuda: SKIPPED.*)$", re.M)


def step_status(out, step):
    """The last steps.log line of a step, without its time stamp ("ok gpu-tests (12s)", "FAIL sanitize-racecheck:
    timed out ..."), or None."""
    text = read_text(os.path.join(out, "steps.log")) or ""
    found = None
    for line in text.splitlines():
        if re.search(r"\] (ok|FAIL|SKIP)\s+%s\b" % re.escape(step), line):
            found = re.sub(r"\s+", " ", line.split("] ", 1)[1]).strip()
    return found


def tests_section(out):
    lines = ["## GPU tests", ""]
    for step, what in [("gpu-tests", "moebench_tests_cuda ~[conformance]"), ("conformance", "moebench_tests_cuda [conformance]")]:
        log = read_text(os.path.join(out, "logs", step + ".log"))
        status = step_status(out, step)
        if log is None and status is None:
            lines.append("- %s: did not run" % what)
            continue
        result = "; ".join(m.strip() for m in CATCH_RESULT.findall(log or "")) or "no Catch2 summary (see logs/%s.log)" % step
        lines.append("- %s: %s (%s)" % (what, result, status or "no step status"))
    lines.append("")
    return lines


FIELD = re.compile(r"(\w+)=(\S+)")


def conformance_section(out):
    """The per-case lines of tests/conformance_cases.hpp ("conformance-check ...", "conformance-step ...")."""
    log = read_text(os.path.join(out, "logs", "conformance.log"))
    lines = ["## Conformance on the GPU (tiny models x variants; cuda --check, and the whole cuda step against cpu)", ""]
    if log is None:
        return lines + ["did not run", ""]
    for kind, err_key, what in [("conformance-check", "rel_l2", "--check against the fp32 reference"),
                                ("conformance-step", "moe_out_rel_l2", "whole step against the cpu step")]:
        cases = []
        for line in log.splitlines():
            if line.startswith(kind + " "):
                fields = dict(FIELD.findall(line.split(" failure=")[0]))
                fields["failure"] = line.split(" failure=", 1)[1] if " failure=" in line else ""
                cases.append(fields)
        failed = [c for c in cases if c.get("passed") != "1"]
        errs = [float(c[err_key]) for c in cases if re.match(r"^[-0-9.e+]+$", c.get(err_key, ""))]
        worst = ("worst %s %.2e" % (err_key, max(errs))) if errs else ""
        lines.append("- %s: %d cases, %d passed, %d failed%s" % (what, len(cases), len(cases) - len(failed), len(failed),
                                                                 ("; " + worst) if worst else ""))
        for c in failed[:20]:
            lines.append("  - FAIL %s %s: %s" % (c.get("model", "?"), c.get("variant", "?"),
                                                 c.get("failure") or " ".join("%s=%s" % kv for kv in c.items()
                                                                              if kv[0] not in ("failure",))))
    skips = sorted(set(re.findall(r"conformance: \w+(?: vs \w+)? skips ([\w.-]+)", log)))
    if skips:
        lines.append("- skipped models (the backend refuses them by name): " + ", ".join(skips))
    lines.append("")
    return lines


SANITIZER_SUMMARY = re.compile(r"^=+ (ERROR SUMMARY:.*|RACECHECK SUMMARY:.*)$", re.M)


def sanitizer_section(out):
    """compute-sanitizer memcheck and racecheck over the [sanitize] tests: the summary lines, the findings to
    sanitizer.txt."""
    lines = ["## compute-sanitizer over the small-shape GPU tests ([sanitize])", ""]
    detail = []
    for tool in ("memcheck", "racecheck"):
        step = "sanitize-" + tool
        log = read_text(os.path.join(out, "logs", step + ".log"))
        status = step_status(out, step)
        if log is None:
            lines.append("- %s: did not run%s" % (tool, (" (%s)" % status) if status else ""))
            continue
        summaries = SANITIZER_SUMMARY.findall(log)
        findings = [l for l in log.splitlines() if l.startswith("=========") and not SANITIZER_SUMMARY.match(l)
                    and l.strip("= ").strip() not in ("", "COMPUTE-SANITIZER")]
        lines.append("- %s: %s; %d finding lines (%s)" % (
            tool, summaries[-1] if summaries else "no summary line (timed out, or the tool could not run: see the log)",
            len(findings), status or "no step status"))
        detail += ["# %s: %s" % (tool, summaries[-1] if summaries else "no summary line"), "# step: %s" % status]
        detail += findings[:200] if findings else [l for l in log.splitlines()[-15:]]
        detail.append("")
    if detail:
        with open(os.path.join(out, "sanitizer.txt"), "w") as f:
            f.write("\n".join(detail) + "\n")
        lines.append("- findings: sanitizer.txt")
    lines.append("")
    return lines


def build_section(out):
    text = read_text(os.path.join(out, "build-error.txt"))
    if text is None:
        return []
    tail = text.strip().splitlines()[-40:]
    return ["## Build FAILED (build-error.txt; the runs did not happen)", "", "```"] + tail + ["```", ""]


def write_summary(out, floors, runs_rows, ratios, extra):
    peer = floors.peer if isinstance(floors.peer, dict) else {}
    cards = sorted({row[2] for row in runs_rows if len(row) > 2 and row[2] not in ("?", None)})
    lines = ["# moebench device check", "",
             "Card: %s (devices.json); the runs name theirs: %s. Measured on it: copy bandwidth %s GB/s (read + write), "
             "bf16 GEMM %s TFLOP/s." % (
                 floors.card or "unknown", ", ".join(cards) or "none",
                 "%.0f" % (floors.copy_bw / 1e9) if floors.copy_bw else "n/a",
                 "%.0f" % (floors.gemm / 1e12) if floors.gemm else "n/a"), ""]
    machine = read_text(os.path.join(out, "machine.txt")) or ""
    facts = [l.strip() for l in machine.splitlines() if l.split(":")[0] in ("os", "compiler", "driver", "memory")]
    if facts:
        lines += ["Machine: " + "; ".join(facts) + " (machine.txt).", ""]
    lines += build_section(out)
    lines += ["Times are medians (p50) over the measured steps (CUDA events, us). moe = the MoE phases of the layers run; "
              "small = router_gemm + topk + permute + unpermute_reduce as a share of moe. Verdicts need >= %d measured "
              "iterations." % MIN_ITERS, "",
              "| run | status | card | mode | batch | layers | iters | step_us | moe_us | expert_gemm_us | small/moe "
              "| expert_gemm | attention | check |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in runs_rows]
    lines += ["", "## Targets (issue 17), from this run's measurements on the card named", "",
              "| run | card | ratio | value | target | verdict |", "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in ratios]
    if not ratios:
        lines.append("| (none: no ok run with its floor measured) | | | | | |")
    lines += [""] + extra
    lines += ["## PyTorch peers (same shapes and routing semantics)", ""]
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
    rows, ratios, runs = [], [], {}
    for path in sorted(glob.glob(os.path.join(out, "reports", "*.json"))):
        name = os.path.basename(path)[:-len(".json")]
        rep = load(path)
        if not isinstance(rep, dict):
            rows.append((name, "unreadable"))
            continue
        try:
            r = Run(name, rep)
            summarize_run(r, floors, rows, ratios)
            runs[name] = r
        except (TypeError, ValueError, AttributeError, IndexError, KeyError) as e:
            rows.append((name, "not understood: %s: %s" % (type(e).__name__, e)))
    eager_vs_graph(runs, ratios)
    lost_graph_runs(runs, ratios)
    for name, r in sorted(runs.items()):  # split-context vs tensor-core attention, the same run otherwise
        if not name.endswith("-attnsplit") or r.status != "ok":
            continue
        base = runs.get(name[:-len("-attnsplit")])
        split_us = r.p50("qkv_proj") + r.p50("attention")  # MLA's expansion sits in qkv_proj
        if base and base.status == "ok" and split_us and base.p50("qkv_proj") + base.p50("attention"):
            ratios.append((base.name, base.card or "?", "qkv_proj + attention: split-context time / tensor-core kernel "
                           "time (same run otherwise)", "%.2fx" % (split_us / (base.p50("qkv_proj") + base.p50("attention"))),
                           "(info)", ""))
    extra = tests_section(out) + conformance_section(out) + sanitizer_section(out)
    print(write_summary(out, floors, rows, ratios, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
