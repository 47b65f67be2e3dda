#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The conformance case list: one tiny model per shipped MoE model (its family's every semantic switch kept, widths
cut), and the variants each runs under (tests/data/conformance/cases.json). Three consumers run the same list:
tests/conformance_cases.hpp for both C++ test binaries (moebench_tests_cpu on cpu; moebench_tests_cuda on cuda, and
the whole cuda step against the cpu step; --check against the fp32 reference), tests/dump_check.py (the dump
recomputed by scripts/check_moe_dump.py).

Usage: tests/conformance.py write ROOT    regenerate tests/data/conformance/models/ from configs/models/
       tests/conformance.py check ROOT    exit 1 when the committed models differ from what write would make
       tests/conformance.py perf ROOT MOEBENCH [BACKEND] [ITERS]
                                          the perf mode: every case timed (default cpu, 20 iterations), one line
                                          each (step p50 and p95 in us, tokens/s, the MoE block's share); exit 1
                                          when a case fails to run
"""
import json
import os
import subprocess
import sys


def shrink(m):
    """A tiny model of m's family: widths cut, every semantic switch kept."""
    t = json.loads(json.dumps(m))
    t["name"] = "tiny-" + m["name"]
    t["unconfirmed"] = True
    t["notes"] = "Shrunk by tests/dump_check.py from " + m["name"]
    t["vocab_size"], t["hidden_size"], t["num_layers"], t["max_position_embeddings"] = 128, 64, 2, 256
    t["num_mtp_layers"] = 0
    dense = m.get("dense_layers", [])
    t["dense_layers"] = [0] if 0 in dense else []  # layer 1 is always a MoE layer
    if m.get("sliding_layers"):
        t["sliding_layers"] = [0]
    if m.get("dense_intermediate_size", 0):
        t["dense_intermediate_size"] = 96
    a = t["attention"]
    if a["kind"] == "mla":
        a.update(num_heads=4, num_kv_heads=4, head_dim=12, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                 v_head_dim=8)
        if a.get("q_lora_rank", 0):
            a["q_lora_rank"] = 32
    else:
        a.update(num_kv_heads=4 if a["num_kv_heads"] == a["num_heads"] else 2, num_heads=4, head_dim=16)
        if a.get("rotary_dim", 0):
            a["rotary_dim"] = 8  # partial RoPE kept partial
    if a.get("indexer_heads", 0):
        a.update(indexer_heads=2, indexer_head_dim=8)
    if a.get("sliding_window", 0):
        a["sliding_window"] = 8
    if a.get("attention_chunk", 0):
        a["attention_chunk"] = 8
    if m.get("linear_attention_layers"):  # hybrid: layer 0 linear attention, layer 1 softmax attention + MoE
        la = t["linear_attention"]
        if la["kind"] == "lightning":
            la.update(num_key_heads=4, num_value_heads=4, key_head_dim=16, value_head_dim=16)
        else:
            la.update(num_key_heads=2, num_value_heads=4, key_head_dim=8, value_head_dim=8)
        t["linear_attention_layers"] = [0]
    moe = t["moe"]
    groups = max(1, moe.get("num_groups", 1))
    moe["num_experts"] = min(moe["num_experts"], 32)
    assert moe["num_experts"] % groups == 0 and moe["top_k"] <= moe["num_experts"]
    moe["expert_intermediate_size"] = 32
    if moe["routing"] == "sparsemixer":
        moe["router_jitter_noise"] = 0.1  # a wider band than PhiMoE's 0.01, so that other logits fall inside it
    if moe.get("shared_intermediate_size", 0):
        moe["shared_intermediate_size"] = 48
    return t


def cases(root):
    """The variants: run config fields per case (tests/data/conformance/cases.json)."""
    with open(os.path.join(root, "tests", "data", "conformance", "cases.json")) as f:
        return json.load(f)["variants"]


def variant_flags(variant):
    """A variant's run config fields as moebench run flags (--seq-len for seq_len, ...)."""
    flags = []
    for key, value in variant.items():
        if key == "name":
            continue
        flags += ["--" + key.replace("_", "-"), str(value)]
    return flags


def expected_models(root):
    """file name -> the tiny model of every configs/models/*.json with experts."""
    out = {}
    models_dir = os.path.join(root, "configs", "models")
    for fname in sorted(os.listdir(models_dir)):
        with open(os.path.join(models_dir, fname)) as f:
            m = json.load(f)
        if m.get("moe", {}).get("num_experts", 0) > 0:
            out["tiny-" + fname] = shrink(m)
    return out


def text(model):
    return json.dumps(model, indent=2, sort_keys=True) + "\n"


def perf(root, moebench, backend, iters):
    """Every case through `moebench run` with `iters` measured steps; returns the number of failed cases."""
    models_dir = os.path.join(root, "tests", "data", "conformance", "models")
    failed = 0
    print(f"{'model':34s} {'variant':10s} {'p50 us':>10s} {'p95 us':>10s} {'tokens/s':>12s} {'moe share':>9s}")
    for model in sorted(os.listdir(models_dir)):
        for v in cases(root):
            cmd = [moebench, "run", "--model", os.path.join(models_dir, model), "--backend", backend, "--layers", "2",
                   "--warmup", "2", "--iters", str(iters), "--seed", "7", "--json", "-"] + variant_flags(v)
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print(f"{model:34s} {v['name']:10s} failed: {r.stderr.strip()[-200:]}")
                continue
            run = json.loads(r.stdout)["runs"][0]
            step = run["latency"]["step"]
            groups = run["latency"]["groups"]
            moe = sum(groups.get(g, {}).get("share", 0.0) for g in ("router", "dispatch", "experts", "combine"))
            print(f"{model:34s} {v['name']:10s} {step['p50_us']:10.1f} {step['p95_us']:10.1f} "
                  f"{run['throughput']['tokens_per_s']:12.1f} {moe:9.1%}")
    return failed


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "perf":
        backend = sys.argv[4] if len(sys.argv) > 4 else "cpu"
        iters = int(sys.argv[5]) if len(sys.argv) > 5 else 20
        return 1 if perf(sys.argv[2], sys.argv[3], backend, iters) else 0
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        print(__doc__)
        return 2
    root = sys.argv[2]
    out_dir = os.path.join(root, "tests", "data", "conformance", "models")
    want = expected_models(root)
    if sys.argv[1] == "write":
        for old in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, old))
        for fname, m in want.items():
            with open(os.path.join(out_dir, fname), "w") as f:
                f.write(text(m))
        print(f"conformance: wrote {len(want)} models to {out_dir}")
        return 0
    have = sorted(os.listdir(out_dir))
    stale = [f for f in have if f not in want] + [f for f in want if f not in have]
    stale += [f for f in want if f in have and open(os.path.join(out_dir, f)).read() != text(want[f])]
    for f in sorted(set(stale)):
        print(f"conformance: {f} is out of date: run tests/conformance.py write .")
    print(f"conformance: {len(want)} models, {len(set(stale))} out of date")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
